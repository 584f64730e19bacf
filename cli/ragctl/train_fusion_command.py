"""``ragctl train-fusion``: extract learned fusion's features on the datasets, report the model held
out (k-fold by question within each dataset, pooled over the datasets, leave one dataset out and, for
XQuAD's languages, leave one language out), with the drop-one-feature-group ablation, then fit it on
every question and write the parameter file the retriever serves (``RETRIEVER_FUSION_MODEL``).

XQuAD's languages (``xquad-<code>``) are one family: translations of the same questions, which share
their folds and are left out together by leave-one-dataset-out (``rag_eval.fusion_training``)."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rag_eval import fusion_training as training
from rag_eval.datasets import XQUAD_LANGUAGES, load_dataset
from rag_eval.datasets.types import Dataset
from rag_eval.report import format_delta, headline, pretty
from rag_eval.runner import select_queries
from rag_eval.runs import DEFAULT_CANDIDATES
from rag_eval.stats import DeltaCI
from rag_retriever.fusion_features import FEATURE_GROUPS, FEATURE_NAMES
from rag_retriever.learned_fusion import SCHEMA_VERSION, FusionModel
from rag_retriever.runtime import build_embedder
from rag_retriever.settings import RetrieverSettings


async def _examples(
    dataset: Dataset, limit: int | None, seed: int, depth: int, reports: Path, embedder: Any, *, ppr: bool
) -> list[training.QueryExamples]:
    from rag_eval.pipeline import open_retriever

    queries = select_queries(dataset, limit, seed=seed, require_gold=True)
    family, language = family_and_language(dataset.name)
    async with open_retriever(dataset, reports / ".index", embedder) as (retriever, index):
        cache = training.cache_path(reports / dataset.name, index["fingerprint"], depth, ppr=ppr)
        return await training.extract(retriever.search_services["min_max"], dataset, queries, depth, ppr=ppr,
                                      cache=cache, family=family, language=language)


def family_and_language(name: str) -> tuple[str, str | None]:
    """``xquad-<code>``: the XQuAD family, language ``code``; any other dataset: its own, language unknown."""
    code = name.removeprefix("xquad-")
    return ("xquad", code) if code != name and code in XQUAD_LANGUAGES else ("", None)


def parse_weights(specs: Sequence[str]) -> dict[str, float]:
    """``NAME=N`` (the dataset's questions together count as N questions in training) → {NAME: N}."""
    out = {}
    for spec in specs:
        name, _, value = spec.partition("=")
        try:
            out[name] = float(value)
        except ValueError:
            raise ValueError(f"--weigh wants NAME=N (e.g. xquad-ro=100), got {spec!r}") from None
        if out[name] <= 0:
            raise ValueError(f"--weigh {spec!r}: N must be positive")
    return out


def _rows(
    examples: Sequence[training.QueryExamples], rankings: dict[str, list[str]], baseline: dict[str, list[str]],
    datasets: dict[str, Dataset], seed: int,
) -> dict[str, dict[str, Any]]:
    """Dataset → metric → {value, baseline, delta, low, high, noise, n} (held-out vs ``baseline``)."""
    out = {}
    for name, dataset in datasets.items():
        mine = [example for example in examples if example.dataset == name and example.key in rankings]
        if mine:
            out[name] = training.compare(mine, rankings, baseline, datasets, headline(name, _metrics(name)), seed=seed)
    return out


def _metrics(name: str) -> list[str]:
    return headline(name, ["recall@5", "coverage@5", "coverage@10", "ndcg@10", "mrr@10", "recall@10", "recall@20"])


def _ci(row: dict[str, Any]) -> str:
    return format_delta(DeltaCI(row["delta"], row["low"], row["high"], row["n"]))


def _markdown(report: dict[str, Any]) -> str:
    lines = [f"# Learned fusion, held out ({report['folds']} folds by question, seed {report['seed']})", ""]
    for protocol, by_dataset in report["held_out"].items():
        lines += [f"## {protocol} (vs hybrid)", "", "| dataset | n | metric | hybrid | learned | Δ [95% CI] |",
                  "|---|---:|---|---:|---:|---|"]
        for name, metrics in by_dataset.items():
            for metric, row in metrics.items():
                lines.append(f"| {name} | {row['n']} | {pretty(metric)} | {row['baseline']:.3f} | {row['value']:.3f} | "
                             f"{_ci(row)} |")
        lines.append("")
    if not report["ablation"]:  # --no-ablation
        return "\n".join(lines)
    lines += ["## Drop one feature group (pooled protocol): the full model minus the model without it", "",
              "| group dropped | dataset | metric | without it | Δ vs hybrid [95% CI] | full − without [95% CI] |",
              "|---|---|---|---:|---|---|"]
    for group, by_dataset in report["ablation"].items():
        for name, metrics in by_dataset.items():
            for metric, row in metrics.items():
                lines.append(f"| {group} | {name} | {pretty(metric)} | {row['vs_hybrid']['value']:.3f} | "
                             f"{_ci(row['vs_hybrid'])} | {_ci(row['contribution'])} |")
    return "\n".join(lines) + "\n"


def run_training(
    dataset_names: Sequence[str], out: Path, *, folds: int, seed: int, limit: int | None, hard_negatives: int,
    drop_groups: Sequence[str], reports: Path, ablate: bool = True, weigh: Mapping[str, float] | None = None,
) -> dict[str, Any]:
    """``weigh``: dataset → how many questions its questions together count as in training (the others
    count one each)."""
    unknown = [group for group in drop_groups if group not in FEATURE_GROUPS]
    if unknown:
        raise ValueError(f"unknown feature group(s) {unknown}; groups: {', '.join(FEATURE_GROUPS)}")
    features = [name for name in FEATURE_NAMES if not any(name in FEATURE_GROUPS[g] for g in drop_groups)]
    depth = DEFAULT_CANDIDATES
    started = time.perf_counter()
    embedder = build_embedder(RetrieverSettings())
    embedder.warm_up()
    datasets: dict[str, Dataset] = {}
    examples: list[training.QueryExamples] = []
    for name in dataset_names:
        dataset = load_dataset(name)
        dataset.name = name
        datasets[name] = dataset
        # Candidates as the model will be served: with PageRank's additions only if it reads PageRank.
        examples += asyncio.run(_examples(dataset, limit, seed, depth, reports, embedder, ppr="ppr_z" in features))
    unknown = sorted(set(weigh or {}) - set(datasets))
    if unknown:
        raise ValueError(f"--weigh names {unknown}, which are not among the datasets")
    counts = {name: sum(1 for e in examples if e.dataset == name) for name in datasets}
    weights = {name: n / counts[name] for name, n in (weigh or {}).items() if counts[name]}
    options = {"folds": folds, "seed": seed, "features": features, "hard_negatives": hard_negatives,
               "weights": weights}
    hybrid = {example.key: example.hybrid_ranking() for example in examples}
    protocols = ["within", "pooled"] + (["lodo"] if len({e.group for e in examples}) > 1 else [])
    protocols += ["lolo"] if len({e.language for e in examples} - {None}) > 1 else []
    held_out = {protocol: _rows(examples, training.held_out_rankings(examples, protocol, depth, **options), hybrid,
                                datasets, seed)
                for protocol in protocols}
    ablation: dict[str, Any] = {}
    if ablate:
        runs = training.ablation(examples, depth, folds=folds, seed=seed, hard_negatives=hard_negatives,
                                 weights=weights)
        full = runs.pop("(all)")
        for group, rankings in runs.items():
            vs_hybrid = _rows(examples, rankings, hybrid, datasets, seed)
            contribution = _rows(examples, full, rankings, datasets, seed)
            ablation[group] = {name: {metric: {"vs_hybrid": vs_hybrid[name][metric],
                                               "contribution": contribution[name][metric]}
                                      for metric in vs_hybrid[name]}
                               for name in datasets}
    provenance = {
        "datasets": counts,
        "limit": limit, "seed": seed, "candidates": depth, "embedder": embedder.model_id,
        "trained_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": "fitted on every question listed; scoring it on them is in-sample (held-out figures: cross_validation)",
    }
    model = training.fit(examples, features=features, hard_negatives=hard_negatives, provenance=provenance,
                         weights=weights)
    cross_validation = {"folds": folds, "seed": seed, "protocols": held_out}
    model = FusionModel(model.features, model.mean, model.scale, model.weights, model.intercept,
                        {**model.provenance, "cross_validation": cross_validation})
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(model.to_json(), indent=2) + "\n", encoding="utf-8")
    FusionModel.load(out)  # what the retriever will load must load
    report = {"schema_version": SCHEMA_VERSION, "written": str(out), "folds": folds, "seed": seed, "limit": limit,
              "features": features, "weights": dict(zip(model.features, model.weights.round(4).tolist())),
              "held_out": held_out, "ablation": ablation, "seconds": round(time.perf_counter() - started, 1)}
    reports.mkdir(parents=True, exist_ok=True)
    (reports / "fusion_training.json").write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    (reports / "fusion_training.md").write_text(_markdown(report), encoding="utf-8")
    return report
