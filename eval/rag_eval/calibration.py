"""Fit the generator's answerability gate on one half of a dataset, report it on the other half.

The rows are what the served chain produces: the dataset's questions searched by the retriever's own
runtime (hybrid, the gateway's candidate depth, the reranker's default chain being a pass-through
without a cross-encoder, the gateway's ``top_k``), then ``AnswerGenerator.assess`` of the generator's
own runtime computes the gate's features. Labels are the dataset's answerable / unanswerable. Each
class of each dataset is split into two seeded halves, A and B; the gate is fitted on one
(``fit_half``, pooled over the datasets) and every figure reported is measured on the other, so
nothing is fitted and scored on the same questions. Pooling datasets of different domains (ClapNQ's
Wikipedia, MTRAG-UN's finance, government and cloud documentation) keeps the gate from learning one
corpus's cosine scale.

A multi-turn question is made standalone the way the refiner's deterministic fallback does it, the
message followed by the previous question in brackets (measured as good as the LLM rewrite), so no
LLM is needed to calibrate.
"""

from __future__ import annotations

import datetime as dt
import random
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from rag_common.embedders import Embedder
from rag_common.schemas import GenerateRequest, SearchRequest
from rag_eval.datasets.types import Dataset, Query
from rag_eval.harness import EVAL_ACCESS
from rag_eval.pipeline import open_retriever
from rag_gateway.settings import GatewaySettings
from rag_generator.answerability import FEATURE_NAMES, AnswerabilityGate, fit_gate
from rag_generator.runtime import open_runtime as open_generator
from rag_generator.settings import GeneratorSettings

Half = Literal["A", "B"]


@dataclass(frozen=True)
class GateRow:
    #: ``"<dataset>/<query id>"``: unique across pooled datasets.
    query_id: str
    answerable: bool
    #: None when no sentence was eligible (the generator abstains before the gate).
    features: np.ndarray | None


def standalone_text(query: Query) -> str:
    """The question as the refiner's no-LLM fallback rewrites a follow-up: ``message (last question)``."""
    previous = [turn.text for turn in query.history if turn.speaker == "user"]
    return f"{query.text} ({previous[-1]})" if previous else query.text


def split_halves(queries: Sequence[Query], seed: int, *, prefix: str = "") -> dict[str, Half]:
    """Each class (answerable / not) shuffled with ``seed`` and cut in two: ``{prefix + query_id: "A"|"B"}``."""
    halves: dict[str, Half] = {}
    for label in (True, False):
        ids = sorted(prefix + q.id for q in queries if q.answerable is not None and bool(q.answerable) == label)
        random.Random(f"{seed}:{label}").shuffle(ids)
        middle = len(ids) // 2
        halves.update({qid: "A" for qid in ids[:middle]})
        halves.update({qid: "B" for qid in ids[middle:]})
    return halves


async def gate_rows(dataset: Dataset, cache_dir: Path, embedder: Embedder, *, progress: bool = False) -> list[GateRow]:
    """The gate's features for every labelled question of ``dataset``, through the served chain."""
    gateway = GatewaySettings()
    depth = max(gateway.retrieval_candidates, gateway.default_top_k)
    rows: list[GateRow] = []
    async with open_retriever(dataset, cache_dir, embedder, progress=progress) as (retriever, _):
        async with open_generator(GeneratorSettings(mode="extractive", gate_path="off"), embedder=embedder) as runtime:
            search = retriever.search_services["min_max"]
            for query in dataset.queries:
                if query.answerable is None:
                    continue
                text = standalone_text(query)
                found = await search.search(
                    SearchRequest(query=text, top_k=depth, mode=gateway.search_mode, include_embeddings=True),
                    EVAL_ACCESS,
                )
                passages = found.passages[: gateway.default_top_k]
                assessment = await runtime.generator.assess(
                    GenerateRequest(query=text, passages=passages, query_embedding=found.query_embedding)
                )
                vector = assessment.features.feature_vector() if assessment.features is not None else None
                rows.append(GateRow(f"{dataset.name}/{query.id}", bool(query.answerable), vector))
    return rows


