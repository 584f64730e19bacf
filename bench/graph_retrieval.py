"""What the structure-and-entity graph costs (issue 16), on the embedded backend: the search latency
the second hop and personalised PageRank add, at the demo size and at 100k chunks, and the ingestion
cost of building the graph next to the embedder's.

- **demo**: the project's ``docs/*.md`` (the demo corpus of ``bench/chat_latency.py``) ingested by the
  ``Ingestor`` (real chunker, real MiniLM embedder) into a fresh embedded index. During that ingest
  the embedder's time (``encode_documents``) and the graph's (``EmbeddedIndex._update_entity_graph``:
  entity extraction, the in-memory adjacency, the ``graph.sqlite`` transaction) are timed apart.
  Queries: ``--queries`` chunks drawn at random, each asked as its first 12 words.
- **synthetic**: ``rag_eval.synthetic`` vectors and pseudo-word text (as ``bench/retrieval_latency.py``)
  at ``--sizes`` chunks, each chunk also given a title (its own two-word capitalised name) and a
  sentence naming three other chunks' titles drawn Zipf-like (so some names are hubs, most are rare:
  the shape the hub cap and the hop see in real corpora). Upserted in batches of ``--batch``; the
  graph's time per batch is recorded (first and last) to show that a write's cost does not grow with
  the index. Queries: four topical words of a chunk plus one name it mentions.

Each query runs through ``SearchService`` (``POST /v1/search`` minus HTTP), hybrid, k = 10, with an
embedder stub returning the query's precomputed vector (query embedding is the same in every mode
and is left out), in four modes: off, ``second_hop``, ``graph`` (PageRank), both. "Added" is the
response's ``timings_ms["graph"]`` (the graph step alone), p50 / p95, and the difference of the
total's p50 against the mode without graph. Also: what one write cost with the whole-file
``graph.json`` of before (the graph serialised and written, as every write did) at each size.
Nothing is asserted: it prints numbers and writes JSON.

    .venv/bin/python bench/graph_retrieval.py [--sizes 100000] [--queries 200] [--batch 5000]
        [--out bench-results/graph_retrieval.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import DocumentIn, SearchRequest
from rag_eval.harness import EVAL_ACCESS
from rag_eval.synthetic import SyntheticCorpus, pseudo_words
from rag_retriever.backends.base import FusionSettings, GraphOptions, HnswParams
from rag_retriever.backends.embedded import EmbeddedBackend, EmbeddedIndex
from rag_retriever.chunking import Chunker
from rag_retriever.ingest_limits import IngestLimits
from rag_retriever.ingestion import Ingestor
from rag_retriever.locking import ReadWriteLock
from rag_retriever.records import ChunkRecord
from rag_retriever.runtime import embedded_abilities
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer
from harness import latency_ms, result_path, write_result

REPO_ROOT = Path(__file__).resolve().parents[1]
K = 10
WARMUP = 10
GOAL_ADDED_P50_MS = 20.0
MODES = {"off": (False, False), "hop": (False, True), "ppr": (True, False), "hop+ppr": (True, True)}


class VectorLookupEmbedder:
    """Returns the precomputed vector of a known query text (as ``bench/retrieval_latency.py``)."""

    model_id = "all-MiniLM-L6-v2"
    max_seq_length = 256

    def __init__(self, dim: int, vectors: dict[str, np.ndarray]) -> None:
        self.dim = dim
        self.vectors = vectors

    def warm_up(self) -> None:
        pass

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.vectors[text] for text in texts])

    encode_documents = encode_queries


class GraphTimer:
    """Wraps ``EmbeddedIndex._update_entity_graph`` and records each call's seconds."""

    def __init__(self) -> None:
        self.calls: list[float] = []
        self._original = EmbeddedIndex._update_entity_graph

    def __enter__(self) -> GraphTimer:
        original, calls = self._original, self.calls

        def timed(index: EmbeddedIndex, *args: Any, **kwargs: Any) -> None:
            started = time.perf_counter()
            try:
                return original(index, *args, **kwargs)
            finally:
                calls.append(time.perf_counter() - started)

        EmbeddedIndex._update_entity_graph = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: Any) -> None:
        EmbeddedIndex._update_entity_graph = self._original  # type: ignore[method-assign]


