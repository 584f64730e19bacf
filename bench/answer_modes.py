"""The generator's three modes on ClapNQ dev and the answerability gate on MTRAG-UN, through the served chain.

Chain, in-process, as ``rag_eval.calibration.gate_rows`` reproduces it: the dataset's corpus in an
embedded index built by the retriever's own runtime (``rag_eval.pipeline.open_retriever``, cached
under ``--index-cache``) → hybrid search (min_max fusion) for ``GatewaySettings().retrieval_candidates``
candidates with their embeddings, cut to ``default_top_k`` (the reranker's default chain, without a
cross-encoder, is a pass-through) → the ``AnswerGenerator`` of the generator's runtime
(``rag_generator.runtime.open_runtime(GeneratorSettings(mode=...), llm_settings, embedder=...)``)
with the search's query vector and the passages' stored vectors, and the answerability gate shipped
in ``rag_generator/data/answerability_gate.json``. The LLM modes use SmolLM2-135M served by llama.cpp
(``ragctl.stack.start_llm_server``, 2 slots).

1. **ClapNQ dev** (300 answerable + 300 unanswerable). ``extractive`` on all 600 questions; ``generative``
   and ``auto`` on a seeded stratified sample of ``--limit-llm`` per class (the local LLM is slow), with
   extractive on the same sample for a paired comparison. The gate was fitted on half A of a seeded
   (seed 0) per-class split (``rag_eval.calibration.split_halves``), so abstention is reported on all
   questions and on half B (held out). Abstention: positive = abstained, truth = unanswerable, 95 %
   percentile-bootstrap CIs over questions (2000 resamples, seeded). Answerable questions: share
   answered; ROUGE-L and token F1 of the answer (citation markers removed) against the gold answers,
   mean over the answered; citation precision = share of kept citations whose chunk belongs to the gold
   passage, and whose quote overlaps a gold selected sentence (``fold_text`` both, rapidfuzz
   ``partial_ratio`` of the shorter against the longer >= 90), micro (CI resampling answers) and macro.
   Also abstain_reason, answer mode (auto's fallbacks), claims_dropped, degraded and per-question
   generate latency (at ``--concurrency`` generations in flight for the LLM modes).
2. **MTRAG-UN** (``--mtrag``): every task with an answerability label; its last user turn refined by the
   refiner's runtime with the LLM (history cut as the gateway cuts it), searched over the pooled
   corpus, answered in extractive mode. answerable + partial should be answered, unanswerable +
   underspecified abstained. The gate was fitted on half A of MTRAG-UN too (with the refiner's no-LLM
   rewrite), so figures are given on all tasks and on half B.
3. **Streamed-then-withdrawn**: for 10 questions per LLM mode, ``generator.stream`` is consumed and the
   joined token texts compared with the final event's answer (goal: 0 differ).

    .venv/bin/python bench/answer_modes.py [--modes extractive,generative,auto] [--limit-llm 50]
        [--seed 0] [--concurrency 2] [--no-mtrag] [--out bench-results/answer_modes.json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from rapidfuzz import fuzz  # noqa: E402

from rag_common.history import cut_history  # noqa: E402
from rag_common.schemas import GenerateRequest, GenerateResponse, HistoryTurn, RefineRequest, SearchRequest  # noqa: E402
from rag_common.settings import LLMSettings  # noqa: E402
from rag_eval.answers import fold_text, rouge_l, token_f1  # noqa: E402
from rag_eval.calibration import split_halves  # noqa: E402
from rag_eval.datasets import DatasetNotFound, load_dataset  # noqa: E402
from rag_eval.datasets.types import Dataset, Query  # noqa: E402
from rag_eval.harness import EVAL_ACCESS  # noqa: E402
from rag_eval.pipeline import history_pairs, open_retriever  # noqa: E402
from rag_eval.stats import paired_bootstrap  # noqa: E402
from rag_gateway.settings import GatewaySettings  # noqa: E402
from rag_generator.answerability import DEFAULT_GATE_PATH  # noqa: E402
from rag_generator.runtime import open_runtime as open_generator  # noqa: E402
from rag_generator.settings import GeneratorSettings  # noqa: E402
from rag_generator.stream_events import ErrorEvent, FinalEvent, TokenEvent  # noqa: E402
from rag_refiner.runtime import open_runtime as open_refiner  # noqa: E402
from rag_refiner.settings import RefinerSettings  # noqa: E402
from rag_retriever.runtime import build_embedder  # noqa: E402
from rag_retriever.settings import RetrieverSettings  # noqa: E402
from ragctl.stack import free_port, start_llm_server  # noqa: E402
from harness import RESULTS_DIR, describe, result_path, write_result  # noqa: E402

MODES = ("extractive", "generative", "auto")
LLM_MODES = ("generative", "auto")
FUSION = "min_max"
RESAMPLES = 2000
#: The gate's split: ``ragctl calibrate --fit-half A --seed 0`` (checked against the gate file).
GATE_SPLIT_SEED = 0
GATE_FIT_HALF = "A"
#: rapidfuzz ``partial_ratio`` from which a cited quote matches a gold selected sentence.
GOLD_MATCH_THRESHOLD = 90.0
STREAM_CHECKS = 10
#: MTRAG-UN labels the generator should answer; the others (unanswerable, underspecified) it should not.
MTRAG_SHOULD_ANSWER = {"answerable": True, "partial": True, "unanswerable": False, "underspecified": False}
_MARKERS = re.compile(r"\s*\[\d+\]")


def log(message: str) -> None:
    print(message, flush=True)


# ------------------------------------------------------------------------------------ statistics


def _ci(values: np.ndarray) -> list[float] | None:
    values = values[~np.isnan(values)]
    if values.size == 0:
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return [round(float(low), 4), round(float(high), 4)]


def _resamples(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, n, size=(RESAMPLES, n))


def _prf(tp: np.ndarray, pos: np.ndarray, true: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Precision, recall, F1 from counts (arrays); NaN where a ratio is 0 / 0."""
    tp, pos, true = (np.asarray(v, dtype=float) for v in (tp, pos, true))
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.where(pos > 0, tp / np.maximum(pos, 1), np.nan)
        r = np.where(true > 0, tp / np.maximum(true, 1), np.nan)
        f = np.where(p + r > 0, 2 * p * r / np.where(p + r > 0, p + r, 1), 0.0)
    f = np.where(np.isnan(p) | np.isnan(r), np.nan, f)
    return p, r, f


