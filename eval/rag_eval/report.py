"""Comparison tables: every pipeline against a baseline, with paired bootstrap 95 % CIs of the deltas.

A delta whose CI contains 0 is marked ``(noise)``: at this number of queries it cannot be told apart
from chance (the CI is over the queries both pipelines ran, resampled together).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rag_eval.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, DeltaCI, paired_delta

#: The columns of a dataset's table (the first one also picks gMMR's best fixed λ).
HEADLINE: dict[str, list[str]] = {
    "vaswani": ["ndcg@10", "mrr@10", "recall@20"],
    "hotpotqa": ["recall@5", "coverage@5", "coverage@10", "ndcg@10"],
    "clapnq": ["ndcg@10", "mrr@10", "recall@5"],
    "mtrag-un": ["ndcg@10", "recall@5", "recall@10"],
}
DEFAULT_HEADLINE = ["ndcg@10", "recall@10", "mrr@10"]

PRETTY = {"ndcg": "nDCG", "mrr": "MRR", "recall": "Recall", "map": "MAP", "precision": "P", "hit": "Hit",
          "coverage": "coverage", "f1": "F1", "f2": "F2", "f3": "F3"}


def headline(dataset: str, available: Sequence[str]) -> list[str]:
    wanted = HEADLINE.get(dataset, DEFAULT_HEADLINE)
    chosen = [spec for spec in wanted if spec in available]
    return chosen or [spec for spec in DEFAULT_HEADLINE if spec in available] or list(available[:3])


def pretty(spec: str) -> str:
    name, _, k = spec.partition("@")
    return f"{PRETTY.get(name, name)}@{k}"


def deltas(
    summaries: Mapping[str, Mapping[str, Any]],
    baseline: str,
    metrics: Sequence[str],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> dict[str, dict[str, DeltaCI]]:
    """``{run: {metric: DeltaCI vs baseline}}`` from the summaries' ``per_query`` values."""
    base = summaries[baseline]["per_query"]
    out: dict[str, dict[str, DeltaCI]] = {}
    for name, summary in summaries.items():
        if name == baseline:
            continue
        per_query = summary["per_query"]
        out[name] = {
            spec: paired_delta(
                {q: v[spec] for q, v in per_query.items()},
                {q: v[spec] for q, v in base.items()},
                resamples=resamples,
                seed=seed,
            )
            for spec in metrics
        }
    return out


def format_delta(ci: DeltaCI) -> str:
    text = f"{ci.delta:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]"
    return f"{text} (noise)" if ci.noise else f"**{text}**"


def comparison_table(
    summaries: Mapping[str, Mapping[str, Any]],
    baseline: str,
    metrics: Sequence[str],
    *,
    order: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[str, dict[str, dict[str, dict[str, Any]]]]:
    """A Markdown table (one row per run; per metric its mean and Δ vs ``baseline`` [95 % CI]; total
    latency p50 / p95) and the deltas as JSON-able dicts."""
    found = deltas(summaries, baseline, metrics, resamples=resamples, seed=seed)
    header = ["pipeline", "n"]
    for spec in metrics:
        header += [pretty(spec), f"Δ {pretty(spec)} [95% CI]"]
    header.append("p50 / p95 ms")
    lines = ["| " + " | ".join(header) + " |", "|---|---:|" + "---:|---|" * len(metrics) + "---:|"]
    for name in order or list(summaries):
        if name not in summaries:
            continue
        summary = summaries[name]
        cells = [(labels or {}).get(name, name), str(summary["evaluated"])]
        for spec in metrics:
            cells.append(f"{summary['metrics'][spec]:.3f}")
            if name == baseline:
                cells.append("(baseline)")
            else:
                ci = found[name][spec]
                cells.append(format_delta(ci) + (f" n={ci.n}" if ci.n != summary["evaluated"] or ci.n != summaries[baseline]["evaluated"] else ""))
        total = summary["latency_ms"].get("total", {})
        cells.append(f"{_ms(total.get('p50'))} / {_ms(total.get('p95'))}")
        lines.append("| " + " | ".join(cells) + " |")
    as_json = {name: {spec: ci.to_dict() for spec, ci in per.items()} for name, per in found.items()}
    return "\n".join(lines), as_json


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:.1f}"


def retriever_of(summary: Mapping[str, Any]) -> str:
    """The run name of a summary's retriever alone: ``hybrid+gmmr:0.9`` → ``hybrid`` (``hybrid:rrf``…)."""
    config = summary["config"]
    fusion = config.get("fusion")
    return config["mode"] if config["mode"] != "hybrid" or fusion in (None, "min_max") else f"hybrid:{fusion}"


def vs_retriever_table(
    summaries: Mapping[str, Mapping[str, Any]],
    metrics: Sequence[str],
    *,
    order: Sequence[str] | None = None,
    labels: Mapping[str, str] | None = None,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[str, dict[str, dict[str, dict[str, Any]]]]:
    """Every rerank chain against *its own* retriever's order (``bm25+gmmr:0.9`` − ``bm25``): Δ [95 % CI]
    per metric, paired over the queries both ran. Rows whose retriever run is missing are left out."""
    header = ["chain", "vs", *(f"Δ {pretty(spec)} [95% CI]" for spec in metrics)]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---|" * len(metrics)]
    as_json: dict[str, dict[str, dict[str, Any]]] = {}
    for name in order or list(summaries):
        summary = summaries.get(name)
        if summary is None or not summary["config"].get("stages"):
            continue
        base = retriever_of(summary)
        if base not in summaries:
            continue
        found = deltas({base: summaries[base], name: summary}, base, metrics, resamples=resamples, seed=seed)[name]
        as_json[name] = {"vs": base, **{spec: ci.to_dict() for spec, ci in found.items()}}
        cells = [(labels or {}).get(name, name), base, *(format_delta(found[spec]) for spec in metrics)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines), as_json

