"""``ragctl calibrate``: fit the answerability gate on one half of one or more datasets, write it,
and report it on the other half (both directions)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from rag_eval.calibration import GateRow, calibrate, gate_rows, provenance, split_halves
from rag_eval.datasets import load_dataset
from rag_generator.answerability import AnswerabilityGate
from rag_retriever.runtime import build_embedder
from rag_retriever.settings import RetrieverSettings


def run_calibration(
    dataset_names: Sequence[str],
    fit_half: Literal["A", "B"],
    seed: int,
    out: Path,
    report_path: Path | None,
    index_cache: Path,
) -> dict:
    datasets = [load_dataset(name) for name in dataset_names]
    for dataset in datasets:
        labels = {q.answerable for q in dataset.queries}
        if not {True, False} <= labels:
            raise ValueError(f"{dataset.name} has no answerable/unanswerable labels to fit a gate on")
    embedder = build_embedder(RetrieverSettings())
    embedder.warm_up()
    rows: list[GateRow] = []
    halves: dict[str, str] = {}
    for dataset in datasets:
        rows += asyncio.run(gate_rows(dataset, index_cache, embedder))
        halves.update(split_halves(dataset.queries, seed, prefix=f"{dataset.name}/"))
    results = {}
    for half in ("A", "B"):
        origin = provenance(datasets, seed, half, embedder, dataset_args=dataset_names)
        params, report = calibrate(rows, halves, half, provenance=origin)
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
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary
