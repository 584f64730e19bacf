"""``ragctl eval``: offline evaluation of pipelines on the benchmark datasets (``rag_eval``).

Kept apart from ``cli.py`` so the other commands do not import the retriever, the reranker and torch.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rag_common.settings import LLMSettings
    from rag_eval.evaluation import EvalOptions, Evaluator

#: The four shared English datasets.
DATASETS = ("vaswani", "hotpotqa", "clapnq", "mtrag-un")
#: XQuAD in its shared languages (``xquad/<code>/`` under the datasets folder); ``xquad`` names all four.
XQUAD = ("xquad-en", "xquad-ro", "xquad-de", "xquad-es")


def parse_datasets(values: Sequence[str]) -> list[str]:
    """Built-in names (``all`` = the four English datasets and XQuAD's four languages; ``xquad`` = its
    four languages), and folders in BEIR layout (a path: kept as given)."""
    from rag_eval.datasets.folder import is_dataset_folder

    names: list[str] = []
    for value in values:
        if is_dataset_folder(value):
            names.append(value)
            continue
        for name in value.split(","):
            name = name.strip().lower()
            if not name:
                continue
            if name == "all":
                names += [*DATASETS, *XQUAD]
            elif name == "xquad":
                names += list(XQUAD)
            elif name in DATASETS or name in XQUAD or name == "mtrag":
                names.append("mtrag-un" if name == "mtrag" else name)
            else:
                raise ValueError(
                    f"unknown dataset {name!r}; use {', '.join(DATASETS)}, xquad (or {', '.join(XQUAD)}), all, "
                    "or the path of a folder in BEIR layout (corpus.jsonl, queries.jsonl, qrels/test.tsv; "
                    "docs/evaluation.md)"
                )
    return list(dict.fromkeys(names))


def parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise ValueError(f"--k wants comma-separated positive integers, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise ValueError(f"--k wants comma-separated positive integers, got {text!r}")
    return ks


def _llm_settings(stack: ExitStack, echo: Callable[[str], None]) -> LLMSettings:
    """The ``LLM_*`` endpoint if ``LLM_BASE_URL`` is set, else a local llama.cpp server started here."""
    from rag_common.settings import LLMSettings

    if os.environ.get("LLM_BASE_URL"):
        settings = LLMSettings()
        echo(f"LLM: {settings.model} at {settings.base_url}")
        return settings
    from ragctl.stack import free_port, start_llm_server

    logs = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ragctl-eval-llm-")))
    server = start_llm_server(free_port(), logs)
    stack.callback(server.stop)
    echo(f"LLM: local llama.cpp server (SmolLM2-135M) at {server.url}; set LLM_BASE_URL to use another endpoint")
    return LLMSettings(base_url=server.url)


def run_eval(
    *,
    datasets: Sequence[str],
    runs: Sequence[str],
    ablation: bool,
    limit: int | None,
    reports: Path,
    llm: bool,
    corpus_sample: int | None,
    ks: str,
    candidates: int | None,
    top_k: int | None,
    adaptive_limit: int,
    resamples: int,
    seed: int,
    plots: bool,
    progress: bool,
    judge: int = 0,
    echo: Callable[[str], None] = print,
    grid: str | None = None,
    answers: bool = False,
    off_topic: int = 50,
    answers_baseline: Path | None = None,
) -> int:
    """Returns the number of datasets evaluated (skipped ones, e.g. missing files, do not count).
    ``answers``: also the extractive answers through the served chain (``rag_eval.extractive_answers``)
    on a seeded sample of ``limit`` questions (default 200) and ``off_topic`` held-out questions."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from rag_eval.evaluation import EvalOptions, Evaluator
    from rag_eval.runs import DEFAULT_TOP_K, served_candidates, parse_run

    # One source of truth for the depth: the gateway's setting unless asked otherwise.
    candidates = candidates if candidates is not None else served_candidates()
    top_k = top_k if top_k is not None else min(DEFAULT_TOP_K, candidates)
    names = parse_datasets(datasets)
    for spec in runs:  # fail on a typo before loading any model
        if parse_run(spec, candidates=candidates, top_k=top_k).uses_llm and not llm:
            raise ValueError(f"run {spec!r} needs an LLM endpoint: add --llm")
    if judge and not llm:
        raise ValueError("--judge needs --llm (the judge is an LLM)")
    from rag_eval.selection import grid_runs

    grid_specs = grid_runs(grid) if grid else ()
    for spec in grid_specs:
        parse_run(spec, candidates=candidates, top_k=top_k)
    if not runs and not ablation and not grid_specs and not answers:
        raise ValueError("say what to run: --run SPEC (repeatable), --ablation, --grid NAME and/or --answers")
    baseline = None
    if answers_baseline is not None:
        from rag_eval.extractive_answers import load_summary

        baseline = load_summary(answers_baseline)  # fail on a wrong path before loading any model
    with ExitStack() as stack:
        options = EvalOptions(
            reports=reports,
            limit=limit,
            corpus_sample=corpus_sample,
            ks=parse_ks(ks),
            candidates=candidates,
            top_k=top_k,
            llm_settings=_llm_settings(stack, echo) if llm else None,
            adaptive_limit=adaptive_limit,
            resamples=resamples,
            seed=seed,
            plots=plots,
            progress=progress,
            judge_repeats=judge,
        )
        evaluator = Evaluator(options, echo=echo)
        done = 0
        answered: list[dict] = []
        for name in names:
            evaluated = False
            if runs or ablation or grid_specs:
                result = asyncio.run(evaluator.evaluate(name, runs=runs, ablation=ablation, grid=grid_specs))
                if result.skipped:
                    continue
                echo(f"{result.dataset}: reports in {reports / result.dataset}")
                evaluated = True
            if answers and (summary := _answers(evaluator, name, options, off_topic, echo)) is not None:
                answered.append(summary)
                evaluated = True
            done += evaluated
        if answered:
            _answers_report(answered, baseline, options, echo)
    return done