def _f1(a: np.ndarray, u: np.ndarray) -> np.ndarray:
    return _prf((a & u).sum(axis=-1), a.sum(axis=-1), u.sum(axis=-1))[2]


def abstention(abstained: Sequence[bool], unanswerable: Sequence[bool], seed: int) -> dict[str, Any]:
    """Precision / recall / F1 of abstaining (positive) against unanswerable (truth), bootstrap CIs."""
    a = np.asarray(abstained, dtype=bool)
    u = np.asarray(unanswerable, dtype=bool)
    n = len(a)
    out: dict[str, Any] = {"n": n, "unanswerable": int(u.sum())}
    if n == 0:
        return out
    tp, fp = int(np.sum(a & u)), int(np.sum(a & ~u))
    fn, tn = int(np.sum(~a & u)), int(np.sum(~a & ~u))
    p, r, f = (float(x) for x in _prf(tp, tp + fp, tp + fn))
    idx = _resamples(n, seed)
    ab, un = a[idx], u[idx]
    bp, br, bf = _prf((ab & un).sum(axis=1), ab.sum(axis=1), un.sum(axis=1))
    for name, point, draws in (("precision", p, bp), ("recall", r, br), ("f1", f, bf)):
        out[name] = None if np.isnan(point) else round(point, 4)
        out[f"{name}_ci"] = _ci(draws)
    out.update(tp=tp, fp=fp, fn=fn, tn=tn, abstain_rate=round(float(a.mean()), 4))
    return out


def mean_ci(values: Sequence[float], seed: int) -> dict[str, Any]:
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        return {"n": 0, "mean": None, "ci": None}
    draws = x[_resamples(x.size, seed)].mean(axis=1)
    return {"n": int(x.size), "mean": round(float(x.mean()), 4), "ci": _ci(draws)}


def ratio_ci(hits: Sequence[float], counts: Sequence[float], seed: int) -> dict[str, Any]:
    """sum(hits) / sum(counts), CI resampling the units (answers) the counts belong to."""
    h, c = np.asarray(hits, dtype=float), np.asarray(counts, dtype=float)
    if c.sum() == 0:
        return {"units": int(c.size), "count": 0, "value": None, "ci": None}
    idx = _resamples(c.size, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = np.where(c[idx].sum(axis=1) > 0, h[idx].sum(axis=1) / np.maximum(c[idx].sum(axis=1), 1), np.nan)
    return {"units": int(c.size), "count": int(c.sum()), "value": round(float(h.sum() / c.sum()), 4), "ci": _ci(draws)}


def f1_delta(a1: Sequence[bool], a2: Sequence[bool], unanswerable: Sequence[bool], seed: int) -> dict[str, Any]:
    """Abstention F1(a1) − F1(a2) on the same questions, paired bootstrap CI."""
    x, y, u = (np.asarray(v, dtype=bool) for v in (a1, a2, unanswerable))
    if len(u) == 0:
        return {"delta": None, "ci": None}
    point = float(_f1(x, u) - _f1(y, u))
    idx = _resamples(len(u), seed)
    draws = _f1(x[idx], u[idx]) - _f1(y[idx], u[idx])
    return {"delta": None if np.isnan(point) else round(point, 4), "ci": _ci(draws)}


def latency(values: Sequence[float]) -> dict[str, float | None]:
    return describe(values, digits=1)


# ------------------------------------------------------------------------------------ helpers


def stratified_sample(queries: Sequence[Query], per_class: int, seed: int) -> list[Query]:
    """``per_class`` answerable + ``per_class`` unanswerable questions, each class a seeded permutation."""
    rng = np.random.default_rng(seed)
    chosen: list[Query] = []
    for label in (True, False):
        pool = sorted((q for q in queries if q.answerable is label), key=lambda q: q.id)
        chosen += [pool[i] for i in rng.permutation(len(pool))[:per_class]]
    return chosen


def answer_text(answer: str) -> str:
    """The answer without its ``[n]`` citation markers (what the metrics compare with the gold)."""
    return " ".join(_MARKERS.sub("", answer).split())


def quote_in_selected(quote: str, selected: Sequence[str], threshold: float = GOLD_MATCH_THRESHOLD) -> bool:
    q = fold_text(quote)
    if not q:
        return False
    for sentence in selected:
        s = fold_text(sentence)
        if not s:
            continue
        shorter, longer = (q, s) if len(q) <= len(s) else (s, q)
        if shorter in longer or fuzz.partial_ratio(shorter, longer) >= threshold:
            return True
    return False


def gate_info() -> dict[str, Any]:
    path = Path(os.environ.get("GENERATOR_GATE_PATH") or DEFAULT_GATE_PATH)
    raw = path.read_bytes()
    params = json.loads(raw)
    fitted = params.get("fitted_on", {})
    command = fitted.get("command", "")
    if f"--seed {GATE_SPLIT_SEED}" not in command or f"--fit-half {GATE_FIT_HALF}" not in command:
        log(f"WARNING: the gate was not fitted with --fit-half {GATE_FIT_HALF} --seed {GATE_SPLIT_SEED} "
            f"({command!r}): the 'half B' figures are not held out")
    return {
        "path": str(path),
        "sha256": hashlib.sha256(raw).hexdigest()[:16],
        "mtime": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(path.stat().st_mtime)) + " UTC",
        "threshold": params.get("threshold"),
        "command": command,
        "git_commit": fitted.get("git_commit"),
        "dataset": fitted.get("dataset"),
        "calibration_held_out_per_dataset": {
            name: {k: v.get("held_out", {}).get(k) for k in ("n", "precision", "recall", "f1")}
            for name, v in fitted.get("held_out_per_dataset", {}).items()
        },
    }


