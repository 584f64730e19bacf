"""Query refinement on MTRAG-UN: retrieval with the raw last user turn vs with the refined query.

The MTRAG-UN corpus (1,152 passages) is ingested into an embedded index through the retriever's own
``Ingestor`` (real chunker, real all-MiniLM-L6-v2; ``rag_eval.pipeline.open_retriever``, which caches
the index under ``--index-cache`` and reuses it while corpus, embedder and chunking are unchanged).
For every task with qrels (answerable and partial, 332; ``--limit N``: a seeded sample of N of them,
``rag_eval.runner.select_queries``):

1. raw:     hybrid search (min_max fusion, the default) with the last user turn alone;
2. refined: the refiner's runtime (``rag_refiner.runtime.open_runtime``: the service's own
   construction and defaults, ``REFINER_*`` env vars apply) with the conversation before that turn
   as history, cut as the gateway cuts it (``rag_common.history.cut_history`` with
   ``GatewaySettings().history_window()``, ``GATEWAY_HISTORY_*`` env vars apply), on the real
   SmolLM2-135M served by llama.cpp (``ragctl.stack.start_llm_server``); then the same search with
   the refined query (no second search when the query came back unchanged).

A control without the LLM is searched too: the refiner's own deterministic ``context_append``
rewrite (message + the last question of that cut history) for every follow-up.

Reports Recall@5 and nDCG@10 (``rag_eval.metrics``) of all three, the paired bootstrap 95 % CI of the
difference (``rag_eval.stats.paired_bootstrap``), the refiner's latency (one request at a time,
p50 / p95) and how it refined (method: passthrough / llm / context_append / fallback; intent).
Prints Markdown tables and writes JSON.

    .venv/bin/python bench/refiner_quality.py [--limit N] [--seed 0] [--out bench-results/refiner_quality.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from contextlib import AsyncExitStack
from dataclasses import asdict
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder  # noqa: E402
from rag_common.history import cut_history  # noqa: E402
from rag_common.schemas import HistoryTurn, RefineRequest  # noqa: E402
from rag_common.settings import LLMSettings  # noqa: E402
from rag_eval.datasets import DatasetNotFound, load_dataset  # noqa: E402
from rag_eval.metrics import evaluate  # noqa: E402
from rag_eval.pipeline import history_pairs, open_retriever  # noqa: E402
from rag_eval.runner import select_queries  # noqa: E402
from rag_eval.stats import paired_bootstrap  # noqa: E402
from rag_gateway.settings import GatewaySettings  # noqa: E402
from rag_refiner.query_refiner import QueryRefiner  # noqa: E402
from rag_refiner.runtime import open_runtime as open_refiner  # noqa: E402
from rag_refiner.settings import RefinerSettings  # noqa: E402
from rag_retriever.settings import RetrieverSettings  # noqa: E402
from ragctl.stack import free_port, start_llm_server  # noqa: E402
from harness import RESULTS_DIR, describe, result_path, write_result  # noqa: E402

METRICS = ["recall@5", "ndcg@10"]
TOP_K = 10
MODE, FUSION = "hybrid", "min_max"
#: Default: all 332 tasks with qrels. Measured: 1.7 s (p50) per refinement at load ≈ 2, 3.5 s at
#: load ≈ 5 on the 2-core machine, i.e. 10-20 min, plus ≈ 5.5 min to ingest the corpus the first
#: time (the index is then cached). ``--limit N`` takes a seeded sample of N tasks.
DEFAULT_LIMIT = 0
METHODS = ("passthrough", "llm", "context_append", "fallback")


def compare(raw: dict[str, list[str]], refined: dict[str, list[str]], qrels: dict[str, dict[str, int]],
            ids: list[str]) -> dict[str, Any]:
    """Means of both runs over ``ids`` and the paired bootstrap CI of refined − raw, per metric."""
    sub = {qid: qrels[qid] for qid in ids}
    a = evaluate({qid: raw[qid] for qid in ids}, sub, METRICS)
    b = evaluate({qid: refined[qid] for qid in ids}, sub, METRICS)
    out: dict[str, Any] = {"n": a.evaluated}
    for spec in METRICS:
        ci = paired_bootstrap([b.per_query[q][spec] for q in ids], [a.per_query[q][spec] for q in ids])
        out[spec] = {"raw": round(a.means[spec], 4), "refined": round(b.means[spec], 4), "delta": ci.to_dict()}
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    dataset = load_dataset("mtrag-un")
    dataset.check()
    queries = select_queries(dataset, args.limit, seed=args.seed, require_gold=True)
    settings = RetrieverSettings()
    embedder = SentenceTransformerEmbedder(settings.embedding_model, device="cpu")
    embedder.warm_up()
    refiner_settings = RefinerSettings()
    window = GatewaySettings().history_window()
    records: list[dict[str, Any]] = []
    async with AsyncExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(dir=args.workdir))
        print(f"starting the LLM server; index of {len(dataset.corpus)} passages (cache {args.index_cache}) ...", flush=True)
        llm = start_llm_server(free_port(), Path(tmp) / "logs")
        stack.callback(llm.stop)
        retriever, index = await stack.enter_async_context(
            open_retriever(dataset, args.index_cache, embedder, settings=settings, progress=False)
        )
        print(f"   {index['documents']} documents → {index['chunks']} chunks "
              f"({'reused' if index['reused'] else 'ingested'}, ingest took {index['ingest_seconds']} s)", flush=True)
        runtime = await stack.enter_async_context(open_refiner(refiner_settings, LLMSettings(base_url=llm.url)))
        refiner = runtime.refiner
        # One warm-up request (llama.cpp's first call loads its caches), not measured.
        await refiner.refine(RefineRequest(
            message="and how much does it cost?",
            history=[HistoryTurn(question="What is a Roth IRA?", answer="A retirement account funded after tax.")],
        ))
        started = time.perf_counter()
        for number, query in enumerate(queries, start=1):
            raw = await retriever.search(query.text, MODE, TOP_K, FUSION)
            # The conversation as the gateway would send it.
            pairs = cut_history(history_pairs(query.history), window)
            t0 = time.perf_counter()
            response = await refiner.refine(RefineRequest(message=query.text, history=pairs))
            refine_ms = (time.perf_counter() - t0) * 1000.0
            changed = response.query.strip() != query.text.strip()
            refined = await retriever.search(response.query, MODE, TOP_K, FUSION) if changed else raw
            # Control without the LLM: the refiner's own deterministic rewrite (message + the last
            # question of the history it was given) for every follow-up.
            appended = QueryRefiner._append_context(query.text, pairs, "").query if pairs else query.text
            if appended == response.query:
                append_ranking = refined
            elif appended == query.text:
                append_ranking = raw
            else:
                append_ranking = await retriever.search(appended, MODE, TOP_K, FUSION)
            records.append({
                "query_id": query.id,
                "follow_up": bool(query.history),
                "collection": query.metadata.get("collection"),
                "multi_turn": query.metadata.get("multi_turn"),
                "raw_query": query.text,
                "refined_query": response.query,
                "changed": changed,
                "rewritten": response.rewritten,
                "method": response.method,
                "intent": response.intent,
                "intent_method": response.intent_method,
                "detail": response.detail[:300],
                "refine_ms": round(refine_ms, 1),
                "raw_ranking": raw,
                "refined_ranking": refined,
                "append_query": appended,
                "append_ranking": append_ranking,
            })
            if number % 25 == 0 or number == len(queries):
                elapsed = time.perf_counter() - started
                print(f"   {number}/{len(queries)} tasks, {elapsed:.0f} s", flush=True)
        loop_seconds = time.perf_counter() - started

    raw_run = {r["query_id"]: r["raw_ranking"] for r in records}
    refined_run = {r["query_id"]: r["refined_ranking"] for r in records}
    append_run = {r["query_id"]: r["append_ranking"] for r in records}
    ids_all = [r["query_id"] for r in records]
    groups: dict[str, list[str]] = {
        "all tasks": ids_all,
        "follow-ups (history ≠ ∅)": [r["query_id"] for r in records if r["follow_up"]],
    }
    for method in METHODS:
        ids = [r["query_id"] for r in records if r["method"] == method and r["follow_up"]]
        if ids:
            groups[f"follow-ups, method = {method}"] = ids
    latencies = [r["refine_ms"] for r in records]
    follow_latencies = [r["refine_ms"] for r in records if r["follow_up"]]
    return {
        "dataset": "mtrag-un",
        "tasks": len(records),
        "tasks_with_qrels": sum(1 for q in dataset.queries if dataset.relevant(q.id)),
        "limit": args.limit,
        "seed": args.seed,
        "retrieval": {"mode": MODE, "fusion": FUSION, "top_k": TOP_K, "embedder": embedder.model_id,
                      "index": {k: v for k, v in index.items() if k != "fingerprint"}},
        "refiner_settings": refiner_settings.model_dump(mode="json", exclude={"port", "host"}),
        "history_window": asdict(window),
        "llm": "SmolLM2-135M-Instruct Q4_1 (llama.cpp, ragctl.stack.start_llm_server)",
        "groups": {name: compare(raw_run, refined_run, dataset.qrels, ids) for name, ids in groups.items()},
        # "raw" = the deterministic append (no LLM), "refined" = the refiner: Δ = refiner − append.
        "refiner_vs_append": {name: compare(append_run, refined_run, dataset.qrels, ids)
                              for name, ids in list(groups.items())[:2]},
        "latency_ms": {
            "all": {k: v for k, v in describe(latencies, digits=1).items() if v is not None},
            "follow_ups": {k: v for k, v in describe(follow_latencies, digits=1).items() if v is not None},
            "mean_all": round(sum(latencies) / max(1, len(latencies)), 1),
        },
        "methods": dict(Counter(r["method"] for r in records)),
        "methods_follow_ups": dict(Counter(r["method"] for r in records if r["follow_up"])),
        "intents": dict(Counter(f"{r['intent']} ({r['intent_method']})" for r in records)),
        "rewritten": sum(r["rewritten"] for r in records),
        "query_changed": sum(r["changed"] for r in records),
        "loop_seconds": round(loop_seconds, 1),
        "records": records,
    }


def _paired_rows(groups: dict[str, Any]) -> list[str]:
    """One table row per group: each metric's two values and their paired Δ with its CI (* = CI excludes 0)."""
    rows = []
    for name, g in groups.items():
        cells = []
        for spec in METRICS:
            d = g[spec]["delta"]
            mark = "" if d["noise"] else " *"
            cells += [f"{g[spec]['raw']:.3f}", f"{g[spec]['refined']:.3f}",
                      f"{d['delta']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}]{mark}"]
        rows.append(f"| {name} | {g['n']} | " + " | ".join(cells) + " |")
    return rows