def _answers(evaluator: Evaluator, name: str, options: EvalOptions, off_topic: int, echo: Callable[[str], None]) -> dict | None:
    """One dataset's extractive answers (written next to its reports), or None when it is not on this
    machine or has no reference answers (Vaswani)."""
    from rag_eval.answer_containment import answerable_questions
    from rag_eval.datasets import DatasetNotFound, is_dataset_folder, load_dataset
    from rag_eval.extractive_answers import DEFAULT_LIMIT, evaluate_answers, write_summary

    try:
        dataset = load_dataset(name, root=options.root)
    except DatasetNotFound as exc:
        echo(f"{name}: skipped, {exc}")
        return None
    if not is_dataset_folder(name):
        dataset.name = name
    if not answerable_questions(dataset):
        echo(f"{dataset.name}: no answers run, no question has reference answers (answers.jsonl)")
        return None
    summary = asyncio.run(evaluate_answers(
        dataset, evaluator.embedder, options.index_cache or (options.reports / ".index"),
        limit=options.limit or DEFAULT_LIMIT, off_topic=off_topic, seed=options.seed, resamples=options.resamples,
        echo=echo, progress=options.progress,
    ))
    echo(f"{dataset.name}: answers in {write_summary(summary, options.reports)}")
    return summary


def _answers_report(summaries: list[dict], baseline: dict | None, options: EvalOptions, echo: Callable[[str], None]) -> None:
    """The table of the datasets' answers, and each paired against the baseline (default: the first
    dataset, when they share question ids, as XQuAD's languages do)."""
    from rag_eval.extractive_answers import compare, comparison_lines, table

    echo(table(summaries))
    reference = baseline if baseline is not None else summaries[0]
    for summary in summaries:
        if summary is reference or not set(summary["per_query"]) & set(reference["per_query"]):
            continue
        echo(comparison_lines(compare(summary, reference, resamples=options.resamples, seed=options.seed)))


def compare_summaries(
    paths: Sequence[Path], *, metrics: Sequence[str] = (), resamples: int = 2000, seed: int = 0
) -> str:
    """Paired bootstrap comparison of run summaries (``<reports>/<dataset>/<run>.json``) written by
    separate evaluations — e.g. the same run under two ``RETRIEVER_*`` settings, in two ``--reports``
    folders — on the queries they share; the first is the baseline. Rows are named
    ``<reports folder>/<run>``. Returns the Markdown table."""
    import json

    from rag_eval.report import comparison_table, headline

    if len(paths) < 2:
        raise ValueError("compare needs at least two summaries (the first is the baseline)")
    summaries: dict[str, dict] = {}
    for path in paths:
        path = Path(path)
        if not path.is_file():
            raise ValueError(f"missing summary {path}")
        summary = json.loads(path.read_text())
        if "per_query" not in summary:
            raise ValueError(f"{path} is not a run summary (no per_query)")
        name = f"{path.parent.parent.name}/{summary['run']}"
        if name in summaries:
            name = str(path)
        summaries[name] = summary
    datasets = {summary["dataset"] for summary in summaries.values()}
    if len(datasets) != 1:
        raise ValueError(f"summaries of different datasets: {sorted(datasets)}")
    baseline = next(iter(summaries))
    available = list(summaries[baseline]["metrics"])
    chosen = list(metrics) or headline(datasets.pop(), available)
    unknown = [spec for spec in chosen if spec not in available]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; e.g. {', '.join(available[:6])}")
    table, _ = comparison_table(summaries, baseline, chosen, resamples=resamples, seed=seed)
    return table


def select_defaults(
    *, reports: Path, datasets: Sequence[str], grid: str | None, runs: Sequence[str] = (), default: str = "default",
    metric: str = "ndcg@10", report_metrics: Sequence[str] = (), tie: float = 0.001, resamples: int = 2000,
    seed: int = 0, out: Path | None = None,
) -> str:
    """``ragctl eval-select``: the leave-one-dataset-out choice (``rag_eval.selection``) over summaries
    already written by ``ragctl eval`` (``--grid NAME`` or ``--run``). Returns the Markdown."""
    import json

    from rag_eval.runs import parse_run
    from rag_eval.selection import grid_runs, leave_one_dataset_out, load_grid, selection_markdown

    candidates = list(runs) if runs else list(grid_runs(grid or "defaults"))
    names = [parse_run(spec).name for spec in candidates]  # the normalised names are the file names
    baseline = parse_run(default).name
    chosen_datasets = [name for value in datasets for name in parse_datasets([value])]
    loaded = load_grid(Path(reports), chosen_datasets, list(dict.fromkeys([baseline, *names])))
    selection = leave_one_dataset_out(loaded, chosen_datasets, names, baseline, metric=metric,
                                      report_metrics=report_metrics, tie=tie, resamples=resamples, seed=seed)
    if out is not None:
        Path(out).write_text(json.dumps(selection.to_dict(), indent=2))
    return selection_markdown(selection)
