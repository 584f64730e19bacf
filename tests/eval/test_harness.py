"""The benchmark harness: the sync/async backend adapter, and one real retriever run over a tiny
dataset (real MiniLM embedder, real embedded backend) scored with the metrics."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_eval.datasets import load_generic
from rag_eval.harness import BackendAdapter, Retriever, call, dedupe_doc_ids
from rag_eval.metrics import evaluate
from rag_retriever.records import ChunkRecord, ScoredChunk


def _hit(chunk_id: str, score: float) -> ScoredChunk:
    return ScoredChunk(ChunkRecord(chunk_id=chunk_id, doc_id=chunk_id, text=chunk_id, chunk_index=0), score)


class SyncBackend:
    """The pre-async protocol: plain methods, no search_hybrid."""

    def __init__(self) -> None:
        self.upserted: list[str] = []

    def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        self.upserted += [chunk.chunk_id for chunk in chunks]

    def search_dense(self, vector: np.ndarray, k: int, filters: object = None) -> list[ScoredChunk]:
        return [_hit("a", 0.9), _hit("b", 0.8), _hit("c", 0.7)][:k]

    def search_bm25(self, query: str, k: int, filters: object = None) -> list[ScoredChunk]:
        return [_hit("c", 7.0), _hit("d", 3.0)][:k]

    def count(self) -> int:
        return len(self.upserted)

    def close(self) -> None:
        pass


class AsyncBackend(SyncBackend):
    """The async protocol: every method a coroutine, and the backend fuses hybrid itself."""

    def __init__(self) -> None:
        super().__init__()
        self.hybrid_calls: list[tuple] = []

    async def upsert(self, chunks, vectors):  # type: ignore[override]
        SyncBackend.upsert(self, chunks, vectors)

    async def search_dense(self, vector, k, filters=None):  # type: ignore[override]
        return SyncBackend.search_dense(self, vector, k, filters)

    async def search_bm25(self, query, k, filters=None):  # type: ignore[override]
        return SyncBackend.search_bm25(self, query, k, filters)

    async def search_hybrid(self, query, vector, k, filters, fusion):
        self.hybrid_calls.append((query, k, filters, fusion))
        return [_hit("z", 1.0)]

    async def count(self):  # type: ignore[override]
        return SyncBackend.count(self)

    async def close(self):  # type: ignore[override]
        pass


async def test_call_awaits_only_awaitables() -> None:
    async def coroutine(x: int) -> int:
        return x + 1

    assert await call(lambda x: x * 2, 4) == 8
    assert await call(coroutine, 4) == 5


@pytest.mark.parametrize("backend_class", [SyncBackend, AsyncBackend])
async def test_adapter_works_with_sync_and_async_backends(backend_class: type[SyncBackend]) -> None:
    adapter = BackendAdapter(backend_class())
    chunk = ChunkRecord(chunk_id="x:0", doc_id="x", text="x", chunk_index=0)
    await adapter.upsert([chunk], np.zeros((1, 3), dtype=np.float32))
    assert await adapter.count() == 1
    assert [hit.chunk.chunk_id for hit in await adapter.search_dense(np.zeros(3), 2)] == ["a", "b"]
    assert [hit.chunk.chunk_id for hit in await adapter.search_bm25("q", 1)] == ["c"]
    await adapter.close()


async def test_adapter_fuses_itself_without_search_hybrid() -> None:
    adapter = BackendAdapter(SyncBackend())
    assert adapter.hybrid_path == "adapter"
    # RRF: c is 3rd in dense and 1st in bm25 → 1/63 + 1/61, above a (1/61 only).
    hits = await adapter.search_hybrid("q", np.zeros(3), 2, fusion="rrf")
    assert [hit.chunk.chunk_id for hit in hits] == ["c", "a"]
    assert hits[0].score == pytest.approx(1 / 63 + 1 / 61)


async def test_adapter_delegates_hybrid_to_the_backend() -> None:
    backend = AsyncBackend()
    adapter = BackendAdapter(backend)
    assert adapter.hybrid_path == "backend"
    hits = await adapter.search_hybrid("q", np.zeros(3), 5, None, "rrf")
    assert [hit.chunk.chunk_id for hit in hits] == ["z"]
    (query, k, filters, fusion) = backend.hybrid_calls[0]
    assert (query, k, filters) == ("q", 5, None)
    assert getattr(fusion, "method", fusion) == "rrf"


def test_dedupe_keeps_best_rank() -> None:
    assert dedupe_doc_ids(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


async def test_real_retriever_on_a_tiny_dataset(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    corpus = [
        {"_id": "bees", "title": "Honeybees", "text": "Honeybees tell each other where flowers are with the waggle dance."},
        {"_id": "tcp", "title": "TCP", "text": "TCP opens a connection with a three-way handshake: SYN, SYN-ACK, ACK."},
        {"_id": "bread", "title": "Sourdough", "text": "Sourdough bread rises thanks to wild yeast in the starter."},
        {"_id": "volcano", "title": "Volcanoes", "text": "A volcano erupts when magma rises through the crust."},
    ]
    queries = [
        {"_id": "q1", "text": "how do bees communicate the location of flowers"},
        {"_id": "q2", "text": "three-way handshake of a network connection"},
    ]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (tmp_path / "qrels.tsv").write_text("q1\tbees\t1\nq2\ttcp\t1\n")
    dataset = load_generic(tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl", tmp_path / "qrels.tsv")

    retriever = Retriever(tmp_path / "index", embedder)
    try:
        stats = await retriever.ingest_corpus(dataset.corpus, source="tiny")
        assert (stats.documents, stats.chunks, stats.failed) == (4, 4, 0)
        for mode, fusion in [("bm25", "min_max"), ("dense", "min_max"), ("hybrid", "min_max"), ("hybrid", "rrf")]:
            run = await retriever.run(dataset, mode, 3, fusion)
            result = evaluate(run, dataset.qrels, ["hit@1", "recall@3"])
            assert result.evaluated == 2
            assert result.means == {"hit@1": 1.0, "recall@3": 1.0}, (mode, fusion, run)
    finally:
        await retriever.close()
