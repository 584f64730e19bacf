"""Retrieval quality of bm25, dense and hybrid (min_max and rrf) on real benchmark datasets.

For each dataset: ingests its corpus into a fresh embedded index through the retriever's own
``Ingestor`` (its runtime, ``rag_eval.harness.open_index``: the real chunker and the real
all-MiniLM-L6-v2 embedder), then asks every query once
per mode through ``SearchService`` with ``top_k`` = the largest metric cut-off, and scores the
rankings (chunks of one document count once, at their best rank) with ``rag_eval.metrics``.

- vaswani  (11,429 abstracts, 93 queries):       nDCG@10, MRR@10, Recall@100
- hotpotqa (994 passages, 100 questions, 2 gold): Recall@5, Recall@10, coverage@5, coverage@10
- clapnq   (596 passages, 300 answerable):        nDCG@10, MRR@10, Recall@5, Recall@10
- mtrag-un (1,152 passages, 332 answerable/partial tasks; the last user turn alone, no rewrite):
                                                   nDCG@10, Recall@5, Recall@10

Also reported per dataset: ANN recall@10 of the backend's dense search against an exact numpy scan
over the same real MiniLM vectors (the embedder is wrapped to keep the vectors it makes).

Settings are the retriever's defaults (``RETRIEVER_*`` env vars apply). A dataset that is not under
``$RAG_DATASETS_DIR`` is skipped with a message. Prints Markdown tables and writes JSON.

    .venv/bin/python bench/retrieval_quality.py [--datasets vaswani,hotpotqa,clapnq,mtrag-un]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_eval.datasets import DatasetNotFound, load_dataset
from rag_eval.harness import Retriever, open_index
from rag_eval.metrics import evaluate, parse_metric
from harness import result_path, write_result


METRICS = {
    "vaswani": ["ndcg@10", "mrr@10", "recall@100"],
    "hotpotqa": ["recall@5", "recall@10", "coverage@5", "coverage@10"],
    "clapnq": ["ndcg@10", "mrr@10", "recall@5", "recall@10"],
    "mtrag-un": ["ndcg@10", "recall@5", "recall@10"],
}
#: (row label, SearchRequest.mode, fusion)
MODES = [
    ("bm25", "bm25", "min_max"),
    ("dense", "dense", "min_max"),
    ("hybrid min_max", "hybrid", "min_max"),
    ("hybrid rrf", "hybrid", "rrf"),
]


class RecordingEmbedder:
    """The real embedder, keeping every document vector it makes (for the exact-search recall check)."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self._embedder = embedder
        self.texts: list[str] = []
        self.vectors: list[np.ndarray] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        vectors = self._embedder.encode_documents(texts)
        self.texts += texts
        self.vectors.append(vectors)
        return vectors

    def encode_documents_pooled(self, texts: list[str], pools: list[Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        """The ingestor's call with pooled sentence vectors (the default): the chunk vectors are kept too."""
        vectors, pooled = self._embedder.encode_documents_pooled(texts, pools)
        self.texts += texts
        self.vectors.append(vectors)
        return vectors, pooled


async def ann_recall(retriever: Retriever, recorder: RecordingEmbedder, queries: list[str], k: int = 10) -> float:
    """Recall@k of the backend's dense search against an exact scan over the same MiniLM vectors."""
    matrix = np.concatenate(recorder.vectors)
    recalls = []
    for text in queries:
        vector = recorder.encode_queries([text])[0]
        exact = {recorder.texts[i] for i in np.argsort(-(matrix @ vector), kind="stable")[:k]}
        texts = [hit.chunk.text for hit in await retriever.backend.search_dense(vector, k)]
        # The recorder saw the embedded strings (RETRIEVER_EMBED_TEMPLATE: context lines, then the
        # chunk's text); a hit carries the text only.
        found = {string for string in exact if any(text in string for text in texts)}
        recalls.append(len(found) / len(exact))
    return float(np.mean(recalls))


async def run_dataset(name: str, embedder: SentenceTransformerEmbedder, workdir: Path | None) -> dict[str, Any] | None:
    try:
        dataset = load_dataset(name)
    except DatasetNotFound as exc:
        print(f"\n{name}: skipped, {exc}")
        return None
    dataset.check()
    metrics = METRICS[name]
    top_k = max(parse_metric(spec)[1] for spec in metrics)
    print(f"\n== {dataset!r}; ingesting ...", flush=True)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        recorder = RecordingEmbedder(embedder)
        async with open_index(Path(tmp) / "index", recorder) as retriever:
            stats = await retriever.ingest_corpus(dataset.corpus, source=dataset.name)
            listed = await retriever.backend.list_documents()
            multi_chunk = sum(1 for info in listed if info.chunks > 1)
            print(
                f"   {stats.documents} documents → {stats.chunks} chunks ({multi_chunk} documents in several chunks) "
                f"in {stats.seconds:.1f} s ({stats.failed} failed)",
                flush=True,
            )
            rows: dict[str, Any] = {}
            for label, mode, fusion in MODES:
                started = time.perf_counter()
                run = await retriever.run(dataset, mode, top_k, fusion)
                seconds = time.perf_counter() - started
                result = evaluate(run, dataset.qrels, metrics)
                short = sum(1 for ranking in run.values() if len(ranking) < top_k)
                rows[label] = {
                    "mode": mode,
                    "fusion": fusion if mode == "hybrid" else None,
                    "metrics": {spec: round(value, 4) for spec, value in result.means.items()},
                    "queries_evaluated": result.evaluated,
                    "queries_skipped_no_gold": len(result.skipped),
                    "rankings_shorter_than_top_k": short,
                    "ms_per_query": round(seconds * 1000 / max(1, len(run)), 1),
                }
                print(f"   {label:<15} " + "  ".join(f"{s}={v:.4f}" for s, v in result.means.items()), flush=True)
            recall = await ann_recall(retriever, recorder, [query.text for query in dataset.queries])
            print(f"   ANN recall@10 (dense search vs exact scan of the same vectors): {recall:.4f}", flush=True)
    return {
        "documents": len(dataset.corpus),
        "queries": len(dataset.queries),
        "chunks": stats.chunks,
        "multi_chunk_documents": multi_chunk,
        "ingest_seconds": round(stats.seconds, 1),
        "top_k": top_k,
        "ann_recall_at_10": round(recall, 4),
        "metrics": metrics,
        "modes": rows,
    }


def table(name: str, data: dict[str, Any]) -> str:
    metrics = data["metrics"]
    lines = [
        f"**{name}** ({data['documents']:,} documents → {data['chunks']:,} chunks, "
        f"{next(iter(data['modes'].values()))['queries_evaluated']} queries with gold, top_k = {data['top_k']})",
        "",
        "| mode | " + " | ".join(metrics) + " |",
        "|---|" + "---:|" * len(metrics),
    ]
    best = {spec: max(row["metrics"][spec] for row in data["modes"].values()) for spec in metrics}
    for label, row in data["modes"].items():
        cells = [
            f"**{row['metrics'][spec]:.3f}**" if row["metrics"][spec] == best[spec] else f"{row['metrics'][spec]:.3f}"
            for spec in metrics
        ]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default="vaswani,hotpotqa,clapnq,mtrag-un")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=result_path("retrieval_quality"))
    args = parser.parse_args()
    names = [name.strip() for name in args.datasets.split(",") if name.strip()]
    unknown = sorted(set(names) - set(METRICS))
    if unknown:
        parser.error(f"unknown dataset(s) {unknown}; choose from {', '.join(METRICS)}")

    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    embedder.warm_up()
    started = time.perf_counter()
    results: dict[str, Any] = {}
    for name in names:
        data = asyncio.run(run_dataset(name, embedder, args.workdir))
        if data is not None:
            results[name] = data
    output = {
        "embedder": embedder.model_id,
        "datasets": results,
        "total_seconds": round(time.perf_counter() - started, 1),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    print()
    for name, data in results.items():
        print(table(name, data) + "\n")
    if not results:
        print("no dataset found: nothing measured (set RAG_DATASETS_DIR)")
    write_result(args.out, output)
    print(f"wrote {args.out} ({output['total_seconds']} s)")


if __name__ == "__main__":
    main()