async def time_modes(backend: EmbeddedBackend, queries: list[str], vectors: np.ndarray) -> dict[str, Any]:
    stub = VectorLookupEmbedder(vectors.shape[1], dict(zip(queries, vectors, strict=True)))
    settings = RetrieverSettings()
    service = SearchService(backend, stub, ReadWriteLock(), fusion=FusionSettings.of(settings),  # type: ignore[arg-type]
                            default_top_k=settings.default_top_k, graph=GraphDefaults.of(settings),
                            graph_searcher=backend)
    out: dict[str, Any] = {}
    for mode, (ppr, hop) in MODES.items():
        totals, graph = [], []
        for index, query in enumerate(queries[:WARMUP] + queries):
            request = SearchRequest(query=query, top_k=K, mode="hybrid", graph=ppr, second_hop=hop)
            response = await service.search(request, EVAL_ACCESS)
            if index >= WARMUP:
                totals.append(response.timings_ms["total"])
                if "graph" in response.timings_ms:
                    graph.append(response.timings_ms["graph"])
        out[mode] = {"total_ms": latency_ms(totals), **({"graph_ms": latency_ms(graph)} if graph else {})}
    base = out["off"]["total_ms"]["p50"]
    for mode in ("hop", "ppr", "hop+ppr"):
        out[mode]["added_total_p50_ms"] = round(out[mode]["total_ms"]["p50"] - base, 3)
    return out


def legacy_write_ms(index: EmbeddedIndex, directory: Path) -> dict[str, float]:
    """One write's cost with the whole-file graph.json of format 1: serialise the graph, write it."""
    started = time.perf_counter()
    data = json.dumps({"format": 1, **index.graph.to_json()}, ensure_ascii=False, separators=(",", ":"))
    path = directory / "graph-legacy.json"
    path.write_text(data, encoding="utf-8")
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())
    seconds = time.perf_counter() - started
    size = path.stat().st_size
    path.unlink()
    return {"ms": round(seconds * 1000.0, 1), "mib": round(size / 2**20, 1)}


def print_modes(label: str, modes: dict[str, Any]) -> None:
    print(f"  {label}: total p50 off {modes['off']['total_ms']['p50']:.2f} ms")
    for mode in ("hop", "ppr", "hop+ppr"):
        graph = modes[mode]["graph_ms"]
        print(f"    {mode:8s} graph step p50 {graph['p50']:7.2f} ms  p95 {graph['p95']:7.2f} ms   "
              f"total p50 +{modes[mode]['added_total_p50_ms']:.2f} ms", flush=True)


async def demo(args: argparse.Namespace, embedder: SentenceTransformerEmbedder, workdir: Path) -> dict[str, Any]:
    print("== demo corpus (docs/*.md, real chunker and MiniLM)", flush=True)
    # The stub embedder only looks query vectors up; chunks are upserted directly, never ingested.
    settings = RetrieverSettings(sentence_vectors="off")
    files = sorted((REPO_ROOT / "docs").glob("*.md"))
    documents = [DocumentIn(id=f.stem, title=f.stem, source=f.name, text=f.read_text(encoding="utf-8")) for f in files]
    backend = EmbeddedBackend(workdir / "demo", embedder.dim, HnswParams.of(settings), model_id=embedder.model_id)
    embed_seconds: list[float] = []
    encode = embedder.encode_documents

    def timed_encode(texts: list[str]) -> np.ndarray:
        started = time.perf_counter()
        try:
            return encode(texts)
        finally:
            embed_seconds.append(time.perf_counter() - started)

    embedder.encode_documents = timed_encode  # type: ignore[method-assign]
    try:
        with GraphTimer() as graph_timer:
            started = time.perf_counter()
            chunker = Chunker(EmbedderTokenizer(embedder), settings.chunk_tokens, settings.chunk_overlap_tokens)
            ingestor = Ingestor(
                backend, embedder, chunker, ReadWriteLock(), sentence_vectors=settings.sentence_vectors,
                limits=IngestLimits.of(settings), staged=embedded_abilities(backend).staged,
            )
            result = await ingestor.ingest(documents)
            ingest_s = time.perf_counter() - started
    finally:
        embedder.encode_documents = encode  # type: ignore[method-assign]
    chunks = await backend.count()
    graph_s, embed_s = sum(graph_timer.calls), sum(embed_seconds)
    ingestion = {
        "documents": result.documents, "chunks": chunks, "ingest_s": round(ingest_s, 2),
        "embed_s": round(embed_s, 2), "graph_s": round(graph_s, 3),
        "graph_share_of_embed": round(graph_s / embed_s, 4) if embed_s else None,
        "graph_ms_per_chunk": round(graph_s * 1000.0 / chunks, 3),
        "embed_ms_per_chunk": round(embed_s * 1000.0 / chunks, 3),
    }
    print(f"  ingest {ingest_s:.1f} s for {chunks} chunks: embedder {embed_s:.2f} s, graph {graph_s:.3f} s "
          f"({100 * ingestion['graph_share_of_embed']:.2f} % of the embedder)", flush=True)
    texts = [hit.chunk.text for hit in await backend.search_bm25("the", 100_000)] or []
    rng = random.Random(args.seed)
    sample = rng.sample(texts, min(args.queries, len(texts)))
    queries = list(dict.fromkeys(" ".join(text.split()[:12]) for text in sample))
    vectors = embedder.encode_queries(queries)
    modes = await time_modes(backend, queries, vectors)
    print_modes(f"{chunks} chunks, {len(queries)} queries", modes)
    legacy = legacy_write_ms(backend.index, workdir)
    await backend.close()
    return {"ingestion": ingestion, "queries": len(queries), "search": modes, "legacy_graph_json_write": legacy}


