"""Search latency of the embedded backend (tantivy + hnswlib) at 10k and 100k chunks.

For each size: builds a fresh index from a synthetic corpus (unit vectors with topic structure,
dim 384, and pseudo-word text so BM25 has work to do; see ``rag_eval.synthetic``) by calling the
backend's ``upsert`` in batches; then times ``--queries`` searches (after a warm-up) per mode:

- ``dense``, ``bm25``, ``hybrid`` (min_max) and ``hybrid_rrf`` on the backend itself, k = 10;
- the same through ``SearchService`` (the request path of ``POST /v1/search`` minus HTTP), with
  an embedder stub returning the query's precomputed vector, so query embedding is excluded.

Backend and search services are the retriever's runtime (``rag_retriever.runtime.open_runtime``,
embedded backend in a fresh folder, the stub as its embedder; ``search_with`` for the second fusion).

Query vectors are data vectors plus noise (``--query-noise``); query texts are four topical words of
the same document. ANN recall@10 compares ``search_dense`` with an exact numpy scan over the same
vectors. RSS (psutil) is read before and after each build; the real MiniLM query-embedding time is
measured last, on its own. Then the closed index is reopened as a restarted retriever opens it:
seconds until it serves, until the background re-link sweep ends, dense latency during and after
the sweep, and the open forced through the full per-chunk repair. Nothing here asserts: it prints
numbers and writes JSON.

    .venv/bin/python bench/retrieval_latency.py [--sizes 10000,100000] [--queries 300]
        [--batch 5000] [--out bench-results/retrieval_latency.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psutil

from rag_common.schemas import SearchRequest
from rag_eval.datasets import DatasetNotFound, load_dataset
from rag_eval.harness import EVAL_ACCESS, embedded_settings
from rag_eval.synthetic import SyntheticCorpus
from rag_retriever.backends.base import FusionSettings, HnswParams, SearchBackend
from rag_retriever.backends.embedded import META_FILE, EmbeddedIndex
from rag_retriever.records import ChunkRecord
from rag_retriever.runtime import open_runtime
from rag_retriever.settings import RetrieverSettings
from harness import latency_ms, result_path, write_result

K = 10
WARMUP = 20
GOALS_MS = {"dense": 10.0, "hybrid": 25.0}  # p50 at 100k chunks, index search only


def mib(value: int) -> float:
    return round(value / 2**20, 1)


def rss() -> int:
    return psutil.Process().memory_info().rss


def dir_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class VectorLookupEmbedder:
    """Embedder stub for the service path: returns the precomputed vector of a known query text."""

    model_id = "synthetic"
    max_seq_length = 256

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.vectors: dict[str, np.ndarray] = {}

    def warm_up(self) -> None:
        pass

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[text] for text in texts])

    encode_documents = encode_queries

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def chunk(corpus: SyntheticCorpus, index: int) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=f"s{index}:0",
        doc_id=f"s{index}",
        text=corpus.text(index),
        chunk_index=0,
        source="synthetic",
        metadata={"content_type": "text/plain"},
    )


def row_of(chunk_id: str) -> int:
    return int(chunk_id[1:].split(":", 1)[0])


async def build(backend: SearchBackend, corpus: SyntheticCorpus, vectors: np.ndarray, batch: int) -> dict[str, Any]:
    started = time.perf_counter()
    batch_seconds = []
    for start in range(0, corpus.size, batch):
        stop = min(start + batch, corpus.size)
        t0 = time.perf_counter()
        await backend.upsert([chunk(corpus, i) for i in range(start, stop)], vectors[start:stop])
        batch_seconds.append(time.perf_counter() - t0)
        print(f"    upserted {stop:>7,} / {corpus.size:,}  (batch {batch_seconds[-1]:.1f} s)", flush=True)
    seconds = time.perf_counter() - started
    return {
        "seconds": round(seconds, 1),
        "chunks_per_s": round(corpus.size / seconds, 1),
        "batch_size": batch,
        "first_batch_s": round(batch_seconds[0], 2),
        "last_batch_s": round(batch_seconds[-1], 2),
    }


async def time_calls(calls: list[Any]) -> list[float]:
    """Each element is a zero-argument coroutine function; returns ms per call."""
    for call in calls[:WARMUP]:
        await call()
    samples = []
    for call in calls:
        t0 = time.perf_counter()
        await call()
        samples.append((time.perf_counter() - t0) * 1000.0)
    return samples


async def measure_size(size: int, args: argparse.Namespace, settings: RetrieverSettings, workdir: Path) -> dict[str, Any]:
    print(f"\n== {size:,} chunks", flush=True)
    corpus = SyntheticCorpus(size, dim=args.dim, seed=args.seed)
    vectors = corpus.vectors()
    rng = np.random.default_rng(args.seed + size)
    targets = rng.choice(size, size=args.queries, replace=False)
    query_vectors = np.stack([corpus.query_vector(int(i), noise=args.query_noise) for i in targets])
    query_texts = [corpus.query_text(int(i)) for i in targets]
    rss_before = rss()

    index_dir = workdir / f"index-{size}"
    stub = VectorLookupEmbedder(args.dim)
    async with open_runtime(embedded_settings(index_dir, settings), embedder=stub) as runtime:
        backend = runtime.backend
        build_stats = await build(backend, corpus, vectors, args.batch)
        rss_after = rss()
        count = await backend.count()

        fusions = {
            fusion: FusionSettings(method=fusion, dense_weight=settings.hybrid_dense_weight)
            for fusion in ("min_max", "rrf")
        }
        modes: dict[str, Any] = {
            "dense": [lambda v=v: backend.search_dense(v, K) for v in query_vectors],
            "bm25": [lambda t=t: backend.search_bm25(t, K) for t in query_texts],
            "hybrid": [
                lambda t=t, v=v: backend.search_hybrid(t, v, K, None, fusions["min_max"])
                for t, v in zip(query_texts, query_vectors, strict=True)
            ],
            "hybrid_rrf": [
                lambda t=t, v=v: backend.search_hybrid(t, v, K, None, fusions["rrf"])
                for t, v in zip(query_texts, query_vectors, strict=True)
            ],
        }
        backend_ms = {mode: latency_ms(await time_calls(calls)) for mode, calls in modes.items()}

        stub.vectors = dict(zip(query_texts, query_vectors, strict=True))
        services = {fusion: runtime.search_with(config) for fusion, config in fusions.items()}
        service_modes = {
            "dense": ("dense", "min_max"), "bm25": ("bm25", "min_max"),
            "hybrid": ("hybrid", "min_max"), "hybrid_rrf": ("hybrid", "rrf"),
        }
        service_ms = {}
        for name, (mode, fusion) in service_modes.items():
            calls = [
                lambda t=t, m=mode, f=fusion: services[f].search(SearchRequest(query=t, top_k=K, mode=m), EVAL_ACCESS)
                for t in query_texts
            ]
            service_ms[name] = latency_ms(await time_calls(calls))

        # ANN recall@10: the backend's dense hits against an exact scan of the same vectors.
        recalls = []
        empty_bm25 = 0
        for vector, text in zip(query_vectors, query_texts, strict=True):
            exact = set(np.argpartition(-(vectors @ vector), K)[:K].tolist())
            found = {row_of(hit.chunk.chunk_id) for hit in await backend.search_dense(vector, K)}
            recalls.append(len(found & exact) / K)
            empty_bm25 += not await backend.search_bm25(text, K)
        disk = dir_size(index_dir)
    reopen = measure_reopen(index_dir, args.dim, settings, query_vectors)
    shutil.rmtree(index_dir, ignore_errors=True)

    result = {
        "chunks": count,
        "build": build_stats,
        "rss_before_build_mib": mib(rss_before),
        "rss_after_build_mib": mib(rss_after),
        "rss_index_delta_mib": mib(rss_after - rss_before),
        "bench_vectors_copy_mib": mib(vectors.nbytes),
        "index_on_disk_mib": mib(disk),
        "search_ms": backend_ms,
        "service_ms": service_ms,
        "ann_recall_at_10": round(statistics.fmean(recalls), 4),
        "ann_recall_at_10_min": round(min(recalls), 2),
        "bm25_queries_without_hits": empty_bm25,
        "reopen": reopen,
    }
    print(
        f"  built in {build_stats['seconds']} s ({build_stats['chunks_per_s']} chunks/s); RSS {result['rss_after_build_mib']} MiB "
        f"(+{result['rss_index_delta_mib']} MiB for the index); ANN recall@10 {result['ann_recall_at_10']}",
        flush=True,
    )
    return result


def measure_reopen(index_dir: Path, dim: int, settings: RetrieverSettings, query_vectors: np.ndarray) -> dict[str, Any]:
    """Reopen the closed index as a restarted retriever does: seconds until it serves (``ready_s``),
    until the background re-link sweep ends (``sweep_s``), dense search ms while the sweep runs and
    after; then the same open forced through the full per-chunk repair (``full_repair_s``: a crash,
    or an index saved before the graph state was recorded)."""
    def open_index() -> EmbeddedIndex:
        return EmbeddedIndex(index_dir, dim, HnswParams.of(settings))

    started = time.perf_counter()
    index = open_index()
    ready = time.perf_counter() - started
    during: list[float] = []
    try:
        while not index.wait_for_graph_sweep(timeout=0):
            vector = query_vectors[len(during) % len(query_vectors)]
            t0 = time.perf_counter()
            index.search_dense(vector, K)
            during.append((time.perf_counter() - t0) * 1000.0)
        swept = time.perf_counter() - started
        after = []
        for vector in query_vectors:
            t0 = time.perf_counter()
            index.search_dense(vector, K)
            after.append((time.perf_counter() - t0) * 1000.0)
    finally:
        index.close()
    meta_path = index_dir / META_FILE
    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    meta.pop("graph_state", None)
    meta_path.write_text(json.dumps(meta), encoding="utf-8")
    started = time.perf_counter()
    open_index().close()
    full = time.perf_counter() - started
    result = {
        "ready_s": round(ready, 2),
        "sweep_s": round(swept, 2),
        "dense_ms_during_sweep": latency_ms(during) if during else None,
        "dense_ms_after_sweep": latency_ms(after),
        "full_repair_s": round(full, 2),
    }
    print(f"  reopened: serving after {result['ready_s']} s, sweep done after {result['sweep_s']} s; "
          f"full repair {result['full_repair_s']} s", flush=True)
    return result


def embedding_queries(n: int, seed: int) -> tuple[list[str], str]:
    """Natural-language questions (HotpotQA, Vaswani) when the datasets are there, else synthetic."""
    texts: list[str] = []
    source = []
    for name in ("hotpotqa", "vaswani"):
        try:
            texts += [query.text for query in load_dataset(name).queries]
            source.append(name)
        except DatasetNotFound:
            continue
    if not texts:
        corpus = SyntheticCorpus(1000, seed=seed)
        texts = [corpus.query_text(i) for i in range(n)]
        source = ["synthetic"]
    while len(texts) < n:
        texts += texts
    return texts[:n], "+".join(source)


def time_query_embedding(embedder: Any, texts: list[str]) -> list[float]:
    """ms per call, one query per call in a worker thread as SearchService does it, after a warm-up."""

    async def timed() -> list[float]:
        for text in texts[:WARMUP]:
            await asyncio.to_thread(embedder.encode_queries, [text])
        samples = []
        for text in texts:
            t0 = time.perf_counter()
            await asyncio.to_thread(embedder.encode_queries, [text])
            samples.append((time.perf_counter() - t0) * 1000.0)
        return samples

    return asyncio.run(timed())


def measure_query_embedding(n: int, seed: int) -> dict[str, Any]:
    from rag_common.embedders.factory import build_embedder

    rss_before = rss()
    embedder = build_embedder("all-MiniLM-L6-v2", device="cpu")  # EMBEDDER_BACKEND, as the retriever
    print(f"\n== query embedding (all-MiniLM-L6-v2 on {embedder.backend}, one query per call)", flush=True)
    embedder.warm_up()
    texts, source = embedding_queries(n, seed)
    samples = time_query_embedding(embedder, texts)
    tokens = [embedder.count_tokens(text) for text in texts]
    return {
        "model": embedder.model_id,
        "backend": embedder.backend,
        "queries": source,
        "mean_tokens": round(statistics.fmean(tokens), 1),
        "ms": latency_ms(samples),
        "rss_model_delta_mib": mib(rss() - rss_before),
    }


def print_report(result: dict[str, Any]) -> None:
    print("\n### Search latency, ms (k = 10; index search only, query embedding excluded)\n")
    print("| chunks | path | dense p50 / p95 | bm25 p50 / p95 | hybrid min_max p50 / p95 | hybrid rrf p50 / p95 |")
    print("|---:|---|---:|---:|---:|---:|")
    for size, data in result["sizes"].items():
        for path in ("search_ms", "service_ms"):
            cells = [f"{data[path][m]['p50']:.2f} / {data[path][m]['p95']:.2f}" for m in ("dense", "bm25", "hybrid", "hybrid_rrf")]
            label = "backend" if path == "search_ms" else "SearchService"
            print(f"| {int(size):,} | {label} | " + " | ".join(cells) + " |")
    print("\n| chunks | build s | chunks/s | RSS after build MiB | index RSS delta MiB | on disk MiB | ANN recall@10 |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for size, data in result["sizes"].items():
        print(
            f"| {int(size):,} | {data['build']['seconds']} | {data['build']['chunks_per_s']} | {data['rss_after_build_mib']} "
            f"| {data['rss_index_delta_mib']} | {data['index_on_disk_mib']} | {data['ann_recall_at_10']} |"
        )
    print("\n| chunks | reopen: serving after s | re-link sweep done s | dense p50 / p95 ms during sweep | after | full repair s |")
    print("|---:|---:|---:|---:|---:|---:|")
    for size, data in result["sizes"].items():
        reopen = data["reopen"]
        during = reopen["dense_ms_during_sweep"]
        during_cell = f"{during['p50']:.2f} / {during['p95']:.2f}" if during else "(no sweep)"
        after = reopen["dense_ms_after_sweep"]
        print(f"| {int(size):,} | {reopen['ready_s']} | {reopen['sweep_s']} | {during_cell} "
              f"| {after['p50']:.2f} / {after['p95']:.2f} | {reopen['full_repair_s']} |")
    embedding = result.get("query_embedding")
    if embedding:
        print(
            f"\nQuery embedding ({embedding['model']} on {embedding.get('backend', 'torch')}, {embedding['queries']} questions, {embedding['mean_tokens']} tokens "
            f"on average): p50 {embedding['ms']['p50']:.2f} ms, p95 {embedding['ms']['p95']:.2f} ms"
        )
    for line in result.get("goals", []):
        print(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated chunk counts")
    parser.add_argument("--queries", type=int, default=300, help="timed queries per mode (>= 200 recommended)")
    parser.add_argument("--batch", type=int, default=5000, help="chunks per upsert call while building")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--query-noise", type=float, default=0.3, help="norm of the noise added to a data vector")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-embedding", action="store_true", help="skip the MiniLM query-embedding timing")
    parser.add_argument("--workdir", type=Path, default=None, help="where to build the indexes (default: a temp dir)")
    parser.add_argument("--out", type=Path, default=result_path("retrieval_latency"))
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]

    # The stub embedder only looks query vectors up; chunks are upserted directly, never ingested.
    settings = RetrieverSettings(sentence_vectors="off")
    result: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "settings": {
            "k": K,
            "hnsw_m": settings.hnsw_m,
            "hnsw_ef_construction": settings.hnsw_ef_construction,
            "hnsw_ef_search": settings.hnsw_ef_search,
            "hybrid_dense_weight": settings.hybrid_dense_weight,
            "queries": args.queries,
            "warmup": WARMUP,
            "query_noise": args.query_noise,
            "dim": args.dim,
        },
        "sizes": {},
    }
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        for size in sizes:
            result["sizes"][str(size)] = asyncio.run(measure_size(size, args, settings, Path(tmp)))
    if not args.no_embedding:
        result["query_embedding"] = measure_query_embedding(max(args.queries, 200), args.seed)

    goals = []
    largest = str(max(sizes))
    for mode, goal in GOALS_MS.items():
        p50 = result["sizes"][largest]["search_ms"][mode]["p50"]
        verdict = "meets" if p50 <= goal else "MISSES"
        goals.append(f"goal: {mode} p50 <= {goal:g} ms at {int(largest):,} chunks: {p50:.2f} ms ({verdict})")
    recall = result["sizes"][largest]["ann_recall_at_10"]
    goals.append(f"goal: ANN recall@10 >= 0.98 at {int(largest):,} chunks: {recall} ({'meets' if recall >= 0.98 else 'MISSES'})")
    result["goals"] = goals
    result["machine"]["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    result["total_seconds"] = round(time.perf_counter() - started, 1)

    print_report(result)
    write_result(args.out, result)
    print(f"\nwrote {args.out} ({result['total_seconds']} s in all)")


if __name__ == "__main__":
    main()
