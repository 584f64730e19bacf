"""A write to the embedded index in two steps (issue 29): its preparation (tantivy operations queued,
vectors added to the graph) is invisible to searches and does not hold the lock they take; only the
commit does. And the ingestor lets searches run while a replacement is prepared, waiting only for its
commit, so a search still never sees half of a request's documents."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from rag_common.schemas import DocumentIn, SearchRequest
from rag_retriever.backends.base import AccessFilter, FusionSettings
from rag_retriever.backends.embedded import EmbeddedBackend, EmbeddedIndex
from rag_retriever.ingestion import Ingestor
from rag_retriever.locking import ReadWriteLock
from rag_retriever.records import ChunkRecord
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from retriever_builders import HNSW, build_ingestor, settings_chunker

TENANT = "acme"  # the corpus's "photosynthesis" is acme's
EVERYONE = AccessFilter(TENANT, ("*",))
DOC = "photosynthesis"


def new_version(doc_id: str, n: int, rng: np.random.Generator) -> tuple[list[ChunkRecord], np.ndarray]:
    chunks = [
        ChunkRecord(
            chunk_id=f"{doc_id}:v2:{i}", doc_id=doc_id, text=f"zeppelin hangar part {i}", chunk_index=i, tenant=TENANT
        )
        for i in range(n)
    ]
    vectors = rng.standard_normal((n, 384)).astype(np.float32)
    return chunks, vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def live_ids(index: EmbeddedIndex, vector: np.ndarray) -> set[str]:
    return {hit.chunk.chunk_id for hit in index.search_dense(vector, 50, access=EVERYONE)}


@pytest.mark.parametrize("outcome", ["commit", "abandon"])
def test_a_prepared_write_is_invisible_until_committed(loaded_index: EmbeddedIndex, outcome: str):
    index = loaded_index
    before = index.document_chunk_ids(DOC, tenant=TENANT)
    chunks, vectors = new_version(DOC, 200, np.random.default_rng(0))
    all_before = live_ids(index, vectors[0])

    prepared = index.prepare_replacement([DOC], chunks, vectors, tenant=TENANT)
    # Pending: searches run (the index lock is free) and see the index as it was, in every mode.
    assert prepared is not None and prepared.staged == len(chunks)
    assert live_ids(index, vectors[0]) == all_before
    assert len(index.search_dense(vectors[0], 12, access=None)) == 12  # k live hits, none staged
    assert index.search_bm25("zeppelin hangar", 5, access=EVERYONE) == []
    assert index.document_chunk_ids(DOC, tenant=TENANT) == before

    if outcome == "commit":
        index.commit_prepared(prepared)
        assert index.document_chunk_ids(DOC, tenant=TENANT) == {chunk.chunk_id for chunk in chunks}
        assert index.search_dense(vectors[7], 1, access=EVERYONE)[0].chunk.chunk_id == chunks[7].chunk_id
        assert index.search_bm25("zeppelin hangar", 1, access=EVERYONE)[0].chunk.doc_id == DOC
    else:
        index.abandon_prepared(prepared)
        assert index.document_chunk_ids(DOC, tenant=TENANT) == before
        assert live_ids(index, vectors[0]) == all_before
    assert index.consistency().consistent
    # The index takes the next write as usual.
    index.replace_documents(["tcp"], [], np.zeros((0, 384), dtype=np.float32), tenant=TENANT)
    assert index.document_chunk_ids("tcp", tenant=TENANT) == set()
    assert index.consistency().consistent


def test_a_prepared_write_left_behind_is_dropped_by_the_next_write(loaded_index: EmbeddedIndex):
    index = loaded_index
    chunks, vectors = new_version(DOC, 10, np.random.default_rng(1))
    index.prepare_replacement([DOC], chunks, vectors, tenant=TENANT)  # never committed nor abandoned
    index.replace_documents(["tcp"], [], np.zeros((0, 384), dtype=np.float32), tenant=TENANT)
    assert not index.document_chunk_ids("tcp", tenant=TENANT)
    assert index.document_chunk_ids(DOC, tenant=TENANT) and not any(
        chunk_id.startswith(f"{DOC}:v2") for chunk_id in index.document_chunk_ids(DOC, tenant=TENANT)
    )
    assert index.consistency().consistent


class GatedBackend(EmbeddedBackend):
    """The embedded backend whose preparation of a replacement waits for the test (to look inside it)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.preparing = asyncio.Event()
        self.gate = asyncio.Event()

    async def prepare_replacement(self, *args, **kwargs):
        self.preparing.set()
        await self.gate.wait()
        return await super().prepare_replacement(*args, **kwargs)