def names(count: int, seed: int) -> list[str]:
    """``count`` distinct two-word capitalised names of pseudo-words."""
    words = pseudo_words(2 * count + 200, seed=seed + 1)
    rng = random.Random(seed)
    rng.shuffle(words)
    out: dict[str, None] = {}
    i = 0
    while len(out) < count:
        out[f"{words[i].capitalize()} {words[i + 1].capitalize()}"] = None
        i += 2
    return list(out)


async def synthetic(size: int, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    print(f"== {size:,} synthetic chunks", flush=True)
    corpus = SyntheticCorpus(size, dim=args.dim, seed=args.seed)
    vectors = corpus.vectors()
    titles = names(size, args.seed)
    rng = np.random.default_rng(args.seed)
    # Zipf-like mentions: name rank r drawn with weight 1 / (r + 10)
    weights = 1.0 / (np.arange(size) + 10.0)
    cdf = np.cumsum(weights) / weights.sum()
    mentions = np.minimum(np.searchsorted(cdf, rng.random((size, 3))), size - 1)

    def chunk(i: int) -> ChunkRecord:
        named = ", ".join(titles[j] for j in mentions[i])
        return ChunkRecord(
            chunk_id=f"s{i}:0", doc_id=f"s{i}", text=f"{corpus.text(i)}. It names {named}.", chunk_index=0,
            title=titles[i], source="synthetic",
        )

    backend = EmbeddedBackend(workdir / f"synthetic-{size}", args.dim, HnswParams.of(RetrieverSettings()), model_id="synthetic")
    started = time.perf_counter()
    with GraphTimer() as graph_timer:
        for start in range(0, size, args.batch):
            stop = min(start + args.batch, size)
            await backend.upsert([chunk(i) for i in range(start, stop)], vectors[start:stop])
            print(f"    upserted {stop:>7,} / {size:,}  (graph {graph_timer.calls[-1] * 1000:.0f} ms)", flush=True)
    build_s = time.perf_counter() - started
    per_batch = graph_timer.calls
    # A small write into the full index: one document replaced, what a re-ingest costs the graph.
    with GraphTimer() as small:
        for i in range(20):
            await backend.upsert([chunk(i)], vectors[i : i + 1])
    build = {
        "seconds": round(build_s, 1), "batch": args.batch,
        "graph_s": round(sum(per_batch), 2), "graph_ms_per_chunk": round(sum(per_batch) * 1000.0 / size, 3),
        "graph_first_batch_ms": round(per_batch[0] * 1000.0, 1), "graph_last_batch_ms": round(per_batch[-1] * 1000.0, 1),
        "graph_one_chunk_write_ms": latency_ms([s * 1000.0 for s in small.calls]),
    }
    print(f"  built in {build_s:.0f} s; graph {build['graph_s']} s ({build['graph_ms_per_chunk']} ms/chunk), "
          f"first batch {build['graph_first_batch_ms']} ms, last {build['graph_last_batch_ms']} ms, "
          f"one-chunk write p50 {build['graph_one_chunk_write_ms']['p50']} ms", flush=True)
    targets = np.random.default_rng(args.seed + size).choice(size, size=args.queries, replace=False)
    queries = [f"{corpus.query_text(int(i))} {titles[mentions[int(i)][0]]}" for i in targets]
    query_vectors = np.stack([corpus.query_vector(int(i), noise=args.query_noise) for i in targets])
    keep = dict(zip(queries, query_vectors, strict=True))
    queries = list(keep)
    modes = await time_modes(backend, queries, np.stack([keep[q] for q in queries]))
    print_modes(f"{size:,} chunks, {len(queries)} queries", modes)
    legacy = legacy_write_ms(backend.index, workdir)
    print(f"  a write with the old whole-file graph.json: {legacy['ms']} ms ({legacy['mib']} MiB rewritten)", flush=True)
    await backend.close()
    return {"chunks": size, "build": build, "queries": len(queries), "search": modes, "legacy_graph_json_write": legacy}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=5000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--query-noise", type=float, default=0.3)
    parser.add_argument("--skip-demo", action="store_true")
    parser.add_argument("--out", type=Path, default=result_path("graph_retrieval"))
    args = parser.parse_args()
    results: dict[str, Any] = {
        "bench": "graph_retrieval", "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "goal_added_p50_ms": GOAL_ADDED_P50_MS, "graph_options": GraphOptions.of(RetrieverSettings()).__repr__(),
    }
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        if not args.skip_demo:
            embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
            embedder.warm_up()
            results["demo"] = await demo(args, embedder, workdir)
        results["synthetic"] = [await synthetic(int(size), args, workdir) for size in args.sizes.split(",") if size]
    write_result(args.out, results)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    asyncio.run(main())