class Searcher:
    """The served chain's retrieval: hybrid, the gateway's candidate depth with embeddings, cut to top_k."""

    def __init__(self, retriever: Any) -> None:
        gateway = GatewaySettings()
        self.depth = max(gateway.retrieval_candidates, gateway.default_top_k)
        self.top_k = gateway.default_top_k
        self.mode = gateway.search_mode
        self.service = retriever.search_services[FUSION]
        self.lock = asyncio.Lock()

    async def __call__(self, text: str) -> tuple[list[Any], list[float] | None, float]:
        async with self.lock:
            started = time.perf_counter()
            found = await self.service.search(
                SearchRequest(query=text, top_k=self.depth, mode=self.mode, include_embeddings=True), EVAL_ACCESS
            )
            ms = (time.perf_counter() - started) * 1000.0
        return found.passages[: self.top_k], found.query_embedding, ms


def response_record(response: GenerateResponse, by_chunk: dict[str, str]) -> dict[str, Any]:
    return {
        "abstained": response.abstained,
        "abstain_reason": response.abstain_reason,
        "mode": response.mode,
        "answerability": response.answerability,
        "citation_precision": response.citation_precision,
        "claims_dropped": response.claims_dropped,
        "repaired": response.repaired,
        "degraded": list(response.degraded),
        "answer": response.answer,
        "citations": [
            {"doc_id": by_chunk.get(c.chunk_id, c.chunk_id), "chunk_id": c.chunk_id, "quote": c.quote}
            for c in response.citations
        ],
    }


