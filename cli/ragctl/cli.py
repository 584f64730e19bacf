"""``ragctl``: run the local stack and talk to it."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from ragctl.ingest_client import MIB, IngestOptions, IngestSummary
from ragctl.ingest_client import ingest as run_ingestion
from ragctl.stack import API_KEY_ENV, DEFAULT_PORTS, StackError, start_stack
from ragctl.supervisor import GaveUp, Supervisor

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
console = Console()

REPO_ROOT = Path(__file__).resolve().parents[2]


def upload_files(gateway_url: str, paths: list[Path], timeout_s: float = 600.0, api_key: str | None = None) -> dict:
    """Upload ``paths`` (files or directories) in batches; the summed ``IngestResponse`` as a dict.

    Failed files, and batches the gateway refused, are in ``failed``; nothing is raised for them.
    """
    return run_ingestion(paths, gateway_url, IngestOptions(timeout_s=timeout_s, api_key=api_key)).as_dict()


@app.command()
def ingest(
    targets: list[str] = typer.Argument(..., help="Files, directories (recursive) or http(s):// URLs", metavar="PATH|URL..."),
    gateway: str = typer.Option("http://127.0.0.1:8000", envvar="RAGCTL_GATEWAY", help="Gateway base URL"),
    batch_size: int = typer.Option(16, min=1, help="Files per upload request"),
    batch_mb: float = typer.Option(8.0, min=0.01, help="Bytes per upload request, MiB (a larger file goes alone)"),
    concurrency: int = typer.Option(2, min=1, help="Upload requests (and URL downloads) in flight at most"),
    max_file_mb: float = typer.Option(20.0, min=0.01, help="Larger files and downloads are reported failed, MiB"),
    timeout: float = typer.Option(600.0, min=1, help="Timeout of one upload request, seconds"),
    as_json: bool = typer.Option(False, "--json", help="Print the summary as JSON instead of tables"),
    api_key: str | None = typer.Option(
        None, envvar="RAGCTL_API_KEY", help="API key with the ingest scope (`make run` writes one to var/api-key)"
    ),
    acl_group: list[str] = typer.Option(
        [], "--acl-group", help="Only this group may read what is uploaded (repeat; with --acl-user: either)"
    ),
    acl_user: list[str] = typer.Option([], "--acl-user", help="Only this user may read what is uploaded (repeat)"),
) -> None:
    """Upload files and web pages through the gateway; exit code 1 if any of them failed.

    Without --acl-group/--acl-user everyone in the key's tenant may read the documents."""
    out = Console()  # per call, so the terminal width is read now
    options = IngestOptions(
        batch_size=batch_size,
        batch_bytes=int(batch_mb * MIB),
        concurrency=concurrency,
        timeout_s=timeout,
        max_file_bytes=int(max_file_mb * MIB),
        api_key=api_key,
        acl={"groups": acl_group, "users": acl_user} if acl_group or acl_user else None,
    )
    progress = Progress(
        TextColumn("uploading"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
        console=out, transient=True, disable=as_json or not out.is_terminal,
    )
    task = progress.add_task("uploading", total=None)
    with progress:
        summary = run_ingestion(
            targets,
            gateway,
            options,
            on_total=lambda total: progress.update(task, total=total),
            on_progress=lambda done: progress.advance(task, done),
        )
    if as_json:
        out.print_json(data=summary.as_dict())
    else:
        _print_summary(out, summary)
    raise typer.Exit(1 if summary.failed else 0)


def _print_summary(out: Console, summary: IngestSummary) -> None:
    table = Table(title="ingestion summary", show_header=False)
    table.add_column("what")
    table.add_column("count", justify="right")
    table.add_row("documents written", str(summary.documents))
    table.add_row("chunks written", str(summary.chunks))
    table.add_row("skipped (unchanged)", str(summary.skipped))
    table.add_row("failed", str(len(summary.failed)), style="red" if summary.failed else None)
    if summary.ignored:
        table.add_row("ignored (unsupported type, in directories)", str(len(summary.ignored)))
    out.print(table)
    if summary.failed:
        failures = Table(title="failed", show_lines=False)
        failures.add_column("name", overflow="fold")
        failures.add_column("reason", overflow="fold")
        for failure in summary.failed:
            failures.add_row(failure.name, failure.reason)
        out.print(failures)


@app.command()
def up(
    data_dir: Path = typer.Option(REPO_ROOT / "var", help="Index, Redis data and logs"),
    demo_corpus: Path = typer.Option(REPO_ROOT / "docs", help="Ingested at start; empty string to skip"),
) -> None:
    """Start Redis, the local LLM and the five services; ingest the demo corpus; run until Ctrl-C."""
    ports = dict(DEFAULT_PORTS)
    console.print(f"[bold]starting the stack[/] (logs in {data_dir / 'logs'})")
    started = time.perf_counter()
    try:
        stack, env = start_stack(ports, data_dir)
    except StackError as exc:
        console.print(f"[red]could not start the stack:[/] {exc}")
        raise typer.Exit(1) from exc
    gateway = f"http://127.0.0.1:{ports['gateway']}"
    api_key, key_file = env[API_KEY_ENV], data_dir / "api-key"
    supervisor = Supervisor(stack, report=lambda line: console.print(f"[yellow]{time.strftime('%H:%M:%S')} {line}[/]"))
    exit_code = 0
    try:
        console.print(f"all services ready in {time.perf_counter() - started:.1f}s")
        if str(demo_corpus) and demo_corpus.is_dir():
            files = sorted(demo_corpus.glob("*.md"))
            summary = upload_files(gateway, files, api_key=api_key)
            console.print(
                f"ingested demo corpus {demo_corpus}: {summary['documents']} documents, "
                f"{summary['chunks']} chunks, {summary['skipped']} unchanged, {len(summary['failed'])} failed"
            )
        for name, port in ports.items():
            console.print(f"  {name:<10} {port}")
        console.print(f"\nAPI key for this run (every scope; also in {key_file}):\n  {api_key}")
        console.print("\n[bold]try:[/]")
        console.print(
            f"curl -s {gateway}/v1/chat -H 'content-type: application/json' "
            f"-H 'Authorization: Bearer {api_key}' "
            "-d '{\"message\": \"Where are conversations stored?\"}'",
            soft_wrap=True,
        )
        console.print(f"or open {gateway}/ in a browser and sign in with the API key (docs/web-ui.md)")
        console.print("\nA process that exits is restarted (ragctl/supervisor.py); Ctrl-C stops everything.")
        stop = threading.Event()
        # Installed explicitly: a shell that starts us in the background leaves SIGINT ignored.
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.is_set():
            try:
                supervisor.check()
            except GaveUp as exc:
                console.print(f"[red]{exc}[/]\n(logs in {data_dir / 'logs'})")
                exit_code = 1
                break
            stop.wait(0.5)
    finally:
        supervisor.stop()
        console.print("stopping...")
        stack.stop()
    raise typer.Exit(exit_code)


@app.command("eval")
def eval_command(
    dataset: list[str] = typer.Option(
        ..., "--dataset", "-d", help="vaswani, hotpotqa, clapnq, mtrag-un, xquad (= xquad-en, xquad-ro, xquad-de, "
        "xquad-es) or all (the eight), or a folder in BEIR layout (corpus.jsonl, queries.jsonl, qrels/test.tsv, "
        "optional answers.jsonl); repeat or comma-separate"
    ),
    run: list[str] | None = typer.Option(
        None, "--run", "-r", help="A pipeline spec, e.g. hybrid+diffusion+gmmr:0.7 (repeatable; see docs/evaluation.md)"
    ),
    ablation: bool = typer.Option(False, "--ablation", help="The ablation matrix, compared with dense"),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="A fixed random sample of this many queries (--answers: default 200)"
    ),
    reports: Path = typer.Option(REPO_ROOT / "reports", "--reports", help="Report folder (one subfolder per dataset)"),
    llm: bool = typer.Option(
        False, "--llm", help="Allow LLM runs (LLM_* endpoint, or a local llama.cpp server if LLM_BASE_URL is unset)"
    ),
    corpus_sample: int | None = typer.Option(
        None, "--corpus-sample", min=0, help="Index only the judged documents of the queries plus N random others"
    ),
    ks: str = typer.Option("1,3,5,10,20", "--k", help="Metric cut-offs, comma-separated"),
    candidates: int = typer.Option(
        None, min=1, max=200,
        help="Chunks retrieved per query (the reranker's input); default GATEWAY_RETRIEVAL_CANDIDATES, the served depth",
    ),
    top_k: int = typer.Option(
        None, min=1, max=200, help="Chunks a pipeline returns (metrics are cut at --k); default min(20, candidates)"
    ),
    adaptive_limit: int = typer.Option(20, min=1, help="Queries of the LLM rows of --ablation (they are slow)"),
    resamples: int = typer.Option(2000, min=100, help="Bootstrap resamples of the 95% CIs"),
    seed: int = typer.Option(0, help="Seed of the query sample, corpus sample and bootstrap"),
    plots: bool = typer.Option(True, "--plots/--no-plots", help="Write PNG plots next to the reports"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="tqdm progress bars"),
    judge: int = typer.Option(0, "--judge", min=0, help="LLM-judge the answers of LLM runs N times (needs --llm)"),
    grid: str | None = typer.Option(
        None, "--grid", help="Also run a selection grid (defaults: fusion x gMMR x depth) for ragctl eval-select"
    ),
    answers: bool = typer.Option(
        False, "--answers", help="Also extractive answers through the served chain on datasets with reference answers "
        "(answers.jsonl): share containing a gold answer, abstentions, and abstentions on held-out off-topic questions",
    ),
    off_topic: int = typer.Option(
        50, "--off-topic", min=0, help="--answers: questions of held-out documents asked against the rest (0 = none)"
    ),
    answers_baseline: Path | None = typer.Option(
        None, "--answers-baseline", help="--answers: pair each dataset against this answers-extractive.json "
        "(default: the first dataset of this command, when the question ids are shared)",
    ),
) -> None:
    """Evaluate pipelines in-process on benchmark datasets; resumable (reruns skip queries already done)."""
    from ragctl.eval_command import run_eval

    try:
        done = run_eval(
            datasets=dataset, runs=run or [], ablation=ablation, limit=limit, reports=reports, llm=llm,
            corpus_sample=corpus_sample, ks=ks, candidates=candidates, top_k=top_k, adaptive_limit=adaptive_limit,
            resamples=resamples, seed=seed, plots=plots, progress=progress, judge=judge, echo=typer.echo, grid=grid,
            answers=answers, off_topic=off_topic, answers_baseline=answers_baseline,
        )
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    raise typer.Exit(0 if done else 1)


