"""Calibrate the LLM-free generator core on ClapNQ dev: extractive answerer, claim support, answerability gate.

Pipeline, in-process and without an LLM: the ClapNQ corpus in an embedded index built by the
retriever's own ``Ingestor`` (``rag_eval.pipeline.open_retriever``, cached under ``--index-cache``)
→ hybrid search (min_max fusion, the default) top 5, i.e. what the generator receives when the
reranker's default chain has no cross-encoder configured → ``ExtractiveAnswerer`` with the
all-MiniLM-L6-v2 embedder. All 300 answerable + 300 unanswerable questions, each class split in two
seeded halves: A (fit) and B (held out). Everything chosen on A is scored on B.

- **Extractive answerer**: share of answerable questions whose best sentence (and whose 1-3 sentence
  answer) overlaps a ClapNQ selected sentence (normalised, rapidfuzz ``partial_ratio`` of the
  shorter against the longer >= 90), over all answerable questions and over those whose top-5
  chunks contain a selected sentence at all; per-question latency (CPU, on whatever else the machine
  runs). The answerer scores with the shipped sentence scorer; its weights are no longer searched
  here but fitted by ``ragctl fit-scorer`` (``rag_eval.sentence_scorer_fitting``, issue 32), on
  held-out halves of XQuAD, HotpotQA and ClapNQ.
- **Answerability gate**: ``fit_gate`` on half A's features and labels, abstention
  precision/recall/F1 and AUROC on B, against single-score baselines ("abstain when score < t", t
  fitted on A): the top hybrid score and the best sentence cosine. ``--write-gate PATH`` writes the
  fitted parameters (with this run's provenance and held-out figures in ``fitted_on``).
- **Claim support**: claims = the sentences of the answerable questions' reference answers; a
  positive cites its own question's selected sentences, a negative cites the selected sentences of
  the other question most similar to the claim (a hard, on-topic negative). ``w`` is searched on A
  with the threshold maximising unsupported-class F1, then scored on B.

    .venv/bin/python bench/generator_core_calibration.py [--seed 0] [--write-gate PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAG_DATASETS_DIR", str(REPO_ROOT.parent / "shared" / "datasets"))

import numpy as np  # noqa: E402

from rag_common.embedders.factory import build_embedder  # noqa: E402
from rag_common.schemas import Passage, SearchRequest  # noqa: E402
from rag_common.sentences import sentence_spans  # noqa: E402
from rag_eval.datasets import DatasetNotFound, load_dataset  # noqa: E402
from rag_eval.datasets.types import Query  # noqa: E402
from rag_eval.harness import EVAL_ACCESS  # noqa: E402
from rag_eval.pipeline import open_retriever  # noqa: E402
from rag_eval.sentence_scorer_fitting import overlaps  # noqa: E402  (the scorer's ClapNQ label, the same rule)
from rag_generator.answerability import (  # noqa: E402
    FEATURE_NAMES,
    DEFAULT_GATE_PATH,
    AnswerabilityFeatures,
    AnswerabilityGate,
    features_from_answer,
    fit_gate,
)
from rag_generator.claim_support import Claim, ClaimSupport  # noqa: E402
from rag_generator.settings import GeneratorSettings  # noqa: E402
from rag_generator.extractive_answerer import ExtractiveAnswer, ExtractiveAnswerer  # noqa: E402
from rag_generator.sentence_scorer import default_scorer  # noqa: E402
from rag_retriever.settings import RetrieverSettings  # noqa: E402
from harness import RESULTS_DIR, describe, result_path, write_result  # noqa: E402

TOP_K = 5


# ------------------------------------------------------------------------------------ helpers


def halves(queries: Sequence[Query], seed: int) -> dict[str, str]:
    """Query id → "A" or "B": each class permuted (seeded) and cut in two."""
    rng = np.random.default_rng(seed)
    half: dict[str, str] = {}
    for label in (True, False):
        pool = [q for q in queries if q.answerable is label]
        order = rng.permutation(len(pool))
        for rank, i in enumerate(order):
            half[pool[i].id] = "A" if rank < len(pool) // 2 else "B"
    return half


def prf(abstain: np.ndarray, unanswerable: np.ndarray) -> dict[str, float | None]:
    tp = int(np.sum(abstain & unanswerable))
    fp = int(np.sum(abstain & ~unanswerable))
    fn = int(np.sum(~abstain & unanswerable))
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if tp + fp + fn else None
    return {
        "precision": _r(precision),
        "recall": _r(recall),
        "f1": _r(f1),
        "abstain_rate": _r(float(abstain.mean())),
        "answered_answerable": int(np.sum(~abstain & ~unanswerable)),
    }


def best_threshold(scores: np.ndarray, positive: np.ndarray) -> float:
    """t maximising F1 of "flag when score < t" for the ``positive`` class (ties → smallest t)."""
    values = np.unique(scores)
    candidates = np.concatenate([[values[0] - 1e-9], (values[:-1] + values[1:]) / 2, [values[-1] + 1e-9]])
    best_t, best_f1 = float(candidates[0]), -1.0
    for t in candidates:
        f1 = prf(scores < t, positive)["f1"] or 0.0
        if f1 > best_f1 + 1e-12:
            best_t, best_f1 = float(t), f1
    return best_t


def auroc(scores: np.ndarray, positive_high: np.ndarray) -> float | None:
    pos, neg = scores[positive_high], scores[~positive_high]
    if not len(pos) or not len(neg):
        return None
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return _r(float(wins / (len(pos) * len(neg))))


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# ------------------------------------------------------------------------------------ stages


async def retrieve(
    queries: Sequence[Query], dataset: Any, embedder: Any, index_cache: Path, sentence_vectors: str = "off"
) -> tuple[dict[str, list[Passage]], dict[str, Any]]:
    settings = RetrieverSettings(sentence_vectors=sentence_vectors)
    async with open_retriever(dataset, index_cache, embedder, settings=settings, progress=False) as (retriever, index):
        search = retriever.search_services["min_max"]
        found = {}
        for query in queries:
            request = SearchRequest(
                query=query.text, top_k=TOP_K, mode="hybrid", include_sentence_vectors=sentence_vectors != "off"
            )
            response = await search.search(request, EVAL_ACCESS)
            found[query.id] = response.passages
    return found, index


def extractive_quality(queries: Sequence[Query], answers: dict[str, ExtractiveAnswer]) -> dict[str, Any]:
    """Gold-sentence hit rates of the answers as the answerer chose them."""
    hits = reachable = reachable_hits = answer_hits = 0
    answerable = [q for q in queries if q.answerable]
    for query in answerable:
        answer = answers[query.id]
        selected = query.metadata.get("selected_sentences", [])
        if not answer.candidates:
            continue
        reachable_here = any(overlaps(c.unit.text, selected) for c in answer.candidates)
        best = answer.candidates[0].unit
        answer_hits += any(overlaps(u.text, selected) for u in answer.sentences)
        hit = overlaps(best.text, selected)
        hits += hit
        reachable += reachable_here
        reachable_hits += hit and reachable_here
    out = {
        "questions": len(answerable),
        "best_sentence_hit": _r(hits / len(answerable)) if answerable else None,
        "gold_reachable": reachable,
        "best_sentence_hit_when_reachable": _r(reachable_hits / reachable) if reachable else None,
    }
    out["answer_hit"] = _r(answer_hits / len(answerable)) if answerable else None
    # Per question, for paired comparisons between runs (e.g. --sentence-vectors pooled vs off).
    out["per_question"] = {
        q.id: [
            int(bool(answers[q.id].candidates) and overlaps(answers[q.id].candidates[0].unit.text, q.metadata.get("selected_sentences", []))),
            int(any(overlaps(u.text, q.metadata.get("selected_sentences", [])) for u in answers[q.id].sentences)),
        ]
        for q in answerable
    }
    return out


def gate_run(
    queries: Sequence[Query],
    passages: dict[str, list[Passage]],
    answers: dict[str, ExtractiveAnswer],
    half: dict[str, str],
    provenance: dict[str, Any],
) -> tuple[dict[str, Any], dict[str, Any]]:
    ids = [q.id for q in queries]
    x = np.asarray([features_from_answer(answers[i], [p.score for p in passages[i]]).feature_vector() for i in ids])
    # x is also the fitting input, so what is fitted is exactly what the service would compute.
    y = np.asarray([1 if q.answerable else 0 for q in queries])
    in_a = np.asarray([half[i] == "A" for i in ids])
    params = fit_gate(x[in_a], y[in_a], provenance=provenance)
    gate = AnswerabilityGate(params)
    p_b = np.asarray([gate.probability(AnswerabilityFeatures(*row)) for row in x[~in_a]])
    unanswerable_b = y[~in_a] == 0
    report: dict[str, Any] = {
        "gate_B": {
            **prf(p_b < gate.threshold, unanswerable_b),
            "auroc": auroc(p_b, ~unanswerable_b),
            "threshold": round(gate.threshold, 4),
        },
        "baselines_B": {},
    }
    # The gate the generator ships, on the same held-out half: does it still fit these features?
    shipped = AnswerabilityGate.from_json(DEFAULT_GATE_PATH)
    p_shipped = np.asarray([shipped.probability(AnswerabilityFeatures(*row)) for row in x[~in_a]])
    report["shipped_gate_B"] = {
        **prf(p_shipped < shipped.threshold, unanswerable_b),
        "auroc": auroc(p_shipped, ~unanswerable_b),
        "threshold": round(shipped.threshold, 4),
    }
    for name in ("top_retrieval_score", "best_sentence_cosine", "best_sentence_score", "best_passage_cosine"):
        column = FEATURE_NAMES.index(name)
        t = best_threshold(x[in_a, column], y[in_a] == 0)
        scores_b = x[~in_a, column]
        report["baselines_B"][name] = {
            **prf(scores_b < t, unanswerable_b),
            "auroc": auroc(scores_b, ~unanswerable_b),
            "threshold": round(t, 4),
        }
    report["coef"] = dict(zip(FEATURE_NAMES, (round(c, 4) for c in params["coef"])))
    params["fitted_on"]["held_out"] = {"half": "B", "rows": int((~in_a).sum()), **report["gate_B"]}
    return params, report


def claim_calibration(queries: Sequence[Query], half: dict[str, str], embedder: Any) -> dict[str, Any]:
    answerable = [q for q in queries if q.answerable and q.metadata.get("selected_sentences") and q.answers]
    claims: list[tuple[str, str]] = []  # (query id, claim)
    for q in answerable:
        text = q.answers[0]
        claims += [(q.id, text[s:e]) for s, e in sentence_spans(text) if len(text[s:e].split()) >= 4]
    evidence = {q.id: list(q.metadata["selected_sentences"]) for q in answerable}
    # Hard negative: the other question's evidence most similar to the claim (max sentence cosine).
    flat = [(qid, s) for qid, sents in evidence.items() for s in sents]
    claim_vectors = embedder.encode_queries([c for _, c in claims])
    sentence_vectors = embedder.encode_documents([s for _, s in flat])
    similarity = claim_vectors @ sentence_vectors.T
    owners = np.asarray([qid for qid, _ in flat])
    pairs: list[tuple[str, Claim, bool]] = []
    for k, (qid, claim) in enumerate(claims):
        pairs.append((qid, Claim(claim, evidence[qid]), True))
        row = np.where(owners == qid, -np.inf, similarity[k])
        other = str(owners[int(np.argmax(row))])
        pairs.append((qid, Claim(claim, evidence[other]), False))
    parts = ClaimSupport(embedder, lexical_weight=0.5, threshold=0.5).score_claims([c for _, c, _ in pairs])
    lexical = np.asarray([p.lexical for p in parts])
    cosine = np.clip(np.asarray([p.cosine for p in parts]), 0.0, None)
    supported = np.asarray([label for _, _, label in pairs])
    in_a = np.asarray([half[qid] == "A" for qid, _, _ in pairs])
    results = []
    for w in np.round(np.arange(0.0, 1.01, 0.1), 2):
        score = w * lexical + (1 - w) * cosine
        t = best_threshold(score[in_a], ~supported[in_a])
        results.append({
            "lexical_weight": float(w),
            "threshold": round(t, 4),
            "unsupported_f1_A": prf(score[in_a] < t, ~supported[in_a])["f1"],
            "B": {**prf(score[~in_a] < t, ~supported[~in_a]), "auroc": auroc(score[~in_a], supported[~in_a])},
        })
    best = max(results, key=lambda r: r["unsupported_f1_A"] or 0.0)
    return {"claims": len(claims), "pairs": len(pairs), "best_on_A": best, "grid": results}


# ------------------------------------------------------------------------------------ run


async def run(args: argparse.Namespace) -> dict[str, Any]:
    dataset = load_dataset("clapnq")
    queries = list(dataset.queries)
    half = halves(queries, args.seed)
    embedder = build_embedder(RetrieverSettings().embedding_model, device="cpu")
    embedder.warm_up()
    started = time.perf_counter()
    passages, index = await retrieve(queries, dataset, embedder, args.index_cache, args.sentence_vectors)
    took = time.perf_counter() - started
    print(f"retrieved {len(queries)} questions ({index['chunks']} chunks) in {took:.0f} s", flush=True)
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), embedder)
    answers: dict[str, ExtractiveAnswer] = {}
    latencies = []
    for query in queries:
        started = time.perf_counter()
        answers[query.id] = answerer.answer(query.text, passages[query.id])
        latencies.append(time.perf_counter() - started)
    print(f"extractive answers in {sum(latencies):.0f} s", flush=True)
    result: dict[str, Any] = {
        "dataset": dataset.name,
        "questions": len(queries),
        "seed": args.seed,
        "embedder": embedder.model_id,
        "sentence_vectors": args.sentence_vectors,
        "extractive": {
            "latency_ms": describe([s * 1000 for s in latencies], digits=1),
            "shipped_scorer_all": extractive_quality(queries, answers),
        },
    }
    provenance = {
        "dataset": f"{dataset.name}: half A of a seeded (seed {args.seed}) per-class split, label 1 = answerable",
        "pipeline": f"retriever hybrid search, min_max fusion, top {TOP_K} (no cross-encoder: the reranker's "
        "default chain is skipped without a model); passage scores are min-max fused retriever scores",
        "embedder": embedder.model_id,
        "sentence_scorer": default_scorer().params.get("fitted_on", {}).get("command", "data/sentence_scorer.json"),
        "script": "bench/generator_core_calibration.py",
        "git_commit": _git_commit(),
        "date": dt.date.today().isoformat(),
    }
    params, gate_report = gate_run(queries, passages, answers, half, provenance)
    result["gate"] = gate_report
    result["gate_params"] = params
    result["claim_support"] = claim_calibration(queries, half, embedder)
    if args.write_gate:
        args.write_gate.parent.mkdir(parents=True, exist_ok=True)
        args.write_gate.write_text(json.dumps(params, indent=2) + "\n", encoding="utf-8")
        AnswerabilityGate.from_json(args.write_gate)
        print(f"wrote {args.write_gate}")
    return result


def _git_commit() -> str:
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10)
    except OSError:
        return ""
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--index-cache", type=Path, default=RESULTS_DIR / ".index")
    parser.add_argument("--out", type=Path, default=result_path("generator_core_calibration"))
    parser.add_argument(
        "--sentence-vectors", choices=["off", "pooled", "embedded"], default="off",
        help="The answerer scores with the retriever's stored sentence vectors of this kind (RETRIEVER_SENTENCE_VECTORS); "
        "off and embedded score the same vectors (off embeds them at answer time)",
    )
    parser.add_argument("--write-gate", type=Path, default=None, help="Write the gate fitted on half A to this JSON file")
    args = parser.parse_args()
    started = time.perf_counter()
    try:
        result = asyncio.run(run(args))
    except DatasetNotFound as exc:
        print(f"clapnq: skipped, {exc}")
        return
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    write_result(args.out, result)
    summary = {k: result[k] for k in ("extractive", "gate")} | {"claim_support": result["claim_support"]["best_on_A"]}
    print(json.dumps(summary, indent=2))
    print(f"wrote {args.out} ({result['total_seconds']} s)")


if __name__ == "__main__":
    main()