async def generate_all(
    generator: Any,
    items: Sequence[tuple[str, GenerateRequest, dict[str, str]]],
    concurrency: int,
    label: str,
) -> dict[str, dict[str, Any]]:
    """``generator.generate`` for each (id, request, chunk→doc), ``concurrency`` in flight; per-id records."""
    semaphore = asyncio.Semaphore(concurrency)
    out: dict[str, dict[str, Any]] = {}
    done = 0
    started = time.perf_counter()
    step = max(10, len(items) // 10)

    async def one(qid: str, request: GenerateRequest, by_chunk: dict[str, str]) -> None:
        nonlocal done
        async with semaphore:
            t0 = time.perf_counter()
            try:
                response = await generator.generate(request)
            except Exception as exc:  # noqa: BLE001 - generative mode raises DependencyFailed when the LLM fails
                record: dict[str, Any] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
            else:
                record = response_record(response, by_chunk)
            record["generate_ms"] = round((time.perf_counter() - t0) * 1000.0, 1)
        out[qid] = record
        done += 1
        if done % step == 0 or done == len(items):
            log(f"   {label}: {done}/{len(items)}, {time.perf_counter() - started:.0f} s")

    await asyncio.gather(*(one(*item) for item in items))
    return out


async def stream_check(generator: Any, request: GenerateRequest) -> dict[str, Any]:
    tokens: list[str] = []
    final: GenerateResponse | None = None
    error = None
    t0 = time.perf_counter()
    first_token_ms = None
    async for event in generator.stream(request):
        if isinstance(event, TokenEvent):
            if first_token_ms is None:
                first_token_ms = round((time.perf_counter() - t0) * 1000.0, 1)
            tokens.append(event.text)
        elif isinstance(event, FinalEvent):
            final = event.response
        elif isinstance(event, ErrorEvent):
            error = f"{type(event.error).__name__}: {event.error}"[:300]
    streamed = "".join(tokens)
    return {
        "tokens": len(tokens),
        "streamed": streamed,
        "final": None if final is None else final.answer,
        "abstained": None if final is None else final.abstained,
        "mode": None if final is None else final.mode,
        "error": error,
        "differs": final is not None and streamed != final.answer,
        "tokens_after_error": error is not None and bool(tokens),
        "first_token_ms": first_token_ms,
        "total_ms": round((time.perf_counter() - t0) * 1000.0, 1),
    }


# ------------------------------------------------------------------------------------ ClapNQ


async def clapnq_phase(args: argparse.Namespace, stack: AsyncExitStack, embedder: Any, llm_url: Callable[[], str]) -> dict[str, Any]:
    dataset = load_dataset("clapnq")
    dataset.check()
    halves = split_halves(dataset.queries, GATE_SPLIT_SEED, prefix=f"{dataset.name}/")
    half_of = {q.id: halves[f"{dataset.name}/{q.id}"] for q in dataset.queries}
    llm_modes = [m for m in args.modes if m in LLM_MODES]
    sample = stratified_sample(dataset.queries, args.limit_llm, args.seed) if llm_modes else []
    sample_ids = {q.id for q in sample}
    run_extractive_on = dataset.queries if "extractive" in args.modes else sample
    timings: dict[str, float] = {}

    t0 = time.perf_counter()
    retriever, index = await stack.enter_async_context(
        open_retriever(dataset, args.index_cache, embedder, settings=RetrieverSettings(), progress=False)
    )
    search = Searcher(retriever)
    log(f"clapnq: {index['documents']} documents → {index['chunks']} chunks "
        f"({'reused' if index['reused'] else 'ingested'}); searching {len(dataset.queries)} questions "
        f"(hybrid {FUSION}, {search.depth} candidates → top {search.top_k})")
    requests: dict[str, tuple[str, GenerateRequest, dict[str, str]]] = {}
    search_ms: list[float] = []
    gold_in_top: dict[str, bool] = {}
    for query in dataset.queries:
        passages, query_vector, ms = await search(query.text)
        search_ms.append(ms)
        requests[query.id] = (
            query.id,
            GenerateRequest(query=query.text, passages=passages, query_embedding=query_vector),
            {p.chunk_id: p.doc_id for p in passages},
        )
        gold = dataset.relevant(query.id)
        gold_in_top[query.id] = bool(gold) and any(p.doc_id in gold for p in passages)
    timings["search_s"] = round(time.perf_counter() - t0, 1)

    records: dict[str, dict[str, dict[str, Any]]] = {}
    streams: dict[str, list[dict[str, Any]]] = {}
    for mode in MODES:
        if mode == "extractive":
            if not run_extractive_on:
                continue
            targets = run_extractive_on
        elif mode in llm_modes:
            targets = sample
        else:
            continue
        t1 = time.perf_counter()
        llm_settings = LLMSettings(base_url=llm_url()) if mode in LLM_MODES else LLMSettings()
        async with open_generator(GeneratorSettings(mode=mode), llm_settings, embedder=embedder) as runtime:
            generator = runtime.generator
            if mode in LLM_MODES:  # llama.cpp's first call is slow: not measured
                warm = requests[targets[0].id][1]
                try:
                    await generator.generate(warm)
                except Exception as exc:  # noqa: BLE001
                    log(f"   warm-up failed: {type(exc).__name__}: {exc}")
            concurrency = args.concurrency if mode in LLM_MODES else 1
            log(f"clapnq {mode}: {len(targets)} questions, concurrency {concurrency} ...")
            records[mode] = await generate_all(generator, [requests[q.id] for q in targets], concurrency, f"clapnq {mode}")
            timings[f"{mode}_generate_s"] = round(time.perf_counter() - t1, 1)
            if mode in LLM_MODES:
                t2 = time.perf_counter()
                answered = [q for q in targets if not records[mode][q.id].get("abstained", True)]
                others = [q for q in targets if q not in answered]
                chosen = (answered + others)[:STREAM_CHECKS]
                checks = []
                for query in chosen:
                    check = await stream_check(generator, requests[query.id][1])
                    check["query_id"] = query.id
                    check["same_as_generate"] = check["final"] == records[mode][query.id].get("answer")
                    checks.append(check)
                streams[mode] = checks
                timings[f"{mode}_stream_s"] = round(time.perf_counter() - t2, 1)
                log(f"   stream check: {sum(c['differs'] for c in checks)} of {len(checks)} differ")

    query_of = {q.id: q for q in dataset.queries}
    rows: dict[str, list[dict[str, Any]]] = {}
    for mode, per_id in records.items():
        rows[mode] = []
        for qid, record in per_id.items():
            query = query_of[qid]
            row = {
                "query_id": qid,
                "answerable": bool(query.answerable),
                "half": half_of[qid],
                "in_sample": qid in sample_ids,
                "gold_in_top_k": gold_in_top[qid],
                **record,
            }
            if "error" not in record and query.answerable and not record["abstained"]:
                text = answer_text(record["answer"])
                row["rouge_l"] = rouge_l(text, query.answers) if query.answers else None
                row["token_f1"] = token_f1(text, query.answers) if query.answers else None
                gold = dataset.relevant(qid)
                selected = query.metadata.get("selected_sentences", [])
                row["citation_gold_passage"] = [c["doc_id"] in gold for c in record["citations"]]
                row["citation_gold_sentence"] = [quote_in_selected(c["quote"], selected) for c in record["citations"]]
            rows[mode].append(row)
    return {
        "dataset": dataset.name,
        "index": {k: v for k, v in index.items() if k != "fingerprint"},
        "sample": {"per_class": args.limit_llm, "seed": args.seed, "ids": sorted(sample_ids)},
        "search_ms": latency(search_ms),
        "timings": timings,
        "rows": rows,
        "streams": streams,
    }


def summarise_mode(rows: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r]
    answerable = [r for r in ok if r["answerable"]]
    answered = [r for r in answerable if not r["abstained"]]
    with_cites = [r for r in answered if r["citations"]]
    passage_hits = [sum(r["citation_gold_passage"]) for r in answered]
    sentence_hits = [sum(r["citation_gold_sentence"]) for r in answered]
    counts = [len(r["citations"]) for r in answered]
    degraded = Counter(d.split(" (")[0] for r in ok for d in r["degraded"])
    return {
        "questions": len(rows),
        "errors": len(rows) - len(ok),
        "error_examples": sorted({r["error"] for r in rows if "error" in r})[:3],
        "abstention": abstention([r["abstained"] for r in ok], [not r["answerable"] for r in ok], seed),
        "abstention_half_B": abstention(
            [r["abstained"] for r in ok if r["half"] == "B"], [not r["answerable"] for r in ok if r["half"] == "B"], seed
        ),
        "answerable": len(answerable),
        "answered_share": mean_ci([float(not r["abstained"]) for r in answerable], seed),
        "rouge_l": mean_ci([r["rouge_l"] for r in answered if r.get("rouge_l") is not None], seed),
        "token_f1": mean_ci([r["token_f1"] for r in answered if r.get("token_f1") is not None], seed),
        "citation_gold_passage_micro": ratio_ci(passage_hits, counts, seed),
        "citation_gold_sentence_micro": ratio_ci(sentence_hits, counts, seed),
        "citation_gold_passage_macro": mean_ci(
            [sum(r["citation_gold_passage"]) / len(r["citations"]) for r in with_cites], seed
        ),
        "citation_gold_sentence_macro": mean_ci(
            [sum(r["citation_gold_sentence"]) / len(r["citations"]) for r in with_cites], seed
        ),
        "gold_in_top_k_answered": round(float(np.mean([r["gold_in_top_k"] for r in answered])), 4) if answered else None,
        "citations_per_answer": round(float(np.mean(counts)), 2) if counts else None,
        "abstain_reasons": {
            "answerable": dict(Counter(r["abstain_reason"] or "(answered)" for r in ok if r["answerable"])),
            "unanswerable": dict(Counter(r["abstain_reason"] or "(answered)" for r in ok if not r["answerable"])),
        },
        "answer_modes": dict(Counter(r["mode"] or "(abstained)" for r in ok)),
        "claims_dropped": int(sum(r["claims_dropped"] for r in ok)),
        "generator_citation_precision_mean": (
            round(float(np.mean(v)), 4) if (v := [r["citation_precision"] for r in ok if r["citation_precision"] is not None]) else None
        ),
        "repaired": sum(bool(r["repaired"]) for r in ok),
        "degraded_responses": sum(bool(r["degraded"]) for r in ok),
        "degraded": dict(degraded),
        "generate_ms": latency([r["generate_ms"] for r in rows]),
    }


def paired(rows_x: list[dict[str, Any]], rows_y: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    """LLM mode (x) − extractive (y) on the questions both answered without error."""
    by_id = {r["query_id"]: r for r in rows_y}
    pairs = [(x, by_id[x["query_id"]]) for x in rows_x if x["query_id"] in by_id and "error" not in x and "error" not in by_id[x["query_id"]]]
    out: dict[str, Any] = {"questions": len(pairs)}
    u = [not x["answerable"] for x, _ in pairs]
    out["abstention_f1"] = f1_delta([x["abstained"] for x, _ in pairs], [y["abstained"] for _, y in pairs], u, seed)
    answerable = [(x, y) for x, y in pairs if x["answerable"]]
    d = paired_bootstrap([float(not x["abstained"]) for x, _ in answerable], [float(not y["abstained"]) for _, y in answerable], seed=seed)
    out["answered_share"] = {"delta": round(d.delta, 4), "ci": [round(d.low, 4), round(d.high, 4)], "n": d.n}
    both = [(x, y) for x, y in answerable if not x["abstained"] and not y["abstained"]]
    for metric in ("rouge_l", "token_f1"):
        valid = [(x[metric], y[metric]) for x, y in both if x.get(metric) is not None and y.get(metric) is not None]
        if valid:
            d = paired_bootstrap([a for a, _ in valid], [b for _, b in valid], seed=seed)
            out[metric] = {"delta": round(d.delta, 4), "ci": [round(d.low, 4), round(d.high, 4)], "n": d.n}
        else:
            out[metric] = {"delta": None, "ci": None, "n": 0}
    return out


def summarise_clapnq(phase: dict[str, Any], seed: int) -> dict[str, Any]:
    rows = phase["rows"]
    out: dict[str, Any] = {"all": {}, "sample": {}, "paired_vs_extractive": {}, "stream_check": {}}
    for mode, mode_rows in rows.items():
        if mode == "extractive" and len(mode_rows) > len(phase["sample"]["ids"]):
            out["all"][mode] = summarise_mode(mode_rows, seed)
        sample_rows = [r for r in mode_rows if r["in_sample"]]
        if sample_rows and phase["sample"]["ids"]:
            out["sample"][mode] = summarise_mode(sample_rows, seed)
    for mode in LLM_MODES:
        if mode in rows and "extractive" in rows:
            out["paired_vs_extractive"][mode] = paired(
                rows[mode], [r for r in rows["extractive"] if r["in_sample"]], seed
            )
    for mode, checks in phase["streams"].items():
        out["stream_check"][mode] = {
            "checked": len(checks),
            "differ": sum(c["differs"] for c in checks),
            "errors": sum(c["error"] is not None for c in checks),
            "tokens_after_error": sum(c["tokens_after_error"] for c in checks),
            "answered": sum(c["abstained"] is False for c in checks),
            "final_same_as_generate": sum(bool(c["same_as_generate"]) for c in checks),
            "first_token_ms": latency([c["first_token_ms"] for c in checks if c["first_token_ms"] is not None]),
        }
    return out


# ------------------------------------------------------------------------------------ MTRAG-UN


async def mtrag_phase(args: argparse.Namespace, stack: AsyncExitStack, embedder: Any, llm_url: Callable[[], str]) -> dict[str, Any]:
    dataset = load_dataset("mtrag-un")
    dataset.check()
    queries = [q for q in dataset.queries if q.answerability in MTRAG_SHOULD_ANSWER]
    halves = split_halves(dataset.queries, GATE_SPLIT_SEED, prefix=f"{dataset.name}/")
    window = GatewaySettings().history_window()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    retriever, index = await stack.enter_async_context(
        open_retriever(dataset, args.index_cache, embedder, settings=RetrieverSettings(), progress=False)
    )
    search = Searcher(retriever)
    log(f"mtrag-un: {index['documents']} documents → {index['chunks']} chunks "
        f"({'reused' if index['reused'] else 'ingested'}); {len(queries)} labelled tasks")
    llm = LLMSettings(base_url=llm_url())
    refiner = (await stack.enter_async_context(open_refiner(RefinerSettings(), llm))).refiner
    generator = (await stack.enter_async_context(
        open_generator(GeneratorSettings(mode="extractive"), llm, embedder=embedder)
    )).generator
    await refiner.refine(RefineRequest(  # warm-up, not measured
        message="and how much does it cost?",
        history=[HistoryTurn(question="What is a Roth IRA?", answer="A retirement account funded after tax.")],
    ))
    timings["open_s"] = round(time.perf_counter() - t0, 1)
    semaphore = asyncio.Semaphore(args.concurrency)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    step = max(10, len(queries) // 10)

    async def one(query: Query) -> None:
        pairs = cut_history(history_pairs(query.history), window)
        row: dict[str, Any] = {
            "query_id": query.id,
            "label": query.answerability,
            "should_answer": MTRAG_SHOULD_ANSWER[query.answerability],
            "half": halves[f"{dataset.name}/{query.id}"],
            "follow_up": bool(pairs),
            "message": query.text,
        }
        async with semaphore:
            t1 = time.perf_counter()
            try:
                refined = await refiner.refine(RefineRequest(message=query.text, history=pairs))
            except Exception as exc:  # noqa: BLE001
                row["error"] = f"refine {type(exc).__name__}: {exc}"[:300]
                rows.append(row)
                return
            row["refine_ms"] = round((time.perf_counter() - t1) * 1000.0, 1)
        row.update(refined_query=refined.query, refine_method=refined.method, intent=refined.intent,
                   intent_method=refined.intent_method)
        passages, query_vector, ms = await search(refined.query)
        row["search_ms"] = round(ms, 1)
        gold = dataset.relevant(query.id)
        row["gold_in_top_k"] = bool(gold) and any(p.doc_id in gold for p in passages)
        t2 = time.perf_counter()
        try:
            response = await generator.generate(
                GenerateRequest(query=refined.query, passages=passages, history=pairs, query_embedding=query_vector)
            )
        except Exception as exc:  # noqa: BLE001
            row["error"] = f"generate {type(exc).__name__}: {exc}"[:300]
        else:
            row.update(abstained=response.abstained, abstain_reason=response.abstain_reason,
                       answerability=response.answerability, answer=response.answer[:500])
        row["generate_ms"] = round((time.perf_counter() - t2) * 1000.0, 1)
        rows.append(row)
        if len(rows) % step == 0 or len(rows) == len(queries):
            log(f"   mtrag-un: {len(rows)}/{len(queries)}, {time.perf_counter() - started:.0f} s")

    await asyncio.gather(*(one(q) for q in queries))
    timings["tasks_s"] = round(time.perf_counter() - started, 1)
    order = {q.id: i for i, q in enumerate(queries)}
    rows.sort(key=lambda r: order[r["query_id"]])
    return {"dataset": dataset.name, "index": {k: v for k, v in index.items() if k != "fingerprint"},
            "timings": timings, "rows": rows}


def summarise_mtrag_rows(rows: list[dict[str, Any]], seed: int) -> dict[str, Any]:
    ok = [r for r in rows if "error" not in r]
    per_label = {}
    for label, should in MTRAG_SHOULD_ANSWER.items():
        mine = [r for r in ok if r["label"] == label]
        answered = sum(not r["abstained"] for r in mine)
        per_label[label] = {
            "n": len(mine),
            "answered": answered,
            "abstained": len(mine) - answered,
            "expected": "answer" if should else "abstain",
            "correct_share": round((answered if should else len(mine) - answered) / len(mine), 4) if mine else None,
        }
    correct = [float(r["abstained"] != r["should_answer"]) for r in ok]
    return {
        "tasks": len(rows),
        "errors": len(rows) - len(ok),
        "per_label": per_label,
        "accuracy": mean_ci(correct, seed),
        "abstention": abstention([r["abstained"] for r in ok], [not r["should_answer"] for r in ok], seed),
    }


def summarise_mtrag(phase: dict[str, Any], seed: int) -> dict[str, Any]:
    rows = phase["rows"]
    ok = [r for r in rows if "error" not in r]
    as_served = []
    for r in ok:
        # The gateway answers only the rag intent with the generator: chitchat / meta get a canned
        # (non-abstaining) reply, out_of_scope is declined (abstains).
        served = dict(r)
        if r["intent"] in ("chitchat", "meta"):
            served["abstained"] = False
        elif r["intent"] == "out_of_scope":
            served["abstained"] = True
        as_served.append(served)
    return {
        "all": summarise_mtrag_rows(rows, seed),
        "half_B": summarise_mtrag_rows([r for r in rows if r["half"] == "B"], seed),
        "all_as_served_by_intent": summarise_mtrag_rows(as_served, seed),
        "follow_ups": sum(r["follow_up"] for r in rows),
        "refine_methods": dict(Counter(r.get("refine_method", "(error)") for r in rows)),
        "intents": dict(Counter(r.get("intent", "(error)") for r in rows)),
        "intent_by_label": {
            label: dict(Counter(r.get("intent", "(error)") for r in rows if r["label"] == label))
            for label in MTRAG_SHOULD_ANSWER
        },
        "abstain_reasons": {
            label: dict(Counter(r["abstain_reason"] or "(answered)" for r in ok if r["label"] == label))
            for label in MTRAG_SHOULD_ANSWER
        },
        "gold_in_top_k_answerable_partial": round(float(np.mean(
            [r["gold_in_top_k"] for r in ok if r["should_answer"]])), 4) if any(r["should_answer"] for r in ok) else None,
        "error_examples": sorted({r["error"] for r in rows if "error" in r})[:3],
        "refine_ms": latency([r["refine_ms"] for r in rows if "refine_ms" in r]),
        "generate_ms": latency([r["generate_ms"] for r in rows if "generate_ms" in r]),
    }


# ------------------------------------------------------------------------------------ run


async def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"gate": gate_info()}
    gateway = GatewaySettings()
    result["chain"] = {
        "search": f"{gateway.search_mode} ({FUSION}), {max(gateway.retrieval_candidates, gateway.default_top_k)} "
        f"candidates with embeddings → top {gateway.default_top_k}, no reranker (default chain is a pass-through)",
        "generator_settings": GeneratorSettings().model_dump(mode="json", exclude={"port", "host", "mode"}),
        "llm": "SmolLM2-135M-Instruct Q4_1 (llama.cpp via ragctl.stack.start_llm_server, 2 slots)",
        "concurrency_llm_modes": args.concurrency,
    }
    env = sorted(k for k in os.environ if k.startswith(("GENERATOR_", "LLM_", "REFINER_", "GATEWAY_", "RETRIEVER_")))
    if env:
        log(f"WARNING: service settings from the environment apply: {env}")
        result["env_settings"] = env
    embedder = build_embedder(RetrieverSettings())
    embedder.warm_up()
    async with AsyncExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory()))
        server: dict[str, Any] = {}

        def llm_url() -> str:
            if "proc" not in server:
                log("starting the LLM server (SmolLM2-135M, llama.cpp) ...")
                proc = start_llm_server(free_port(), tmp / "logs")
                stack.callback(proc.stop)
                server["proc"] = proc
            return server["proc"].url

        t0 = time.perf_counter()
        clapnq = await clapnq_phase(args, stack, embedder, llm_url)
        result["clapnq"] = {
            "summary": summarise_clapnq(clapnq, args.seed),
            **{k: v for k, v in clapnq.items() if k not in ("rows", "streams")},
            "seconds": round(time.perf_counter() - t0, 1),
        }
        result["clapnq_records"] = clapnq["rows"]
        result["clapnq_streams"] = clapnq["streams"]
        if args.mtrag:
            t0 = time.perf_counter()
            mtrag = await mtrag_phase(args, stack, embedder, llm_url)
            result["mtrag"] = {
                "summary": summarise_mtrag(mtrag, args.seed),
                **{k: v for k, v in mtrag.items() if k != "rows"},
                "seconds": round(time.perf_counter() - t0, 1),
            }
            result["mtrag_records"] = mtrag["rows"]
    return result