@app.command("eval-select")
def eval_select_command(
    dataset: list[str] = typer.Option(
        ["hotpotqa", "clapnq", "mtrag-un", "vaswani"], "--dataset", "-d", help="Datasets of the rotation (repeatable)"
    ),
    reports: Path = typer.Option(REPO_ROOT / "reports", "--reports", help="Report folder the runs were written to"),
    grid: str | None = typer.Option("defaults", "--grid", help="Candidates: a named grid (rag_eval.selection.GRIDS)"),
    run: list[str] | None = typer.Option(None, "--run", "-r", help="Candidates instead of --grid, in preference order"),
    default: str = typer.Option("default", "--default", help="The current default's run (the baseline)"),
    metric: str = typer.Option("ndcg@10", "--metric", help="The criterion (mean over the training datasets)"),
    report_metric: list[str] | None = typer.Option(None, "--report-metric", "-m", help="Also report these held out"),
    tie: float = typer.Option(0.001, "--tie", min=0.0, help="Criterion differences below this are ties"),
    resamples: int = typer.Option(2000, min=100, help="Bootstrap resamples of the 95% CIs"),
    seed: int = typer.Option(0, help="Seed of the bootstrap"),
    out: Path | None = typer.Option(None, "--out", help="Also write the selection as JSON here"),
) -> None:
    """Choose a default on all but one dataset, report it on the held-out one against the current
    default (paired 95% CIs), rotate; then the choice on all datasets and whether to adopt it."""
    from ragctl.eval_command import select_defaults

    try:
        typer.echo(select_defaults(
            reports=reports, datasets=dataset, grid=None if run else grid, runs=run or (), default=default,
            metric=metric, report_metrics=report_metric or (), tie=tie, resamples=resamples, seed=seed, out=out,
        ))
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc


@app.command("eval-compare")
def eval_compare_command(
    summaries: list[Path] = typer.Argument(..., help="Run summaries <reports>/<dataset>/<run>.json; the first is the baseline"),
    metric: list[str] | None = typer.Option(None, "--metric", "-m", help="e.g. ndcg@10 (repeatable); default the dataset's headline"),
    resamples: int = typer.Option(2000, min=100, help="Bootstrap resamples of the 95% CIs"),
    seed: int = typer.Option(0, help="Seed of the bootstrap"),
) -> None:
    """Paired bootstrap CIs between runs of separate evaluations (e.g. one setting changed between two --reports)."""
    from ragctl.eval_command import compare_summaries

    try:
        typer.echo(compare_summaries(summaries, metrics=metric or (), resamples=resamples, seed=seed))
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc


keys_app = typer.Typer(no_args_is_help=True, help="API keys of the gateway (stored hashed in its Redis)")
app.add_typer(keys_app, name="keys")
_REDIS_OPTION = typer.Option("redis://127.0.0.1:6379/0", "--redis-url", envvar="GATEWAY_REDIS_URL", help="The gateway's Redis")


@keys_app.command("create")
def keys_create(
    tenant: str = typer.Option(..., help="Tenant the key acts in"),
    user: str = typer.Option(..., help="User the key acts as"),
    group: list[str] = typer.Option([], "--group", help="A group of the user (repeat for several)"),
    scope: list[str] = typer.Option(["chat"], "--scope", help="chat, ingest or admin (repeat for several)"),
    ttl_days: float | None = typer.Option(None, "--ttl-days", min=0.001, help="Expires after this many days; default never"),
    description: str = typer.Option("", help="What the key is for"),
    redis_url: str = _REDIS_OPTION,
) -> None:
    """Create a key and print its token (shown only now: only its hash is stored)."""
    from ragctl.keys import create_key

    unknown = sorted(set(scope) - {"chat", "ingest", "admin"})
    if unknown:
        raise typer.BadParameter(f"unknown scope(s) {', '.join(unknown)}; use chat, ingest, admin", param_hint="--scope")
    try:
        created = create_key(
            redis_url,
            tenant=tenant,
            user=user,
            groups=group,
            scopes=scope,  # type: ignore[arg-type]
            ttl_s=ttl_days * 86400 if ttl_days is not None else None,
            description=description,
        )
    except ValueError as exc:  # an identity the services would refuse (tenant or name characters)
        raise typer.BadParameter(str(exc)) from exc
    typer.echo(created.token)
    typer.echo(f"key id {created.info.key_id}: {tenant}/{user}, scopes {', '.join(scope)}", err=True)


