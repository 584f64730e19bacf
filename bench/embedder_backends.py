"""The embedder per backend (EMBEDDER_BACKEND=torch|onnx): query latency, batch throughput, hybrid
search with the embedding, vector agreement and — given two eval report folders — retrieval quality.

- ``query``: one query per call in a worker thread, as SearchService embeds (HotpotQA and Vaswani
  questions, after a warm-up); p50/p95 ms. Both backends get ``--threads`` intra-op threads. Backends
  alternate query by query (``query_interleaved``) and also run one after the other (``query``).
- ``batch``: Vaswani abstracts, length-sorted, ``encode_documents`` in batches of 64 (the ingestor's
  size); docs/s.
- ``vectors``: cosine between the two backends' vectors of the same texts (queries and abstracts).
- ``search``: hybrid (min_max) search at ``--chunks`` synthetic chunks (``rag_eval.synthetic``, as
  bench/retrieval_latency.py builds them) through SearchService with the real embedder, so the query
  is embedded from its text inside the timed call; p50/p95 ms per backend.
- ``quality`` (only with ``--torch-reports`` and ``--onnx-reports``): per dataset, the per-query
  nDCG@10 of the same run (``--run``, default dense) evaluated under each backend
  (``EMBEDDER_BACKEND=... ragctl eval -d X --run dense --reports DIR``): max |difference|, queries that
  differ at all, and both means.

The machine's load average is recorded at the start and end of each part: timings on a shared
machine are only comparable between backends measured back to back.

    .venv/bin/python bench/embedder_backends.py [--threads 2] [--queries 300] [--docs 640]
        [--chunks 100000] [--torch-reports DIR --onnx-reports DIR] [--out bench-results/embedder_backends.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.embedders import Embedder
from rag_common.embedders.factory import build_embedder
from rag_common.schemas import SearchRequest
from rag_common.settings import EmbedderSettings
from rag_eval.datasets import load_dataset
from rag_eval.harness import EVAL_ACCESS, embedded_settings
from rag_eval.synthetic import SyntheticCorpus
from rag_retriever.backends.base import FusionSettings
from rag_retriever.runtime import open_runtime
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
# The same synthetic chunks and query timing as the latency bench.
from retrieval_latency import WARMUP, chunk, time_query_embedding  # noqa: E402
from harness import latency_ms, result_path, write_result

BACKENDS = ("torch", "onnx")
BATCH = 64
QUALITY_DATASETS = ("hotpotqa", "clapnq", "mtrag-un", "vaswani")
GOALS_MS = {"query_p50_onnx": 5.0, "hybrid_with_embedding_p50": 8.0}


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def embedder(backend: str, threads: int) -> Embedder:
    if backend == "torch":
        import torch

        torch.set_num_threads(threads)
    model = build_embedder("all-MiniLM-L6-v2", device="cpu", settings=EmbedderSettings(backend=backend, onnx_threads=threads))
    model.warm_up()
    return model


def questions(n: int) -> list[str]:
    texts = [q.text for name in ("hotpotqa", "vaswani") for q in load_dataset(name).queries]
    while len(texts) < n:
        texts += texts
    return texts[:n]


def abstracts(n: int) -> list[str]:
    corpus = list(load_dataset("vaswani").corpus.values())[:n]
    return sorted((d.text for d in corpus), key=len, reverse=True)


def time_queries(model: Embedder, texts: list[str]) -> dict[str, Any]:
    before = load()
    return {"ms": latency_ms(time_query_embedding(model, texts)), "load_before": before, "load_after": load()}


def time_queries_interleaved(models: dict[str, Embedder], texts: list[str]) -> dict[str, Any]:
    """Each query embedded by every backend in turn, so a load swing on a shared machine hits all alike."""

    async def run() -> dict[str, list[float]]:
        samples: dict[str, list[float]] = {backend: [] for backend in models}
        for i, text in enumerate(texts[:WARMUP] + texts):
            for backend, model in models.items():
                t0 = time.perf_counter()
                await asyncio.to_thread(model.encode_queries, [text])
                if i >= WARMUP:
                    samples[backend].append((time.perf_counter() - t0) * 1000.0)
        return samples

    before = load()
    samples = asyncio.run(run())
    return {backend: {"ms": latency_ms(ms), "load_before": before, "load_after": load()} for backend, ms in samples.items()}


def time_batches(model: Embedder, texts: list[str]) -> dict[str, Any]:
    model.encode_documents(texts[:BATCH])  # warm-up at full batch size
    before = load()
    t0 = time.perf_counter()
    for start in range(0, len(texts), BATCH):
        model.encode_documents(texts[start : start + BATCH])
    seconds = time.perf_counter() - t0
    return {"docs": len(texts), "seconds": round(seconds, 2), "docs_per_s": round(len(texts) / seconds, 1),
            "load_before": before, "load_after": load()}


async def time_search(models: dict[str, Embedder], chunks: int, queries: int, seed: int) -> dict[str, Any]:
    settings = RetrieverSettings()
    corpus = SyntheticCorpus(chunks, dim=384, seed=seed)
    vectors = corpus.vectors()
    rng = np.random.default_rng(seed + chunks)
    texts = [corpus.query_text(int(i)) for i in rng.choice(chunks, size=queries, replace=False)]
    fusion = FusionSettings(method="min_max", dense_weight=settings.hybrid_dense_weight)
    out: dict[str, Any] = {"chunks": chunks, "queries": queries}
    with tempfile.TemporaryDirectory() as tmp:
        first = next(iter(models.values()))
        async with open_runtime(embedded_settings(Path(tmp) / "index", settings), embedder=first) as runtime:
            t0 = time.perf_counter()
            for start in range(0, chunks, 5000):
                stop = min(start + 5000, chunks)
                await runtime.backend.upsert([chunk(corpus, i) for i in range(start, stop)], vectors[start:stop])
            out["build_seconds"] = round(time.perf_counter() - t0, 1)
            print(f"  built {chunks:,} chunks in {out['build_seconds']} s", flush=True)
            for backend, model in models.items():
                service = SearchService(
                    runtime.backend, model, runtime.lock, fusion=fusion, default_top_k=10, graph=GraphDefaults.of(settings),
                    graph_searcher=runtime.abilities.graph,
                )

                async def call(text: str, service: SearchService = service) -> None:
                    await service.search(SearchRequest(query=text, top_k=10, mode="hybrid"), EVAL_ACCESS)

                for text in texts[:WARMUP]:
                    await call(text)
                before = load()
                samples = []
                for text in texts:
                    t = time.perf_counter()
                    await call(text)
                    samples.append((time.perf_counter() - t) * 1000.0)
                out[backend] = {"ms": latency_ms(samples), "load_before": before, "load_after": load()}
                print(f"  {backend}: hybrid with embedding p50 {out[backend]['ms']['p50']:.2f} ms", flush=True)
    return out


def cosines(models: dict[str, Embedder], texts: list[str]) -> dict[str, float]:
    a = models["torch"].encode_documents(texts)
    b = models["onnx"].encode_documents(texts)
    cos = (a * b).sum(axis=1)
    return {"texts": len(texts), "min": float(cos.min()), "mean": float(cos.mean())}


def quality(torch_dir: Path, onnx_dir: Path, run: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in QUALITY_DATASETS:
        paths = [torch_dir / name / f"{run}.json", onnx_dir / name / f"{run}.json"]
        if not all(p.is_file() for p in paths):
            out[name] = {"missing": [str(p) for p in paths if not p.is_file()]}
            continue
        torch_q, onnx_q = (json.loads(p.read_text())["per_query"] for p in paths)
        shared = sorted(set(torch_q) & set(onnx_q))
        diffs = np.array([abs(torch_q[q]["ndcg@10"] - onnx_q[q]["ndcg@10"]) for q in shared])
        out[name] = {
            "queries": len(shared),
            "max_abs_ndcg10_diff": round(float(diffs.max()), 6) if len(diffs) else None,
            "queries_differing": int((diffs > 1e-6).sum()),
            "ndcg10_torch": round(float(np.mean([torch_q[q]["ndcg@10"] for q in shared])), 4),
            "ndcg10_onnx": round(float(np.mean([onnx_q[q]["ndcg@10"] for q in shared])), 4),
        }
    return out


def print_report(result: dict[str, Any]) -> None:
    print(f"\n### Embedder backends (all-MiniLM-L6-v2, {result['settings']['threads']} threads; load {result['machine']['load_avg_at_start']} -> {result['machine']['load_avg_at_end']})\n")
    print("| backend | query p50 / p95 ms (interleaved) | batch of 64 docs/s | hybrid search at "
          f"{result.get('search', {}).get('chunks', 0):,} chunks incl. embedding p50 / p95 ms |")
    print("|---|---:|---:|---:|")
    for backend in BACKENDS:
        q = result["query_interleaved"][backend]["ms"]
        b = result["batch"][backend]["docs_per_s"]
        s = result.get("search", {}).get(backend, {}).get("ms")
        cell = f"{s['p50']:.2f} / {s['p95']:.2f}" if s else "—"
        print(f"| {backend} | {q['p50']:.2f} / {q['p95']:.2f} | {b} | {cell} |")
    v = result["vectors"]
    print(f"\nVectors, onnx vs torch, {v['texts']} texts: cosine min {v['min']:.7f}, mean {v['mean']:.7f}")
    if result.get("quality"):
        print("\n| dataset | queries | max per-query |ΔnDCG@10| | queries differing | nDCG@10 torch | nDCG@10 onnx |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, q in result["quality"].items():
            if "missing" in q:
                print(f"| {name} | missing {q['missing']} | | | | |")
            else:
                print(f"| {name} | {q['queries']} | {q['max_abs_ndcg10_diff']} | {q['queries_differing']} "
                      f"| {q['ndcg10_torch']} | {q['ndcg10_onnx']} |")
    for line in result["goals"]:
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--docs", type=int, default=640, help="Vaswani abstracts embedded in batches of 64")
    parser.add_argument("--chunks", type=int, default=100_000, help="synthetic index size for the search part; 0 = skip")
    parser.add_argument("--search-queries", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--torch-reports", type=Path, default=None)
    parser.add_argument("--onnx-reports", type=Path, default=None)
    parser.add_argument("--run", default="dense", help="the eval run compared in the quality part")
    parser.add_argument("--out", type=Path, default=result_path("embedder_backends"))
    args = parser.parse_args()

    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "load_avg_at_start": load()},
        "settings": {"threads": args.threads, "queries": args.queries, "docs": args.docs, "batch": BATCH, "warmup": WARMUP},
        "query": {}, "batch": {},
    }
    models = {backend: embedder(backend, args.threads) for backend in BACKENDS}
    texts = questions(args.queries)
    docs = abstracts(args.docs)
    print(f"== {args.queries} queries one at a time, backends alternating", flush=True)
    result["query_interleaved"] = time_queries_interleaved(models, texts)
    print("  " + ", ".join(f"{b} p50 {r['ms']['p50']:.2f} ms" for b, r in result["query_interleaved"].items()), flush=True)
    for backend, model in models.items():
        print(f"== {backend}: {args.queries} queries one at a time", flush=True)
        result["query"][backend] = time_queries(model, texts)
        print(f"  p50 {result['query'][backend]['ms']['p50']:.2f} ms", flush=True)
    for backend, model in models.items():
        print(f"== {backend}: {len(docs)} abstracts in batches of {BATCH}", flush=True)
        result["batch"][backend] = time_batches(model, docs)
        print(f"  {result['batch'][backend]['docs_per_s']} docs/s", flush=True)
    result["vectors"] = cosines(models, texts[:200] + docs[:200])
    if args.chunks:
        print(f"== hybrid search at {args.chunks:,} chunks, query embedded in the call", flush=True)
        result["search"] = asyncio.run(time_search(models, args.chunks, args.search_queries, args.seed))
    if args.torch_reports and args.onnx_reports:
        result["quality"] = quality(args.torch_reports, args.onnx_reports, args.run)

    goals = []
    p50 = result["query_interleaved"]["onnx"]["ms"]["p50"]
    goals.append(f"goal: onnx query embedding p50 <= 5 ms: {p50:.2f} ms ({'meets' if p50 <= 5 else 'MISSES'})")
    if "search" in result:
        p50 = result["search"]["onnx"]["ms"]["p50"]
        goals.append(f"goal: hybrid search incl. embedding p50 <= 8 ms (onnx): {p50:.2f} ms ({'meets' if p50 <= 8 else 'MISSES'})")
    result["goals"] = goals
    result["machine"]["load_avg_at_end"] = load()
    print_report(result)
    write_result(args.out, result)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
