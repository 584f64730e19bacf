"""Ingestion throughput: the full ``Ingestor`` path (chunk + embed + index) against the embedder alone.

Takes ``--docs`` real documents (Vaswani abstracts by default, or HotpotQA passages), ingests them
into a fresh embedded index through the retriever's own ``Ingestor`` in requests of
``--request-size`` documents (the API's limit is 1000), and separately embeds exactly the chunk
texts that ingestion produced, in batches of the same size the Ingestor uses. Each is run
``--repeats`` times, alternating, and the medians are compared:

    overhead = (pipeline - embed only) / pipeline          (goal <= 15 %)

The ingestion is the retriever's runtime (``rag_retriever.runtime.open_runtime`` through
``rag_eval.harness.open_index``: its ``Ingestor``, chunker and embedded backend, as the service builds
them). Because the separate runs drift with the machine's load, the same ratio is also measured within each
pipeline run: (wall time - time spent inside the embedder) / wall time. Also reported, to explain the overhead: chunking alone (the embedder's tokenizer) and indexing alone
(``upsert`` of the precomputed vectors into a fresh index). Prints numbers and writes JSON.

    .venv/bin/python bench/retrieval_ingest.py [--dataset vaswani] [--docs 3000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_eval.datasets import DatasetNotFound, load_dataset
from rag_eval.harness import embedded_settings, open_index, to_documents
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import EMBED_BATCH_SIZE, to_source_document
from rag_retriever.records import ChunkRecord
from rag_retriever.runtime import open_backend
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer
from harness import RESULTS_DIR, write_result

GOAL_OVERHEAD = 0.15


async def embed_only(embedder: SentenceTransformerEmbedder, texts: list[str]) -> float:
    """The embedding the Ingestor does, alone: same batches, same hop to a worker thread per batch
    (torch runs measurably differently on the main thread than in a worker thread on a loaded
    2-core machine, so the comparison must use the same kind of thread)."""
    started = time.perf_counter()
    for start in range(0, len(texts), EMBED_BATCH_SIZE):
        await asyncio.to_thread(embedder.encode_documents, texts[start : start + EMBED_BATCH_SIZE])
    return time.perf_counter() - started


class TimedEmbedder:
    """The real embedder, adding up the time spent inside ``encode_documents`` (in whatever thread)."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self._embedder = embedder
        self.seconds = 0.0
        #: Strings embedded (``bench/sentence_vectors.py`` counts them).
        self.strings = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        started = time.perf_counter()
        try:
            return self._embedder.encode_documents(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.strings += len(texts)

    def encode_documents_pooled(self, texts: list[str], pools: list[Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        """Pooled sentence vectors (``RETRIEVER_SENTENCE_VECTORS=pooled``): one pass per text, timed alike."""
        started = time.perf_counter()
        try:
            return self._embedder.encode_documents_pooled(texts, pools)
        finally:
            self.seconds += time.perf_counter() - started
            self.strings += len(texts)


def add_ingest_arguments(parser: argparse.ArgumentParser, *, dataset: str, docs: int, out: str) -> None:
    """The options every ingest bench takes: which documents, how many repeats, where to write."""
    parser.add_argument("--dataset", default=dataset, choices=["vaswani", "hotpotqa", "clapnq", "mtrag-un"])
    parser.add_argument("--docs", type=int, default=docs)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR / out)


async def pipeline(
    embedder: SentenceTransformerEmbedder, documents: list[Any], workdir: Path, request_size: int
) -> tuple[float, float, int]:
    """(wall seconds of the ingestion, seconds of it spent inside the embedder, chunks written)."""
    timed = TimedEmbedder(embedder)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        async with open_index(Path(tmp) / "index", timed) as retriever:
            stats = await retriever.ingest(documents, request_size=request_size)
    if stats.failed:
        print(f"  warning: {stats.failed} documents failed to ingest", file=sys.stderr)
    return stats.seconds, timed.seconds, stats.chunks


async def index_only(
    embedder: SentenceTransformerEmbedder, chunks: list[ChunkRecord], vectors: np.ndarray, workdir: Path, request_size: int
) -> float:
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        settings = embedded_settings(Path(tmp) / "index")
        backend = (await open_backend(settings, dim=embedder.dim, model_id=embedder.model_id)).backend
        try:
            started = time.perf_counter()
            # One upsert per ingest request, as the Ingestor does.
            by_doc: dict[str, list[int]] = {}
            for row, chunk in enumerate(chunks):
                by_doc.setdefault(chunk.doc_id, []).append(row)
            doc_ids = list(by_doc)
            for start in range(0, len(doc_ids), request_size):
                rows = [row for doc_id in doc_ids[start : start + request_size] for row in by_doc[doc_id]]
                await backend.upsert([chunks[row] for row in rows], vectors[rows])
            return time.perf_counter() - started
        finally:
            await backend.close()


def dataset_documents(name: str, docs: int, script: str) -> tuple[Any, list[Any]] | None:
    """``(dataset, its first docs documents as ingest input)``, or None (after saying why) when the
    dataset is not on this machine."""
    try:
        dataset = load_dataset(name)
    except DatasetNotFound as exc:
        print(f"{script}: skipped, {exc}")
        return None
    return dataset, to_documents(dataset.corpus.documents()[:docs], source=dataset.name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_ingest_arguments(parser, dataset="vaswani", docs=3000, out="retrieval_ingest.json")
    parser.add_argument("--request-size", type=int, default=1000, help="documents per Ingestor.ingest call")
    args = parser.parse_args()

    loaded = dataset_documents(args.dataset, args.docs, "retrieval_ingest")
    if loaded is None:
        return
    dataset, documents = loaded

    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    embedder.warm_up()
    # The chunk texts the Ingestor will embed (same chunker, same settings).
    settings = RetrieverSettings()
    chunker = Chunker(EmbedderTokenizer(embedder), settings.chunk_tokens, settings.chunk_overlap_tokens)
    t0 = time.perf_counter()
    chunks = [c for d in documents for c in chunker.chunk_document(to_source_document(d))]
    chunk_s = time.perf_counter() - t0
    texts = [chunk.text for chunk in chunks]
    tokens = [embedder.count_tokens(text) for text in texts]
    print(f"{len(documents)} {dataset.name} documents → {len(chunks)} chunks, {statistics.fmean(tokens):.0f} tokens each on average")
    asyncio.run(embed_only(embedder, texts[:256]))  # warm-up

    embed_runs, pipeline_runs, inside_runs = [], [], []
    for repeat in range(args.repeats):
        embed_runs.append(asyncio.run(embed_only(embedder, texts)))
        seconds, inside, written = asyncio.run(pipeline(embedder, documents, args.workdir, args.request_size))
        pipeline_runs.append(seconds)
        inside_runs.append((seconds - inside) / seconds)
        print(
            f"  run {repeat + 1}: embed only {embed_runs[-1]:.1f} s, pipeline {seconds:.1f} s ({written} chunks), "
            f"of which {inside:.1f} s in the embedder",
            flush=True,
        )
    vectors = embedder.encode_documents(texts)
    index_s = asyncio.run(index_only(embedder, chunks, vectors, args.workdir, args.request_size))

    embed_s = statistics.median(embed_runs)
    pipeline_s = statistics.median(pipeline_runs)
    overhead = (pipeline_s - embed_s) / pipeline_s
    # The same ratio within each pipeline run (time outside the embedder / wall time): immune to the
    # machine's load changing between the separate runs, so the steadier of the two on a busy host.
    overhead_in_run = statistics.median(inside_runs)
    result = {
        "dataset": dataset.name,
        "documents": len(documents),
        "chunks": len(chunks),
        "mean_chunk_tokens": round(statistics.fmean(tokens), 1),
        "request_size": args.request_size,
        "embed_batch_size": EMBED_BATCH_SIZE,
        "repeats": args.repeats,
        "embed_only_s": round(embed_s, 2),
        "pipeline_s": round(pipeline_s, 2),
        "embed_only_chunks_per_s": round(len(chunks) / embed_s, 1),
        "pipeline_chunks_per_s": round(len(chunks) / pipeline_s, 1),
        "overhead": round(overhead, 4),
        "overhead_within_pipeline_run": round(overhead_in_run, 4),
        "goal_overhead": GOAL_OVERHEAD,
        "chunking_only_s": round(chunk_s, 2),
        "index_only_s": round(index_s, 2),
        "runs": {
            "embed_only_s": [round(x, 2) for x in embed_runs],
            "pipeline_s": [round(x, 2) for x in pipeline_runs],
            "overhead_within_pipeline_run": [round(x, 4) for x in inside_runs],
        },
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    print(
        "\n| documents | chunks | embed only chunks/s | pipeline chunks/s | overhead (separate runs) "
        "| overhead (within run) | chunking s | indexing s |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {len(documents):,} {dataset.name} | {len(chunks):,} | {result['embed_only_chunks_per_s']} | "
        f"{result['pipeline_chunks_per_s']} | {overhead:.1%} | {overhead_in_run:.1%} | {chunk_s:.2f} | {index_s:.2f} |"
    )
    for label, value in (("separate runs", overhead), ("within the pipeline run", overhead_in_run)):
        verdict = "meets" if value <= GOAL_OVERHEAD else "MISSES"
        print(f"goal: overhead <= {GOAL_OVERHEAD:.0%} ({label}): {value:.1%} ({verdict})")
    write_result(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