@keys_app.command("list")
def keys_list(redis_url: str = _REDIS_OPTION) -> None:
    """Every key: id, tenant, user, groups, scopes, expiry (never the token)."""
    from ragctl.keys import list_keys

    table = Table("key id", "tenant", "user", "groups", "scopes", "expires", "description")
    for info in list_keys(redis_url):
        expires = time.strftime("%Y-%m-%d %H:%M", time.gmtime(info.expires_at)) if info.expires_at else "never"
        table.add_row(info.key_id, info.tenant, info.user, ", ".join(info.groups), ", ".join(info.scopes), expires, info.description)
    Console().print(table)


@keys_app.command("revoke")
def keys_revoke(key_id: str = typer.Argument(..., help="The key id (`ragctl keys list`)"), redis_url: str = _REDIS_OPTION) -> None:
    """Revoke a key at once; exit code 1 if there is no such key."""
    from ragctl.keys import revoke_key

    if not revoke_key(redis_url, key_id):
        typer.echo(f"no key with id {key_id!r}", err=True)
        raise typer.Exit(1)
    typer.echo(f"revoked {key_id}")


@app.command("calibrate")
def calibrate_command(
    dataset: list[str] = typer.Option(
        ["clapnq", "mtrag-un", "xquad-en", "xquad-ro", "xquad-de", "xquad-es"], "--dataset", "-d",
        help="Datasets with answerable and unanswerable questions, or all answerable with reference answers "
        "(xquad-ro, ...: off-topic questions from held-out documents); repeatable, pooled, each weighing the same. "
        "Default: the shipped gate's, ClapNQ, MTRAG-UN and XQuAD's four languages",
    ),
    fit_half: str = typer.Option("A", "--fit-half", help="Fit on half A or B of the seeded per-class split; report on the other"),
    seed: int = typer.Option(0, help="Seed of the split"),
    out: Path = typer.Option(
        REPO_ROOT / "services/generator/rag_generator/data/answerability_gate.json",
        "--out",
        help="Where the gate's parameters are written (GENERATOR_GATE_PATH reads them)",
    ),
    report: Path | None = typer.Option(None, "--report", help="Also write the held-out report (both directions) as JSON"),
    index_cache: Path = typer.Option(REPO_ROOT / "reports" / ".index", "--index-cache", help="Reused embedded indexes"),
    limit: int | None = typer.Option(
        None, "--limit", min=1, help="All-answerable datasets (XQuAD): at most this many questions per class (seeded)"
    ),
    evaluate: bool = typer.Option(
        False, "--evaluate", help="Fit nothing, write no gate: report the served gate (GENERATOR_GATE_PATH) on every row, per dataset"
    ),
    max_answerable_abstention: float | None = typer.Option(
        None, "--max-answerable-abstention", min=0.001, max=1.0,
        help="Threshold rule: the best abstention F1 among thresholds abstaining on at most this share of the "
        "answerable questions of the fit (each dataset weighing the same); 1 = no bound. Default: "
        "rag_eval.calibration.MAX_ANSWERABLE_ABSTENTION (0.10)",
    ),
) -> None:
    """Fit the generator's answerability gate on one half of the datasets and report it on the other half,
    and each dataset (each XQuAD language) with a gate fitted on the others only."""
    from ragctl.calibrate_command import run_calibration

    if fit_half not in ("A", "B"):
        console.print("[red]--fit-half must be A or B[/]")
        raise typer.Exit(2)
    try:
        summary = run_calibration(
            dataset, fit_half, seed, out, report, index_cache, limit=limit, evaluate=evaluate,
            **({"max_answerable_abstention": max_answerable_abstention} if max_answerable_abstention is not None else {}),
        )
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(summary, indent=2))


@app.command("fit-scorer")
def fit_scorer_command(
    dataset: list[str] = typer.Option(
        ["xquad-en", "xquad-ro", "xquad-de", "xquad-es", "hotpotqa", "clapnq"], "--dataset", "-d",
        help="Datasets with sentence labels (xquad-<language>, hotpotqa, clapnq); repeatable, each weighs the same",
    ),
    fit_half: str = typer.Option("A", "--fit-half", help="Fit on half A or B (by passage group); report on the other"),
    seed: int = typer.Option(0, help="Seed of the split and of the question sample"),
    out: Path = typer.Option(
        REPO_ROOT / "services/generator/rag_generator/data/sentence_scorer.json", "--out",
        help="Where the scorer's parameters are written (the extractive answerer reads them)",
    ),
    report: Path | None = typer.Option(None, "--report", help="Also write the held-out report (both directions) as JSON"),
    index_cache: Path = typer.Option(REPO_ROOT / "reports" / ".index", "--index-cache", help="Reused embedded indexes"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="At most this many questions per dataset (seeded)"),
    c: float = typer.Option(1.0, "--c", min=1e-6, help="Inverse L2 regularisation strength of the logistic model"),
    rows: Path | None = typer.Option(None, "--rows", help="Labelled rows: read from this JSON if it exists, else computed and written there"),
) -> None:
    """Fit the extractive answerer's sentence scorer on one half of the datasets and report it on the other half."""
    from ragctl.fit_scorer_command import run_fit_scorer

    if fit_half not in ("A", "B"):
        console.print("[red]--fit-half must be A or B[/]")
        raise typer.Exit(2)
    try:
        summary = run_fit_scorer(dataset, fit_half, seed, out, report, index_cache, limit=limit, c=c, rows_cache=rows)  # type: ignore[arg-type]
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(summary, indent=2))


@app.command("counterfactual")
def counterfactual_command(
    dataset: str = typer.Option(..., "--dataset", "-d", help="xquad-en, xquad-ro, xquad-de, xquad-es, hotpotqa, or a BEIR folder with answers.jsonl"),
    out: Path = typer.Option(..., "--out", help="Folder to write (BEIR layout + conflicts.jsonl + manifest.json)"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Planted questions (as many untouched controls are added)"),
    seed: int = typer.Option(0, help="Seed of the choice of questions, false values and fit/held-out split"),
    language: str | None = typer.Option(None, "--language", help="The questions' language (default: the dataset's; a folder needs it)"),
) -> None:
    """Write a counterfactual set: answering passages copied with the answer replaced by a false value of the same kind."""
    from ragctl.counterfactual_command import run_counterfactual

    try:
        counts = run_counterfactual(dataset, out, limit=limit, seed=seed, language=language)
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(counts, indent=2, ensure_ascii=False))


@app.command("train-fusion")
def train_fusion_command(
    dataset: list[str] = typer.Option(
        ["hotpotqa", "clapnq", "mtrag-un", "vaswani"], "--dataset", "-d", help="Training datasets (repeatable; pooled)"
    ),
    out: Path = typer.Option(
        REPO_ROOT / "services/retriever/rag_retriever/data/fusion_model.json",
        "--out",
        help="Where the parameters are written (RETRIEVER_FUSION_MODEL reads them)",
    ),
    folds: int = typer.Option(5, min=2, help="Folds by question of the held-out evaluation"),
    seed: int = typer.Option(0, help="Seed of the query sample, the folds and the bootstrap"),
    limit: int | None = typer.Option(None, "--limit", min=1, help="A fixed random sample of this many queries per dataset"),
    hard_negatives: int = typer.Option(10, min=1, help="Non-relevant candidates per question: of the first pass, and of the graph's additions"),
    drop: list[str] | None = typer.Option(None, "--drop", help="Leave a feature group out of the model (repeatable): "
                                          "dense, bm25, hybrid, hop, ppr, entity, section, language"),
    weigh: list[str] | None = typer.Option(None, "--weigh", help="NAME=N: the dataset's questions together count as "
                                           "N questions in training (repeatable; default: one each)"),
    ablate: bool = typer.Option(True, "--ablation/--no-ablation", help="Also the drop-one-feature-group ablation"),
    reports: Path = typer.Option(REPO_ROOT / "reports", "--reports", help="Report folder (fusion_training.{json,md})"),
) -> None:
    """Train learned fusion on the datasets; report it held out (k-fold by question, leave one dataset out,
    leave one XQuAD language out)."""
    from ragctl.train_fusion_command import parse_weights, run_training

    try:
        report = run_training(dataset, out, folds=folds, seed=seed, limit=limit, hard_negatives=hard_negatives,
                              drop_groups=drop or [], reports=reports, ablate=ablate,
                              weigh=parse_weights(weigh or []))
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    typer.echo((reports / "fusion_training.md").read_text())
    typer.echo(f"written {report['written']} in {report['seconds']} s")


