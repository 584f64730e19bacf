"""Execute runs resumably and summarise them.

Layout of a report folder (one per dataset)::

    <reports>/<dataset>/<run>.jsonl   one line per answered query (appended as it is done)
    <reports>/<dataset>/<run>.json    the summary: config, metrics at every k, latency, …
    <reports>/<dataset>/<run>.md      the same as Markdown

Resuming: a query already in ``<run>.jsonl`` (under the same *context*: corpus index, candidates,
top_k) is not asked again, so an interrupted evaluation continues where it stopped and
``--limit 20`` followed by ``--limit 50`` only runs the 30 new queries (the query sample is a fixed,
seeded permutation: a larger limit extends a smaller one).

Several runs are executed *query-major* (each query through every pipeline, then the next query): the
pipelines of an ablation share one search per retrieval mode, and only one query's candidates are
held in memory.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rag_eval.answers import abstention_scores, citation_scores, exact_match, rouge_l, token_f1
from rag_eval.datasets.types import Corpus, Dataset, Document, Query
from rag_eval.metrics import DEFAULT_KS, METRICS, evaluate, metric_grid
from rag_eval.runs import RunConfig, file_stem
from rag_eval.stats import percentiles

logger = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------- queries


def has_gold(dataset: Dataset, query_id: str) -> bool:
    return any(grade > 0 for grade in dataset.qrels.get(query_id, {}).values())


def select_queries(
    dataset: Dataset, limit: int | None = None, *, seed: int = 0, require_gold: bool = True
) -> list[Query]:
    """The queries to evaluate, in dataset order. ``require_gold`` keeps only queries with a relevant
    document (the others cannot be scored by ranking metrics). ``limit`` keeps the first ``limit`` of a
    seeded random permutation, so the sample is spread over the whole set (ClapNQ lists all answerable
    questions first) and a larger limit is a superset of a smaller one."""
    pool = [query for query in dataset.queries if not require_gold or has_gold(dataset, query.id)]
    if limit is None or limit >= len(pool):
        return pool
    if limit < 1:
        raise ValueError(f"limit must be positive, got {limit}")
    keep = set(np.random.default_rng(seed).permutation(len(pool))[:limit].tolist())
    return [query for position, query in enumerate(pool) if position in keep]


def subset_corpus(dataset: Dataset, queries: Sequence[Query], sample: int, *, seed: int = 0) -> Dataset:
    """A smaller corpus for quick runs: every judged document of ``queries`` (relevant or not) plus
    ``sample`` other documents drawn at random (seeded). Scores on it are optimistic (fewer
    distractors) and only comparable with runs on the same subset."""
    judged = {doc_id for query in queries for doc_id in dataset.qrels.get(query.id, {}) if doc_id in dataset.corpus}
    others = [doc_id for doc_id in dataset.corpus if doc_id not in judged]
    picked = set(np.random.default_rng(seed).permutation(len(others))[: max(0, sample)].tolist())
    keep = judged | {others[i] for i in picked}
    corpus = Corpus(document for document in dataset.corpus.values() if document.id in keep)
    ids = {query.id for query in queries}
    return Dataset(
        name=dataset.name,
        corpus=corpus,
        queries=list(queries),
        qrels={qid: judged_docs for qid, judged_docs in dataset.qrels.items() if qid in ids},
    )


# --------------------------------------------------------------------------------------- log


class RunLog:
    """The per-query JSONL of one run. Records carry ``context``; others are ignored (not deleted)."""

    def __init__(self, path: Path, context: str) -> None:
        self.path = Path(path)
        self.context = context
        self.records: dict[str, dict[str, Any]] = {}
        self.stale = 0
        if self.path.exists():
            with self.path.open(encoding="utf-8") as handle:
                for line in handle:
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # a line cut short by an interruption
                    if record.get("context") != context:
                        self.stale += 1
                        continue
                    self.records[record["query_id"]] = record
            if self.stale:
                logger.warning("%s: %d records of another context ignored", self.path, self.stale)

    def done(self, query_id: str) -> bool:
        return query_id in self.records

    def append(self, record: dict[str, Any]) -> None:
        record = {**record, "context": self.context}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self.records[record["query_id"]] = record


def run_paths(report_dir: Path, name: str) -> dict[str, Path]:
    stem = file_stem(name)
    return {ext: Path(report_dir) / f"{stem}.{ext}" for ext in ("jsonl", "json", "md")}


async def execute(
    pipeline: Any,
    configs: Sequence[RunConfig],
    queries: Sequence[Query],
    report_dir: Path,
    *,
    context: str,
    progress: bool = True,
    description: str = "",
    dirs: Mapping[str, Path] | None = None,
) -> dict[str, RunLog]:
    """Every query through every config not yet logged for it; returns the logs by run name.
    ``dirs`` may put some runs' files elsewhere (``{run name: folder}``, e.g. a λ sweep)."""
    from tqdm.auto import tqdm

    logs = {
        config.name: RunLog(run_paths((dirs or {}).get(config.name, report_dir), config.name)["jsonl"], context)
        for config in configs
    }
    todo = [query for query in queries if any(not logs[c.name].done(query.id) for c in configs)]
    with tqdm(total=len(queries), initial=len(queries) - len(todo), desc=description or "queries",
              unit="q", disable=not progress) as bar:
        for query in todo:
            for config in configs:
                log = logs[config.name]
                if not log.done(query.id):
                    log.append(await pipeline.run(config, query))
            pipeline.clear_cache()
            bar.update(1)
    return logs