def abstention_report(abstain: np.ndarray, unanswerable: np.ndarray, *, seed: int = 0, samples: int = 2000) -> dict:
    """Abstention precision / recall / F1 (positive class: unanswerable), with 95 % bootstrap CIs."""

    def prf(a: np.ndarray, u: np.ndarray) -> tuple[float, float, float]:
        tp = float(np.sum(a & u))
        precision = tp / max(1.0, float(np.sum(a)))
        recall = tp / max(1.0, float(np.sum(u)))
        f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
        return precision, recall, f1

    point = prf(abstain, unanswerable)
    rng = np.random.default_rng(seed)
    draws = np.array([prf(abstain[i], unanswerable[i]) for i in (rng.integers(0, len(abstain), len(abstain)) for _ in range(samples))])
    low, high = np.percentile(draws, [2.5, 97.5], axis=0)
    names = ("precision", "recall", "f1")
    return {
        "n": int(len(abstain)),
        **{name: round(point[i], 4) for i, name in enumerate(names)},
        **{f"{name}_ci95": [round(float(low[i]), 4), round(float(high[i]), 4)] for i, name in enumerate(names)},
        "abstain_rate": round(float(np.mean(abstain)), 4),
    }


def auroc(scores: np.ndarray, positive: np.ndarray) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    pos, neg = scores[positive], scores[~positive]
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return round(float(greater / (len(pos) * len(neg))), 4)


def calibrate(rows: Sequence[GateRow], halves: dict[str, Half], fit_half: Half, *, provenance: dict) -> tuple[dict, dict]:
    """Fit on ``fit_half``, report on the other half: ``(gate parameters, held-out report)``."""
    fit = [r for r in rows if halves[r.query_id] == fit_half and r.features is not None]
    held = [r for r in rows if halves[r.query_id] != fit_half]
    params = fit_gate(
        np.stack([r.features for r in fit]), [int(r.answerable) for r in fit], provenance=provenance
    )
    gate = AnswerabilityGate(params)
    # A question without any eligible sentence abstains before the gate: probability 0.
    probability = np.array(
        [gate.probability_of_vector(r.features) if r.features is not None else 0.0 for r in held]
    )
    unanswerable = np.array([not r.answerable for r in held])
    abstain = probability < gate.threshold
    report = {
        "fit_half": fit_half,
        "fit_questions": len(fit),
        "held_out": abstention_report(abstain, unanswerable),
        "held_out_auroc": auroc(probability, ~unanswerable),
        "threshold": round(gate.threshold, 4),
        "features": list(FEATURE_NAMES),
    }
    per_dataset = {}
    for name in sorted({_dataset_of(r) for r in held}):
        mine = np.array([_dataset_of(r) == name for r in held])
        per_dataset[name] = {
            "held_out": abstention_report(abstain[mine], unanswerable[mine]),
            "held_out_auroc": auroc(probability[mine], ~unanswerable[mine]),
        }
    report["per_dataset"] = per_dataset
    params["fitted_on"] = {
        **params.get("fitted_on", {}),
        "held_out": report["held_out"],
        "held_out_auroc": report["held_out_auroc"],
        "held_out_per_dataset": per_dataset,
    }
    return params, report


def _dataset_of(row: GateRow) -> str:
    return row.query_id.split("/", 1)[0] if "/" in row.query_id else ""


def provenance(datasets: Sequence[Dataset], seed: int, fit_half: Half, embedder: Embedder, *, dataset_args: Sequence[str]) -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    gateway = GatewaySettings()
    return {
        "dataset": f"{' + '.join(d.name for d in datasets)}: half {fit_half} of a seeded (seed {seed}) per-dataset, "
        "per-class split; label 1 = answerable; multi-turn questions as 'message (previous question)'",
        "pipeline": f"retriever {gateway.search_mode} search, {gateway.retrieval_candidates} candidates, top "
        f"{gateway.default_top_k} (reranker default chain without a cross-encoder), generator AnswerGenerator.assess",
        "embedder": embedder.model_id,
        "command": "ragctl calibrate " + " ".join(f"--dataset {name}" for name in dataset_args)
        + f" --fit-half {fit_half} --seed {seed}",
        "git_commit": commit,
        "date": dt.date.today().isoformat(),
    }