@app.command("logs")
def logs_command(
    path: Path = typer.Option(
        REPO_ROOT / "var" / "query-logs" / "queries.jsonl",
        "--path",
        envvar="GATEWAY_QUERY_LOG_PATH",
        help="The gateway's query-log file (rotated copies .1, .2... are read too)",
    ),
    tenant: str | None = typer.Option(None, "--tenant", help="Only this tenant"),
    user: str | None = typer.Option(
        None, "--user", help="Only this user of --tenant (hashed as the gateway does, with GATEWAY_QUERY_LOG_USER_SALT)"
    ),
    conversation: str | None = typer.Option(None, "--conversation", help="Only this conversation id"),
    turn_id: str | None = typer.Option(None, "--turn-id", help="Only this turn (its turn record and its feedback)"),
    trace_id: str | None = typer.Option(None, "--trace-id", help="Only this OpenTelemetry trace id"),
    event: str | None = typer.Option(None, "--event", help="turn or feedback"),
    intent: str | None = typer.Option(None, "--intent", help="rag, chitchat, meta or out_of_scope"),
    abstained: bool | None = typer.Option(None, "--abstained/--answered", help="Only abstentions, or only answers"),
    degraded: bool | None = typer.Option(None, "--degraded/--not-degraded", help="Only degraded turns, or only whole ones"),
    feedback: str | None = typer.Option(None, "--feedback", help="up, down or any: only records carrying that feedback"),
    since: str | None = typer.Option(None, "--since", help="Only records at or after this ISO time (e.g. 2025-01-02T10:00)"),
    last: int | None = typer.Option(None, "--last", min=1, help="Only the last N matching records"),
    as_json: bool = typer.Option(False, "--json", help="One JSON record per line instead of a table"),
) -> None:
    """Read the local query log: one record per chat turn and per feedback, oldest first."""
    from ragctl.logs_command import LogQuery, run_logs

    try:
        query = LogQuery(
            tenant=tenant, user=user, conversation=conversation, turn_id=turn_id, trace_id=trace_id, event=event,
            intent=intent, abstained=abstained, degraded=degraded, feedback=feedback, since=since, last=last,
        )
        exit_code = run_logs(path, query, as_json=as_json, out=Console(), echo=typer.echo)
    except ValueError as exc:
        console.print(f"[red]{exc}[/]")
        raise typer.Exit(2) from exc
    raise typer.Exit(exit_code)


@app.command("dashboards")
def dashboards_command(
    opensearch_url: str = typer.Option(
        "http://localhost:9200", "--opensearch-url", envvar="OPENSEARCH_URL", help="Cluster for the index template and ISM policy; empty to skip"
    ),
    dashboards_url: str = typer.Option(
        "http://localhost:5601", "--dashboards-url", envvar="DASHBOARDS_URL", help="OpenSearch Dashboards for the saved objects; empty to skip"
    ),
    user: str | None = typer.Option(None, "--user", envvar="OPENSEARCH_USER", help="Basic-auth user (both APIs)"),
    password: str | None = typer.Option(None, "--password", envvar="OPENSEARCH_PASSWORD", help="Basic-auth password"),
    insecure: bool = typer.Option(False, "--insecure", help="Do not verify TLS certificates"),
) -> None:
    """Install the query log's index template and ISM policy (deploy/opensearch/) and import its
    Dashboards saved objects (deploy/dashboards/*.ndjson); exit code 1 if any step failed."""
    from ragctl.dashboards import install

    auth = (user, password or "") if user else None
    report = install(opensearch_url or None, dashboards_url or None, auth=auth, verify=not insecure)
    for step in report.steps:
        colour = "green" if step["ok"] else "red"
        console.print(f"[{colour}]{step['step']}: {step['status']}[/]")
        if not step["ok"]:
            console.print(json.dumps(step["body"], indent=2)[:2000])
    raise typer.Exit(0 if report.ok else 1)


@app.command("config-docs")
def config_docs_command(
    check: bool = typer.Option(False, "--check", help="Write nothing; exit code 1 if the file is stale"),
) -> None:
    """Write docs/configuration.md (every environment variable, its default and description) from the
    services' settings classes."""
    from ragctl.config_docs import DOC_PATH, REGENERATE, is_current, write

    shown = DOC_PATH.relative_to(REPO_ROOT)
    if check:
        current = is_current()
        typer.echo(f"{shown} is up to date" if current else f"{shown} is stale: run `{REGENERATE}`")
        raise typer.Exit(0 if current else 1)
    typer.echo(f"{shown} {'written' if write() else 'unchanged'}")


if __name__ == "__main__":
    app()
