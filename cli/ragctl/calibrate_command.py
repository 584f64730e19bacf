"""``ragctl calibrate``: fit the answerability gate on one half of one or more datasets, write it,
and report it on the other half (both directions); or (``evaluate``) report the served gate on all
the rows, per dataset, without fitting. A dataset whose questions are all answerable (XQuAD in each
language) gets off-topic unanswerable questions from held-out documents (``off_topic_gate_rows``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from rag_eval.answer_containment import answerable_questions
from rag_eval.calibration import (
    MAX_ANSWERABLE_ABSTENTION,
    GateRow,
    calibrate,
    gate_report,
    gate_rows,
    has_both_labels,
    off_topic_gate_rows,
    provenance,
    split_halves,
)
from rag_eval.datasets import load_dataset
from rag_generator.answerability import AnswerabilityGate
from rag_generator.runtime import load_gate
from rag_generator.settings import GeneratorSettings
from rag_retriever.runtime import build_embedder
from rag_retriever.settings import RetrieverSettings


def run_calibration(
    dataset_names: Sequence[str],
    fit_half: Literal["A", "B"],
    seed: int,
    out: Path,
    report_path: Path | None,
    index_cache: Path,
    *,
    limit: int | None = None,
    evaluate: bool = False,
    max_answerable_abstention: float | None = MAX_ANSWERABLE_ABSTENTION,
) -> dict:
    """``limit``: at most this many questions per class of each all-answerable dataset (seeded);
    ``max_answerable_abstention``: the threshold rule's bound (``fit_gate``)."""
    datasets = [load_dataset(name) for name in dataset_names]
    for dataset in datasets:
        if not has_both_labels(dataset) and not answerable_questions(dataset):
            raise ValueError(f"{dataset.name} has no answerable/unanswerable labels nor reference answers to fit a gate on")
    embedder = build_embedder(RetrieverSettings())
    embedder.warm_up()
    rows: list[GateRow] = []
    halves: dict[str, str] = {}
    for dataset in datasets:
        if has_both_labels(dataset):
            rows += asyncio.run(gate_rows(dataset, index_cache, embedder))
            halves.update(split_halves(dataset.queries, seed, prefix=f"{dataset.name}/"))
        else:
            found, found_halves = asyncio.run(off_topic_gate_rows(dataset, index_cache, embedder, seed=seed, limit=limit))
            rows += found
            halves.update(found_halves)
    if evaluate:
        gate = load_gate(GeneratorSettings())
        if gate is None:
            raise ValueError("GENERATOR_GATE_PATH=off: there is no served gate to evaluate")
        summary = {"datasets": [d.name for d in datasets], "seed": seed, "limit": limit,
                   "evaluated": "the served gate (GENERATOR_GATE_PATH), on every row", "report": gate_report(rows, gate)}
        _write(report_path, summary)
        return summary
    results = {}
    for half in ("A", "B"):
        origin = provenance(
            datasets, seed, half, embedder, dataset_args=dataset_names, max_answerable_abstention=max_answerable_abstention
        )
        if limit is not None:
            origin["command"] += f" --limit {limit}"
        params, report = calibrate(
            rows, halves, half, provenance=origin, max_answerable_abstention=max_answerable_abstention
        )
        results[half] = report
        if half == fit_half:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(params, indent=2) + "\n", encoding="utf-8")
            AnswerabilityGate.from_json(out)  # what the service will load must load
    summary = {
        "datasets": [d.name for d in datasets],
        "seed": seed,
        "written": str(out),
        "fit_on": fit_half,
        "reports": results,
    }
    _write(report_path, summary)
    return summary


def _write(report_path: Path | None, summary: dict) -> None:
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
