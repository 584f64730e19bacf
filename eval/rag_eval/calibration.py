"""Fit the generator's answerability gate on one half of a dataset, report it on the other half.

The rows are what the served chain produces (``rag_eval.served_chain``): the question's language
named as the gateway names it, the dataset's questions searched by the retriever's own runtime
(hybrid, the gateway's candidate depth), the reranker's default chain (a pass-through without a
cross-encoder), the gateway's ``top_k``, then ``AnswerGenerator.assess`` of the generator's own
runtime computes the gate's features. Labels are the dataset's answerable / unanswerable; a dataset
whose questions are all answerable (XQuAD, in each language) gets its unanswerable questions by
holding out half of its documents (:func:`off_topic_gate_rows`), so the gate is fitted and reported
per language on in-language off-topic questions. Each
class of each dataset is split into two seeded halves, A and B; the gate is fitted on one
(``fit_half``, pooled over the datasets) and every figure reported is measured on the other, so
nothing is fitted and scored on the same questions. Pooling datasets of different domains (ClapNQ's
Wikipedia, MTRAG-UN's finance, government and cloud documentation) keeps the gate from learning one
corpus's cosine scale.

The gate reads a question in a language the embedder is blind to (``EMBEDDER_LANGUAGES``) without its
cosines (``rag_generator.answerability``), so its fit pools languages; every class of every dataset
weighs the same, and the threshold is the best abstention F1 among those abstaining on at most
``max_answerable_abstention`` of the answerable questions (``fit_gate``). :func:`leave_one_out` scores
each dataset (each XQuAD language) with a gate fitted on the others only: how a language or corpus no
one fitted on fares.

A multi-turn question is made standalone the way the refiner's deterministic fallback does it, the
message followed by the previous question in brackets (measured as good as the LLM rewrite), so no
LLM is needed to calibrate.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from rag_common.embedders import Embedder
from rag_common.settings import EmbedderSettings
from rag_eval.answer_containment import document_group, held_out_split, sample_questions
from rag_eval.datasets.types import Dataset, Query
from rag_eval.served_chain import open_served_chain
from rag_gateway.settings import GatewaySettings
from rag_generator.answerability import FEATURE_NAMES, AnswerabilityGate, fit_gate
from rag_generator.settings import GeneratorSettings

Half = Literal["A", "B"]


@dataclass(frozen=True)
class GateRow:
    #: ``"<dataset>/<query id>"``: unique across pooled datasets.
    query_id: str
    answerable: bool
    #: None when no sentence was eligible (the generator abstains before the gate).
    features: np.ndarray | None
    #: The question's language as the gateway names it (None: it could not be told).
    language: str | None = None


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


#: The generator as the gate's features are computed: extractive, no gate (the features are what it scores).
_UNGATED = {"mode": "extractive", "gate_path": "off"}


async def gate_rows(dataset: Dataset, cache_dir: Path, embedder: Embedder, *, progress: bool = False) -> list[GateRow]:
    """The gate's features for every labelled question of ``dataset``, through the served chain
    (``rag_eval.served_chain``: the question's language named as the gateway names it)."""
    rows: list[GateRow] = []
    settings = GeneratorSettings(**_UNGATED)
    async with open_served_chain(dataset, cache_dir, embedder, generator_settings=settings, progress=progress) as (chain, _):
        for query in dataset.queries:
            if query.answerable is None:
                continue
            retrieved, vector = await chain.features(standalone_text(query))
            rows.append(GateRow(f"{dataset.name}/{query.id}", bool(query.answerable), vector, retrieved.language.code))
    return rows


def has_both_labels(dataset: Dataset) -> bool:
    return {True, False} <= {q.answerable for q in dataset.queries}


async def off_topic_gate_rows(
    dataset: Dataset, cache_dir: Path, embedder: Embedder, *, seed: int, limit: int | None = None, progress: bool = False
) -> tuple[list[GateRow], dict[str, Half]]:
    """Rows for a dataset whose questions are all answerable (XQuAD): half of its document groups held
    out (``rag_eval.answer_containment.held_out_split``), the rest indexed. Answerable rows: the kept
    groups' questions whose gold passage reaches the generator (a gate cannot be blamed for a retrieval
    miss); unanswerable rows: the held-out groups' questions, off-topic for that index. ``limit``: at
    most this many questions of each class (seeded). Returns the rows and their fit halves, drawn per
    document group from the group's name (:func:`group_halves`), so a question and its translations,
    and the questions of one article, fall in the same half."""
    split = held_out_split(dataset, seed)
    classes = ((True, sample_questions(split.on_topic, limit, seed)), (False, sample_questions(split.off_topic, limit, seed)))
    rows: list[GateRow] = []
    group_of: dict[str, str] = {}
    settings = GeneratorSettings(**_UNGATED)
    async with open_served_chain(split.kept, cache_dir, embedder, generator_settings=settings, progress=progress) as (chain, _):
        for answerable, questions in classes:
            for query in questions:
                gold = dataset.relevant(query.id)
                retrieved, vector = await chain.features(query.text)
                if answerable and not any(p.doc_id in gold for p in retrieved.passages):
                    continue
                row_id = f"{dataset.name}/{query.id}"
                rows.append(GateRow(row_id, answerable, vector, retrieved.language.code))
                group_of[row_id] = document_group(min(gold))
    return rows, group_halves(group_of, seed)


def group_halves(group_of: dict[str, str], seed: int) -> dict[str, Half]:
    """``{row id: "A"|"B"}``: each group's half from a seeded hash of its name alone (the same in every
    dataset that names its groups alike, e.g. XQuAD's languages)."""

    def half(group: str) -> Half:
        digest = hashlib.sha256(f"{seed}:{group}".encode()).digest()
        return "A" if digest[0] % 2 == 0 else "B"

    return {row_id: half(group) for row_id, group in group_of.items()}


def gate_report(rows: Sequence[GateRow], gate: AnswerabilityGate) -> dict:
    """How ``gate`` (e.g. the shipped one) does on all of ``rows``: abstention and AUROC, pooled and per dataset."""
    probability = np.array([gate.probability_of_vector(r.features) if r.features is not None else 0.0 for r in rows])
    unanswerable = np.array([not r.answerable for r in rows])
    abstain = probability < gate.threshold
    report: dict = {"threshold": round(gate.threshold, 4), "all": _scored(abstain, unanswerable, probability)}
    names = np.array([_dataset_of(r) for r in rows])
    report["per_dataset"] = {
        name: _scored(abstain[names == name], unanswerable[names == name], probability[names == name])
        for name in sorted(set(names.tolist()))
    }
    return report


def _scored(abstain: np.ndarray, unanswerable: np.ndarray, probability: np.ndarray) -> dict:
    both = bool(unanswerable.any()) and bool((~unanswerable).any())
    return {
        "held_out": abstention_report(abstain, unanswerable),
        "held_out_auroc": auroc(probability, ~unanswerable) if both else None,
        "abstain_rate_answerable": round(float(abstain[~unanswerable].mean()), 4) if (~unanswerable).any() else None,
        "abstain_rate_unanswerable": round(float(abstain[unanswerable].mean()), 4) if unanswerable.any() else None,
    }


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


#: The threshold rule's bound: at most this share of answerable questions abstained in the fit (each
#: dataset weighing the same). The languages issue's goal is 10 % on XQuAD in every language;
#: ClapNQ's topical unanswerable questions pull the other way (docs/evaluation.md).
MAX_ANSWERABLE_ABSTENTION = 0.10


def _fitted(rows: Sequence[GateRow], max_answerable_abstention: float | None, provenance: dict) -> dict:
    fit = [r for r in rows if r.features is not None]
    return fit_gate(
        np.stack([r.features for r in fit]),
        [int(r.answerable) for r in fit],
        groups=[_dataset_of(r) for r in fit],
        max_answerable_abstention=max_answerable_abstention,
        provenance=provenance,
    )


def leave_one_out(
    rows: Sequence[GateRow], halves: dict[str, Half], fit_half: Half, *, max_answerable_abstention: float | None
) -> dict:
    """Per dataset: a gate fitted on ``fit_half`` of every *other* dataset, scored on this one's other
    half (``_scored``): an XQuAD language, or a corpus, that nothing was fitted on."""
    report = {}
    for name in sorted({_dataset_of(r) for r in rows}):
        fit = [r for r in rows if halves[r.query_id] == fit_half and _dataset_of(r) != name]
        held = [r for r in rows if halves[r.query_id] != fit_half and _dataset_of(r) == name]
        if len({r.answerable for r in fit}) < 2 or not held:
            continue
        report[name] = gate_report(held, AnswerabilityGate(_fitted(fit, max_answerable_abstention, {})))["all"]
    return report


def calibrate(
    rows: Sequence[GateRow],
    halves: dict[str, Half],
    fit_half: Half,
    *,
    provenance: dict,
    max_answerable_abstention: float | None = MAX_ANSWERABLE_ABSTENTION,
) -> tuple[dict, dict]:
    """Fit on ``fit_half``, report on the other half: ``(gate parameters, held-out report)``."""
    fit = [r for r in rows if halves[r.query_id] == fit_half]
    held = [r for r in rows if halves[r.query_id] != fit_half]
    params = _fitted(fit, max_answerable_abstention, provenance)
    gate = AnswerabilityGate(params)
    # A question without any eligible sentence abstains before the gate: probability 0.
    probability = np.array(
        [gate.probability_of_vector(r.features) if r.features is not None else 0.0 for r in held]
    )
    unanswerable = np.array([not r.answerable for r in held])
    abstain = probability < gate.threshold
    report = {
        "fit_half": fit_half,
        "fit_questions": sum(r.features is not None for r in fit),
        "held_out": abstention_report(abstain, unanswerable),
        "held_out_auroc": auroc(probability, ~unanswerable),
        "threshold": round(gate.threshold, 4),
        "features": list(FEATURE_NAMES),
    }
    per_dataset = {}
    for name in sorted({_dataset_of(r) for r in held}):
        mine = np.array([_dataset_of(r) == name for r in held])
        per_dataset[name] = _scored(abstain[mine], unanswerable[mine], probability[mine])
    report["per_dataset"] = per_dataset
    report["leave_one_dataset_out"] = leave_one_out(rows, halves, fit_half, max_answerable_abstention=max_answerable_abstention)
    params["fitted_on"] = {
        **params.get("fitted_on", {}),
        "held_out": report["held_out"],
        "held_out_auroc": report["held_out_auroc"],
        "held_out_per_dataset": per_dataset,
        "held_out_leave_one_dataset_out": report["leave_one_dataset_out"],
    }
    return params, report


def _dataset_of(row: GateRow) -> str:
    return row.query_id.split("/", 1)[0] if "/" in row.query_id else ""


def provenance(
    datasets: Sequence[Dataset],
    seed: int,
    fit_half: Half,
    embedder: Embedder,
    *,
    dataset_args: Sequence[str],
    max_answerable_abstention: float | None = MAX_ANSWERABLE_ABSTENTION,
) -> dict:
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    gateway = GatewaySettings()
    return {
        "dataset": f"{' + '.join(d.name for d in datasets)}: half {fit_half} of a seeded (seed {seed}) per-dataset, "
        "per-class split (all-answerable datasets: per document group, off-topic rows from held-out groups); "
        "label 1 = answerable; multi-turn questions as 'message (previous question)'",
        "pipeline": f"retriever {gateway.search_mode} search, {gateway.retrieval_candidates} candidates, top "
        f"{gateway.default_top_k} (reranker default chain without a cross-encoder), generator AnswerGenerator.assess",
        "embedder": embedder.model_id,
        "embedder_languages": EmbedderSettings().languages,
        "command": "ragctl calibrate " + " ".join(f"--dataset {name}" for name in dataset_args)
        + f" --fit-half {fit_half} --seed {seed}"
        + (f" --max-answerable-abstention {max_answerable_abstention}" if max_answerable_abstention is not None else ""),
        "git_commit": commit,
        "date": dt.date.today().isoformat(),
    }