@pytest.fixture
async def gated_backend(tmp_path):
    backend = GatedBackend(tmp_path / "gated", dim=384, hnsw=HNSW, model_id="all-MiniLM-L6-v2")
    yield backend
    await backend.close()


#: An Ingestor without an access argument writes into the default tenant.
DEFAULT_READERS = AccessFilter("default", ("*",))


def documents() -> list[DocumentIn]:
    return [
        DocumentIn(id="pumps", text="The pump in hall seven needs new bearings every twelve months."),
        DocumentIn(id="seals", text="Replace the seals of the pump every six months."),
    ]


async def test_searches_run_while_a_replacement_is_prepared(gated_backend, embedder, tokenizer):
    lock = ReadWriteLock()
    # As the runtime composes them over the embedded backend: its staged writes injected.
    ingestor = build_ingestor(gated_backend, embedder, settings_chunker(tokenizer), lock, staged=gated_backend)
    settings = RetrieverSettings()
    search = SearchService(
        gated_backend, embedder, lock, fusion=FusionSettings.of(settings), default_top_k=settings.default_top_k,
        graph=GraphDefaults.of(settings), graph_searcher=gated_backend,
    )
    gated_backend.gate.set()
    await ingestor.ingest([DocumentIn(id="old", text="Lava flows from the volcano's vent.")])
    gated_backend.gate.clear()

    writing = asyncio.ensure_future(ingestor.ingest(documents()))
    async with asyncio.timeout(60):
        await gated_backend.preparing.wait()
        # The ingest holds the write side of the lock and is preparing: a search still gets in, and
        # sees the index as it was (before, the search waited for the whole write).
        found = await search.search(SearchRequest(query="pump bearings", mode="hybrid"), DEFAULT_READERS)
    assert [passage.doc_id for passage in found.passages] == ["old"]
    assert not writing.done()

    gated_backend.gate.set()
    response = await writing
    assert sorted(response.doc_ids) == ["pumps", "seals"]
    found = await search.search(SearchRequest(query="pump bearings", mode="hybrid", top_k=1), DEFAULT_READERS)
    assert found.passages[0].doc_id == "pumps"


async def test_a_cancelled_ingest_leaves_nothing_of_its_prepared_write(gated_backend, embedder, tokenizer):
    lock = ReadWriteLock()
    ingestor = build_ingestor(gated_backend, embedder, settings_chunker(tokenizer), lock, staged=gated_backend)
    writing = asyncio.ensure_future(ingestor.ingest(documents()))
    async with asyncio.timeout(60):
        await gated_backend.preparing.wait()
        writing.cancel()
        with pytest.raises(asyncio.CancelledError):
            await writing
        gated_backend.gate.set()  # the preparation finishes after its request is gone: it is dropped
        while gated_backend.index._pending is not None or not gated_backend.index.consistency().consistent:
            await asyncio.sleep(0.01)
    assert await gated_backend.count() == 0
    response = await ingestor.ingest(documents())  # and the next write goes through
    assert sorted(response.doc_ids) == ["pumps", "seals"] and await gated_backend.count() == 2
    assert gated_backend.index.consistency().consistent
