"""``ragctl fit-scorer``: fit the extractive answerer's sentence scorer on one half (by passage) of
the datasets' labelled sentences, write it, and report it on the other half (both directions)
against the hand-set scoring it replaces (``rag_eval.sentence_scorer_fitting``)."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from rag_eval.datasets import load_dataset
from rag_eval.sentence_scorer_fitting import (
    coefficients,
    fit_half,
    halves_of,
    held_out_report,
    load_rows,
    question_rows,
    save_rows,
)
from rag_gateway.settings import GatewaySettings
from rag_generator.sentence_scorer import SentenceScorer
from rag_retriever.runtime import build_embedder
from rag_retriever.settings import RetrieverSettings


def run_fit_scorer(
    dataset_names: Sequence[str],
    fit_on: Literal["A", "B"],
    seed: int,
    out: Path,
    report_path: Path | None,
    index_cache: Path,
    *,
    limit: int | None = None,
    c: float = 1.0,
    rows_cache: Path | None = None,
) -> dict:
    """``limit``: at most this many questions of each dataset (seeded, the same ids in XQuAD's languages);
    ``rows_cache``: read the rows from this file if it exists (same datasets, limit and seed), else write them there."""
    model_id = RetrieverSettings().embedding_model
    rows, left_out = [], {}
    if rows_cache is not None and rows_cache.is_file():
        rows = load_rows(rows_cache)
        left_out = {"from": str(rows_cache)}
    else:
        embedder = build_embedder(RetrieverSettings())
        embedder.warm_up()
        model_id = embedder.model_id
        for name in dataset_names:
            found, counts = asyncio.run(question_rows(load_dataset(name), index_cache, embedder, limit=limit, seed=seed))
            rows += found
            left_out[name] = {**counts, "kept": len(found)}
        if rows_cache is not None:
            save_rows(rows, rows_cache)
    halves = halves_of(rows, seed)
    results = {}
    for half in ("A", "B"):
        params = fit_half(rows, halves, half, provenance=_provenance(dataset_names, half, seed, limit, c, model_id), c=c)
        report = held_out_report(rows, halves, params, half)
        params["fitted_on"]["held_out"] = report
        results[half] = {"report": report, "coefficients": coefficients(params),
                         "margins": {"neighbour": params["neighbour_margin"], "other": params["other_margin"]}}
        if half == fit_on:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(params, indent=2) + "\n", encoding="utf-8")
            SentenceScorer.from_json(out)  # what the service will load must load
    summary = {"datasets": list(dataset_names), "seed": seed, "questions": left_out, "written": str(out),
               "fit_on": fit_on, "results": results}
    if report_path is not None:
        report_path.parent.mkdir(parents=True, exist_ok=True)
        report_path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return summary


def _provenance(names: Sequence[str], half: str, seed: int, limit: int | None, c: float, model_id: str) -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    gateway = GatewaySettings()
    command = "ragctl fit-scorer " + " ".join(f"-d {n}" for n in names) + f" --fit-half {half} --seed {seed} --c {c}"
    return {
        "dataset": f"{' + '.join(names)}: half {half} by passage group (seed {seed}); label 1 = the sentence holds "
        "the gold answer (XQuAD offsets, HotpotQA answer-holding supporting facts, ClapNQ selected sentences)",
        "pipeline": f"retriever {gateway.search_mode} search, {gateway.retrieval_candidates} candidates, top "
        f"{gateway.default_top_k}, reranker default chain, generator evidence units",
        "embedder": model_id,
        "command": command + (f" --limit {limit}" if limit is not None else ""),
        "git_commit": commit,
        "date": dt.date.today().isoformat(),
    }