# ------------------------------------------------------------------------------------ tables


def fmt(value: float | None, ci: Sequence[float] | None = None, digits: int = 3) -> str:
    if value is None:
        return "–"
    return f"{value:.{digits}f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def signed(d: dict[str, Any]) -> str:
    if d.get("delta") is None:
        return "–"
    ci = f" [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]" if d.get("ci") else ""
    return f"{d['delta']:+.3f}{ci}"


def abstention_row(name: str, a: dict[str, Any], errors: int) -> str:
    if not a.get("n"):
        return f"| {name} | 0 | – | – | – | – | – | {errors} |"
    return (f"| {name} | {a['n']} | {fmt(a['abstain_rate'])} | {fmt(a['precision'], a['precision_ci'])} | "
            f"{fmt(a['recall'], a['recall_ci'])} | {fmt(a['f1'], a['f1_ci'])} | {a['tp']}/{a['fp']}/{a['fn']}/{a['tn']} | {errors} |")


def tables(result: dict[str, Any]) -> str:
    g = result["gate"]
    lines = [f"Gate: {g['path']} (sha256 {g['sha256']}, written {g['mtime']}, threshold {g['threshold']:.4f}; "
             f"`{g['command']}` at {str(g['git_commit'])[:7]})", ""]
    c = result["clapnq"]
    s = c["summary"]
    per_class = c["sample"]["per_class"]
    lines += [
        f"### ClapNQ dev: abstention (positive = abstained, truth = unanswerable; 95 % bootstrap CI, {RESAMPLES} resamples)",
        "",
        f"Half B = the gate's held-out half (split seed {GATE_SPLIT_SEED}); \"all\" includes half A, on which the gate was "
        f"fitted. LLM modes: seeded sample of {per_class} answerable + {per_class} unanswerable (seed {c['sample']['seed']}) "
        "— the local LLM is too slow for all 600.",
        "",
        "| mode | questions | n | abstain rate | precision | recall | F1 | TP/FP/FN/TN | errors |",
        "|---|---|---:|---:|---|---|---|---|---:|",
    ]
    for mode, m in s["all"].items():
        lines.append(abstention_row(f"{mode} | all 600", m["abstention"], m["errors"]))
        lines.append(abstention_row(f"{mode} | half B (held out)", m["abstention_half_B"], m["errors"]))
    for mode, m in s["sample"].items():
        lines.append(abstention_row(f"{mode} | sample", m["abstention"], m["errors"]))
        lines.append(abstention_row(f"{mode} | sample ∩ half B", m["abstention_half_B"], m["errors"]))
    lines += [
        "",
        "### ClapNQ dev: answerable questions (answer metrics: mean over answered, markers removed; citations: kept citations)",
        "",
        "| mode | questions | answerable | answered share | ROUGE-L | token F1 | citations | cit. gold passage micro | macro | cit. gold sentence micro | macro |",
        "|---|---|---:|---|---|---|---:|---|---:|---|---:|",
    ]
    blocks = [(mode, "all 600", m) for mode, m in s["all"].items()] + [(mode, "sample", m) for mode, m in s["sample"].items()]
    for mode, label, m in blocks:
        cp, cs = m["citation_gold_passage_micro"], m["citation_gold_sentence_micro"]
        lines.append(
            f"| {mode} | {label} | {m['answerable']} | {fmt(m['answered_share']['mean'], m['answered_share']['ci'])} | "
            f"{fmt(m['rouge_l']['mean'], m['rouge_l']['ci'])} | {fmt(m['token_f1']['mean'], m['token_f1']['ci'])} | "
            f"{cp['count']} | {fmt(cp['value'], cp['ci'])} | {fmt(m['citation_gold_passage_macro']['mean'])} | "
            f"{fmt(cs['value'], cs['ci'])} | {fmt(m['citation_gold_sentence_macro']['mean'])} |"
        )
    lines += [
        "",
        "### ClapNQ dev: what the generator did",
        "",
        "| mode | questions | answer modes | abstain_reason (answerable) | abstain_reason (unanswerable) | claims dropped | repaired | degraded | generate p50 / p95 ms |",
        "|---|---|---|---|---|---:|---:|---|---|",
    ]

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: -kv[1])) or "–"

    for mode, label, m in blocks:
        deg = f"{m['degraded_responses']}" + (f" ({counts(m['degraded'])})" if m["degraded"] else "")
        lat = m["generate_ms"]
        lines.append(
            f"| {mode} | {label} | {counts(m['answer_modes'])} | {counts(m['abstain_reasons']['answerable'])} | "
            f"{counts(m['abstain_reasons']['unanswerable'])} | {m['claims_dropped']} | {m['repaired']} | {deg} | "
            f"{fmt(lat['p50'], digits=0)} / {fmt(lat['p95'], digits=0)} |"
        )
    if s["paired_vs_extractive"]:
        lines += [
            "",
            "### ClapNQ dev sample: LLM mode − extractive, same questions (paired bootstrap 95 % CI)",
            "",
            "| mode | questions | Δ abstention F1 | Δ answered share (answerable) | Δ ROUGE-L (both answered) | Δ token F1 (both answered) |",
            "|---|---:|---|---|---|---|",
        ]
        for mode, p in s["paired_vs_extractive"].items():
            lines.append(f"| {mode} | {p['questions']} | {signed(p['abstention_f1'])} | {signed(p['answered_share'])} | "
                         f"{signed(p['rouge_l'])} (n {p['rouge_l']['n']}) | {signed(p['token_f1'])} (n {p['token_f1']['n']}) |")
    if s["stream_check"]:
        lines += [
            "",
            "### Streamed-then-withdrawn (generator.stream: joined token texts vs the final event's answer; goal 0)",
            "",
            "| mode | checked | of which answered | differ | error events | tokens before an error | final = generate()'s answer | first token p50 ms |",
            "|---|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for mode, x in s["stream_check"].items():
            lines.append(f"| {mode} | {x['checked']} | {x['answered']} | {x['differ']} | {x['errors']} | "
                         f"{x['tokens_after_error']} | {x['final_same_as_generate']} | {fmt(x['first_token_ms']['p50'], digits=0)} |")
    if "mtrag" in result:
        mt = result["mtrag"]["summary"]
        lines += [
            "",
            "### MTRAG-UN: the gate (refiner ON with the LLM, extractive mode; should answer = answerable + partial)",
            "",
        ]
        for key, title in (("all", "all labelled tasks"), ("half_B", "half B (held out from the gate's fit)"),
                           ("all_as_served_by_intent", "all tasks, as served (non-rag intents: chitchat/meta answered, out_of_scope declined)")):
            x = mt[key]
            lines += [f"**{title}** — accuracy {fmt(x['accuracy']['mean'], x['accuracy']['ci'])} "
                      f"(n {x['accuracy']['n']}, errors {x['errors']})", "",
                      "| label | expected | n | answered | abstained | correct |", "|---|---|---:|---:|---:|---:|"]
            for label, p in x["per_label"].items():
                lines.append(f"| {label} | {p['expected']} | {p['n']} | {p['answered']} | {p['abstained']} | {fmt(p['correct_share'])} |")
            lines += ["", "| abstention (positive = unanswerable + underspecified) | n | abstain rate | precision | recall | F1 | TP/FP/FN/TN | errors |",
                      "|---|---:|---:|---|---|---|---|---:|", abstention_row(key, x["abstention"], x["errors"]), ""]
        lines += [
            f"follow-ups {mt['follow_ups']}; refine methods: {counts(mt['refine_methods'])}; intents: {counts(mt['intents'])}; "
            f"gold passage in the top {GatewaySettings().default_top_k} (answerable + partial): {fmt(mt['gold_in_top_k_answerable_partial'])}; "
            f"refine p50/p95 {fmt(mt['refine_ms']['p50'], digits=0)}/{fmt(mt['refine_ms']['p95'], digits=0)} ms, "
            f"generate p50/p95 {fmt(mt['generate_ms']['p50'], digits=0)}/{fmt(mt['generate_ms']['p95'], digits=0)} ms",
            "",
            "| label | abstain_reason | intents |",
            "|---|---|---|",
        ]
        for label in MTRAG_SHOULD_ANSWER:
            lines.append(f"| {label} | {counts(mt['abstain_reasons'][label])} | {counts(mt['intent_by_label'][label])} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--modes", default=",".join(MODES), help="Comma-separated subset of extractive,generative,auto")
    parser.add_argument("--limit-llm", type=int, default=50, help="Questions per class for the LLM modes (default 50)")
    parser.add_argument("--seed", type=int, default=0, help="Sample and bootstrap seed (the gate's split is always seed 0)")
    parser.add_argument("--concurrency", type=int, default=2, help="LLM-mode generations / refinements in flight (2 slots)")
    parser.add_argument("--mtrag", action=argparse.BooleanOptionalAction, default=True, help="MTRAG-UN gate accuracy (needs the LLM)")
    parser.add_argument("--index-cache", type=Path, default=RESULTS_DIR / ".index")
    parser.add_argument("--out", type=Path, default=result_path("answer_modes"))
    args = parser.parse_args()
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(args.modes) - set(MODES)
    if unknown or not args.modes:
        parser.error(f"--modes: unknown {sorted(unknown)}; choose from {MODES}")
    if args.limit_llm < 1:
        parser.error("--limit-llm must be at least 1")
    started = time.perf_counter()
    try:
        result = asyncio.run(run(args))
    except DatasetNotFound as exc:
        print(f"skipped: {exc}")
        return
    result["args"] = {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()}
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    result["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print("\n" + tables(result) + "\n")
    print(f"wall time {result['total_seconds']} s (clapnq {result['clapnq']['seconds']} s"
          + (f", mtrag-un {result['mtrag']['seconds']} s" if "mtrag" in result else "") + ")")
    write_result(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