# --------------------------------------------------------------------------------------- summary


def ranking_metrics(
    records: Mapping[str, Mapping[str, Any]],
    dataset: Dataset,
    metrics: Sequence[str],
) -> Any:
    """:func:`rag_eval.metrics.evaluate` over the logged queries only."""
    run = {qid: record.get("ranking", []) for qid, record in records.items()}
    qrels = {qid: dataset.qrels.get(qid, {}) for qid in records}
    return evaluate(run, qrels, metrics)


def answer_metrics(records: Mapping[str, Mapping[str, Any]], dataset: Dataset) -> dict[str, Any]:
    """EM / token F1 / ROUGE-L over answerable questions with a reference answer that were answered
    (not abstained); citation precision / recall against the gold passages, over answered questions
    that have gold passages; abstention P / R over questions with an answerability label."""
    by_id = {query.id: query for query in dataset.queries}
    em: list[float] = []
    f1: list[float] = []
    rl: list[float] = []
    cite_p: list[float] = []
    cite_r: list[float] = []
    errors = 0
    abstained: dict[str, bool] = {}
    for qid, record in records.items():
        if "generation_error" in record:
            errors += 1
            continue
        if "answer" not in record:
            continue
        query = by_id.get(qid)
        if query is None:
            continue
        abstained[qid] = bool(record.get("abstained"))
        if query.answers and query.answerable is not False and not record.get("abstained"):
            em.append(exact_match(record["answer"], query.answers) or 0.0)
            f1.append(token_f1(record["answer"], query.answers) or 0.0)
            rl.append(rouge_l(record["answer"], query.answers) or 0.0)
        if not record.get("abstained") and has_gold(dataset, qid):
            cites = citation_scores(record.get("cited_doc_ids", []), dataset.qrels.get(qid, {}))
            if cites.precision is not None:
                cite_p.append(cites.precision)
            if cites.recall is not None:
                cite_r.append(cites.recall)

    def mean(values: list[float]) -> float | None:
        return round(float(np.mean(values)), 4) if values else None

    answerable = {query.id: query.answerable for query in dataset.queries}
    return {
        "answered": sum(1 for v in abstained.values() if not v),
        "abstained": sum(1 for v in abstained.values() if v),
        "generation_errors": errors,
        "exact_match": mean(em),
        "token_f1": mean(f1),
        "rouge_l": mean(rl),
        "scored_answers": len(em),
        "citation_precision": mean(cite_p),
        "citation_recall": mean(cite_r),
        "abstention": abstention_scores(abstained, answerable).to_dict(),
    }


def latency_summary(records: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, float | None]]:
    """p50 / p95 ms per stage key (``retrieve``, ``rerank.gmmr``, ``generate``, ``total``, …)."""
    values: dict[str, list[float]] = defaultdict(list)
    for record in records:
        for key, ms in record.get("latency_ms", {}).items():
            values[key].append(ms)
    return {key: {k: (round(v, 3) if v is not None else None) for k, v in percentiles(ms).items()}
            for key, ms in sorted(values.items())}


#: Keys of a record's ``stages`` that are gMMR details, not stage statuses.
GMMR_DETAILS = ("gmmr_lambda", "gmmr_fallback", "gmmr_relevance")