def tables(result: dict[str, Any]) -> str:
    n = result["tasks"]
    lines = [
        f"**Recall@5 / nDCG@10, raw last turn vs refined query** (mtrag-un, {n} of "
        f"{result['tasks_with_qrels']} tasks with qrels; hybrid min_max, top {TOP_K}; "
        "Δ = refined − raw, paired bootstrap 95 % CI, 2000 resamples)",
        "",
        "| tasks | n | R@5 raw | R@5 refined | Δ R@5 [95 % CI] | nDCG@10 raw | nDCG@10 refined | Δ nDCG@10 [95 % CI] |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    lines += _paired_rows(result["groups"])
    lines += [
        "",
        "\\* CI excludes 0.",
        "",
        "**Control without the LLM**: every follow-up searched as `message (last question of the history "
        "window)`, the refiner's own `context_append` rewrite; Δ = refiner − this control",
        "",
        "| tasks | n | R@5 append | R@5 refiner | Δ R@5 [95 % CI] | nDCG@10 append | nDCG@10 refiner | Δ nDCG@10 [95 % CI] |",
        "|---|---:|---:|---:|---|---:|---:|---|",
    ]
    lines += _paired_rows(result["refiner_vs_append"])
    lines.append("")
    lat = result["latency_ms"]
    methods = result["methods"]
    lines += [
        "**Refiner** (one request at a time, local SmolLM2-135M)",
        "",
        "| | value |",
        "|---|---:|",
        f"| latency p50 / p95, all tasks (ms) | {lat['all'].get('p50', 0):.0f} / {lat['all'].get('p95', 0):.0f} |",
        f"| latency p50 / p95, follow-ups (ms) | {lat['follow_ups'].get('p50', 0):.0f} / {lat['follow_ups'].get('p95', 0):.0f} |",
        f"| rewritten (RefineResponse.rewritten) | {result['rewritten']} / {n} ({100 * result['rewritten'] / max(1, n):.0f} %) |",
        f"| query text changed | {result['query_changed']} / {n} |",
    ]
    for method in METHODS:
        lines.append(f"| method = {method} | {methods.get(method, 0)} |")
    lines.append(f"| intents | {', '.join(f'{k}: {v}' for k, v in sorted(result['intents'].items()))} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=DEFAULT_LIMIT,
                        help="A seeded sample of this many tasks with qrels (default 0 = all 332)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None, help="Where the LLM server's log goes (a temp dir)")
    parser.add_argument("--index-cache", type=Path, default=RESULTS_DIR / ".index",
                        help="Index cache (rag_eval.pipeline.open_retriever: reused when the corpus and embedder match)")
    parser.add_argument("--out", type=Path, default=result_path("refiner_quality"))
    args = parser.parse_args()
    args.limit = args.limit or None
    started = time.perf_counter()
    try:
        result = asyncio.run(run(args))
    except DatasetNotFound as exc:
        print(f"mtrag-un: skipped, {exc}")
        return
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    result["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print("\n" + tables(result) + "\n")
    write_result(args.out, result)
    print(f"wrote {args.out} ({result['total_seconds']} s)")


if __name__ == "__main__":
    main()