def summarize(
    config: RunConfig,
    dataset: Dataset,
    records: Mapping[str, Mapping[str, Any]],
    *,
    ks: Sequence[int] = DEFAULT_KS,
    metric_names: Sequence[str] = tuple(METRICS),
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    specs = metric_grid(metric_names, ks)
    result = ranking_metrics(records, dataset, specs)
    stage_status: dict[str, Counter[str]] = defaultdict(Counter)
    lambdas: list[float] = []
    relevances: Counter[str] = Counter()
    fallbacks = 0
    for record in records.values():
        fallbacks += "gmmr_fallback" in record.get("stages", {})
        for name, status in record.get("stages", {}).items():
            if name in GMMR_DETAILS:
                continue
            stage_status[name][status.split(":")[0]] += 1
        if "gmmr_lambda" in record.get("stages", {}):
            lambdas.append(float(record["stages"]["gmmr_lambda"]))
        if "gmmr_relevance" in record.get("stages", {}):
            relevances[str(record["stages"]["gmmr_relevance"])] += 1
    summary: dict[str, Any] = {
        "dataset": dataset.name,
        "run": config.name,
        "config": config.to_dict(),
        "queries": len(records),
        "evaluated": result.evaluated,
        "skipped_no_gold": len(result.skipped),
        "ks": sorted(set(ks)),
        "metrics": {spec: round(value, 4) for spec, value in result.means.items()},
        "per_query": {qid: {spec: round(v, 6) for spec, v in values.items()} for qid, values in result.per_query.items()},
        "latency_ms": latency_summary(records.values()),
        #: Queries whose search was another run's (``share_search``): not in this run's latency.
        "searches_reused": sum(1 for record in records.values() if record.get("search_reused")),
        "stage_status": {name: dict(counts) for name, counts in stage_status.items()},
    }
    if lambdas:
        summary["gmmr_lambda"] = {"mean": round(float(np.mean(lambdas)), 3), "values": dict(Counter(lambdas)),
                                  "adaptive_fallbacks": fallbacks}
    if relevances:
        summary["gmmr_relevance"] = dict(relevances)
    if config.llm:
        summary["answers"] = answer_metrics(records, dataset)
    if extra:
        summary.update(extra)
    return summary


def write_summary(summary: Mapping[str, Any], report_dir: Path) -> dict[str, Path]:
    paths = run_paths(report_dir, summary["run"])
    paths["json"].parent.mkdir(parents=True, exist_ok=True)
    paths["json"].write_text(json.dumps(summary, indent=2, ensure_ascii=False))
    paths["md"].write_text(run_markdown(summary))
    return paths


def _fmt(value: Any, digits: int = 3) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pm(stat: Mapping[str, Any]) -> str:
    if not stat or stat.get("mean") is None:
        return "–"
    return f"{stat['mean']:.3f} ± {stat['spread']:.3f} (n={stat['n']})"


def run_markdown(summary: Mapping[str, Any]) -> str:
    ks = summary["ks"]
    names = list(dict.fromkeys(spec.split("@")[0] for spec in summary["metrics"]))
    lines = [
        f"# {summary['run']} on {summary['dataset']}",
        "",
        f"{summary['queries']} queries run, {summary['evaluated']} with gold passages scored "
        f"({summary['skipped_no_gold']} without gold left out of the ranking metrics). "
        f"Config: `{json.dumps(summary['config'])}`.",
    ]
    if "index" in summary:
        index = summary["index"]
        lines.append(f"Index: {index.get('documents')} documents, {index.get('chunks')} chunks"
                     f"{' (corpus subset)' if summary.get('corpus_subset') else ''}.")
    lines += ["", "| metric | " + " | ".join(f"@{k}" for k in ks) + " |", "|---|" + "---:|" * len(ks)]
    for name in names:
        lines.append(f"| {name} | " + " | ".join(_fmt(summary["metrics"].get(f"{name}@{k}")) for k in ks) + " |")
    lines += ["", "| stage | p50 ms | p95 ms |", "|---|---:|---:|"]
    for key, values in summary["latency_ms"].items():
        lines.append(f"| {key} | {_fmt(values['p50'], 1)} | {_fmt(values['p95'], 1)} |")
    if summary.get("stage_status"):
        lines += ["", "Rerank stages: " + "; ".join(
            f"{name}: " + ", ".join(f"{status} {count}" for status, count in counts.items())
            for name, counts in summary["stage_status"].items()
        )]
    if "gmmr_lambda" in summary:
        lam = summary["gmmr_lambda"]
        lines.append(f"gMMR λ: mean {lam['mean']}, chosen {lam['values']}"
                     + (f"; adaptive λ fell back to the fixed default on {lam['adaptive_fallbacks']} queries"
                        if lam.get("adaptive_fallbacks") else "")
                     + (f"; relevance term {summary['gmmr_relevance']}" if summary.get("gmmr_relevance") else ""))
    answers = summary.get("answers")
    if answers:
        abst = answers["abstention"]
        lines += [
            "",
            "| answers | value |",
            "|---|---:|",
            f"| answered / abstained / errors | {answers['answered']} / {answers['abstained']} / {answers['generation_errors']} |",
            f"| exact match (n={answers['scored_answers']}) | {_fmt(answers['exact_match'])} |",
            f"| token F1 | {_fmt(answers['token_f1'])} |",
            f"| ROUGE-L | {_fmt(answers['rouge_l'])} |",
            f"| citation precision / recall | {_fmt(answers['citation_precision'])} / {_fmt(answers['citation_recall'])} |",
            f"| abstention precision / recall (n={abst['evaluated']}) | {_fmt(abst['precision'])} / {_fmt(abst['recall'])} |",
        ]
    judge = summary.get("judge")
    if judge and judge.get("items"):
        lines += ["", f"LLM judge ({judge.get('judge_model', '')}; {judge['items']} answers × {judge['repeats']} repeats; "
                  f"{judge['unparsed_replies']} unparsed replies of {judge['llm_calls']}): mean ± spread",
                  "", "| judge metric | real | off-topic control |", "|---|---:|---:|"]
        for metric, real in judge["real"].items():
            control = judge.get("control", {}).get(metric, {})
            lines.append(f"| {metric} | {_pm(real)} | {_pm(control)} |")
    return "\n".join(lines) + "\n"
