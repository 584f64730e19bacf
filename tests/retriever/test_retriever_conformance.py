"""One behaviour, every backend: the same checks against the embedded backend and, when
``OPENSEARCH_URL`` is set (``make test-opensearch``), against a live OpenSearch cluster.

Real MiniLM vectors throughout. The quality check runs on a slice of the Vaswani test collection
(``$RAG_DATASETS_DIR/vaswani``): hybrid must not rank worse than either of its two lists.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import math
import os
import random
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from rag_retriever.backends.base import AccessFilter, FusionSettings, SearchBackend
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.records import ChunkRecord, ScoredChunk
from rag_retriever.settings import RetrieverSettings
from retriever_builders import HNSW

MODEL_ID = "all-MiniLM-L6-v2"
DIM = 384
CORPUS_SIZE = 12
LIVE_CLUSTER_SKIP = "set OPENSEARCH_URL to run against a live cluster"
#: RAG_LANGUAGES of every backend under test: Romanian and English analysed, German (say) not.
LANGUAGES = ("ro", "en")
MIN_MAX, RRF = FusionSettings("min_max", 0.5), FusionSettings("rrf", 0.5)


@dataclass
class Harness:
    """Opens the backend under test over storage that outlives each opened instance."""

    kind: str
    open: Callable[[], Awaitable[SearchBackend]]
    cleanup: Callable[[], Awaitable[None]]


def embedded_harness(directory: Path) -> Harness:
    async def open_backend() -> SearchBackend:
        return await asyncio.to_thread(EmbeddedBackend, directory, DIM, HNSW, model_id=MODEL_ID, languages=LANGUAGES)

    async def cleanup() -> None:
        pass

    return Harness("embedded", open_backend, cleanup)


def opensearch_harness(url: str) -> Harness:
    from opensearchpy import AsyncOpenSearch

    from rag_retriever.backends.opensearch import OpenSearchBackend
    from rag_retriever.backends.opensearch_requests import IndexConfig

    # A fresh alias per harness, so runs never see each other's chunks.
    settings = RetrieverSettings(opensearch_index=f"rag-conformance-{uuid.uuid4().hex[:10]}")
    config = IndexConfig.of(settings, dim=DIM, model_id=MODEL_ID, languages=LANGUAGES)

    async def open_backend() -> SearchBackend:
        backend = OpenSearchBackend(AsyncOpenSearch(hosts=[url], timeout=60), config, fusion=MIN_MAX)
        await backend.ensure_index()
        return backend

    async def cleanup() -> None:
        client = AsyncOpenSearch(hosts=[url])
        try:
            await client.indices.delete(index=f"{config.alias}-v*", ignore=[404])
            await client.indices.delete_index_template(name=config.template_name, ignore=[404])
            for suffix in ("minmax", "zscore", "rrf"):
                await client.search_pipeline.delete(id=f"{config.alias}-hybrid-{suffix}", ignore=[404])
        finally:
            await client.close()

    return Harness("opensearch", open_backend, cleanup)


async def make_harness(kind: str, directory: Path) -> Harness:
    if kind == "embedded":
        return embedded_harness(directory)
    url = os.environ.get("OPENSEARCH_URL")
    if not url:
        pytest.skip(LIVE_CLUSTER_SKIP)
    return opensearch_harness(url)


@pytest.fixture(params=["embedded", "opensearch"])
async def harness(request, tmp_path: Path) -> AsyncIterator[Harness]:
    made = await make_harness(request.param, tmp_path / "index")
    yield made
    await made.cleanup()


@pytest.fixture
async def backend(harness: Harness) -> AsyncIterator[SearchBackend]:
    opened = await harness.open()
    yield opened
    await opened.close()


@pytest.fixture(scope="module")
def corpus_chunks(corpus_chunks) -> tuple[list[ChunkRecord], np.ndarray]:
    """The shared corpus as ingestion stores it: each chunk carries its identified language (English),
    so it is analysed in English as well as neutrally (a chunk without one is neutral only)."""
    chunks, vectors = corpus_chunks
    return [dataclasses.replace(chunk, language="en") for chunk in chunks], vectors


@pytest.fixture
async def loaded(backend: SearchBackend, corpus_chunks) -> SearchBackend:
    await backend.upsert(*corpus_chunks)
    return backend


def query_vector(embedder, text: str) -> np.ndarray:
    return embedder.encode_queries([text])[0]


def doc_ids(hits: list[ScoredChunk]) -> list[str]:
    return [hit.chunk.doc_id for hit in hits]


def chunk(doc_id: str, index: int, text: str) -> ChunkRecord:
    return ChunkRecord(chunk_id=f"{doc_id}:{index}", doc_id=doc_id, text=text, chunk_index=index, source=f"{doc_id}.txt")


# --------------------------------------------------------------------------- writes


async def test_upsert_is_idempotent_per_chunk_id(loaded: SearchBackend, corpus_chunks):
    chunks, vectors = corpus_chunks
    await loaded.upsert(chunks[:3], vectors[:3])
    await loaded.upsert(chunks[:1], vectors[:1])

    assert await loaded.count() == CORPUS_SIZE
    assert [hit.chunk.chunk_id for hit in await loaded.search_bm25("chlorophyll chloroplasts", 10)] == [
        chunks[0].chunk_id
    ]
    dense = await loaded.search_dense(vectors[0], CORPUS_SIZE)
    assert len(dense) == CORPUS_SIZE and len({hit.chunk.chunk_id for hit in dense}) == CORPUS_SIZE
    assert await loaded.document_chunk_ids("photosynthesis") == {chunks[0].chunk_id}
    assert await loaded.document_fingerprint("photosynthesis") == chunks[0].doc_fingerprint


async def test_delete_document_removes_all_its_chunks(backend: SearchBackend, embedder):
    texts = ["Glaciers carve U-shaped valleys.", "Moraines are ridges of glacial debris.", "Icebergs calve from glaciers."]
    chunks = [chunk("glaciers", i, text) for i, text in enumerate(texts)]
    chunks.append(chunk("deserts", 0, "Sand dunes migrate with the prevailing wind."))
    vectors = embedder.encode_documents([c.text for c in chunks])
    await backend.upsert(chunks, vectors)
    assert await backend.document_chunk_ids("glaciers") == {c.chunk_id for c in chunks[:3]}

    assert await backend.delete_document("glaciers") == 3

    assert await backend.count() == 1
    assert await backend.document_chunk_ids("glaciers") == set()
    assert await backend.document_fingerprint("glaciers") is None
    assert await backend.search_bm25("glaciers moraines icebergs", 10) == []
    for vector in vectors[:3]:
        assert doc_ids(await backend.search_dense(vector, 10)) == ["deserts"]
    assert doc_ids(await backend.search_hybrid("glaciers", vectors[0], 10, None, MIN_MAX)) == ["deserts"]
    assert await backend.delete_document("glaciers") == 0
    assert [info.doc_id for info in await backend.list_documents()] == ["deserts"]


async def test_replace_documents_swaps_the_named_documents_whole_and_nothing_else(backend: SearchBackend, embedder):
    old = [chunk("glaciers", i, text) for i, text in enumerate(["Glaciers carve valleys.", "Moraines are debris."])]
    old.append(chunk("deserts", 0, "Sand dunes migrate with the wind."))
    other_tenant = dataclasses.replace(chunk("glaciers", 0, "Glaciers carve valleys."), chunk_id="t2:glaciers:0", tenant="t2")
    await backend.upsert([*old, other_tenant], embedder.encode_documents([c.text for c in [*old, other_tenant]]))
    new = [chunk("glaciers", 5, "Icebergs calve from glaciers."), chunk("lakes", 0, "Kettle lakes fill hollows left by ice.")]

    await backend.replace_documents(["glaciers", "lakes"], new, embedder.encode_documents([c.text for c in new]), tenant="default")

    assert await backend.document_chunk_ids("glaciers", tenant="default") == {"glaciers:5"}
    assert await backend.document_chunk_ids("lakes", tenant="default") == {"lakes:0"}
    assert await backend.document_chunk_ids("deserts", tenant="default") == {"deserts:0"}
    assert await backend.document_chunk_ids("glaciers", tenant="t2") == {"t2:glaciers:0"}
    assert await backend.count() == 4
    assert await backend.search_bm25("moraines debris", 10) == []


async def test_documents_with_content_names_the_holders_of_each_hash(backend: SearchBackend, embedder):
    def hashed(doc_id: str, index: int, text: str, content_hash: str | None) -> ChunkRecord:
        return dataclasses.replace(chunk(doc_id, index, text), content_hash=content_hash)

    same, other = "a" * 64, "b" * 64
    chunks = [
        hashed("manual", 0, "Open the valve.", same),
        hashed("manual", 1, "Close the valve.", same),
        hashed("manual-copy", 0, "Open the valve. Close the valve.", same),
        hashed("memo", 0, "Lunch is at noon.", other),
        hashed("legacy", 0, "Written before content hashes.", None),
    ]
    await backend.upsert(chunks, embedder.encode_documents([c.text for c in chunks]))

    assert await backend.documents_with_content([same, other, "c" * 64]) == {
        same: ["manual", "manual-copy"], other: ["memo"],
    }
    assert await backend.documents_with_content([]) == {}
    listed = {info.doc_id: info.content_hash for info in await backend.list_documents()}
    assert listed == {"legacy": None, "manual": same, "manual-copy": same, "memo": other}

    await backend.delete_document("manual")
    assert await backend.documents_with_content([same]) == {same: ["manual-copy"]}


async def test_reopening_keeps_everything(harness: Harness, corpus_chunks, embedder):
    chunks, vectors = corpus_chunks
    first = await harness.open()
    await first.upsert(chunks, vectors)
    await first.delete_document("jazz")
    query = query_vector(embedder, "three-way handshake")
    before = (
        [h.chunk for h in await first.search_dense(query, 5)],
        await first.search_bm25("handshake", 5),
        await first.list_documents(),
    )
    await first.close()

    reopened = await harness.open()
    try:
        assert await reopened.count() == CORPUS_SIZE - 1
        assert [h.chunk for h in await reopened.search_dense(query, 5)] == before[0]
        assert await reopened.search_bm25("handshake", 5) == before[1]
        assert await reopened.list_documents() == before[2]
        assert await reopened.search_bm25("saxophonist", 5) == []
    finally:
        await reopened.close()


# --------------------------------------------------------------------------- filters

#: For each tenant, a query whose best match overall belongs to the other tenant.
TENANT_QUERIES = {
    "acme": ("volcano lava magma eruption", "volcanoes"),
    "globex": ("sourdough starter wild yeast bread", "sourdough"),
}


@pytest.mark.parametrize("tenant", ["acme", "globex"])
async def test_tenant_filter_is_exact_in_every_mode(loaded: SearchBackend, embedder, corpus, tenant):
    tenant_of = {doc_id: doc_tenant for doc_id, doc_tenant, _, _ in corpus}
    query, best_elsewhere = TENANT_QUERIES[tenant]
    vector = query_vector(embedder, query)
    assert doc_ids(await loaded.search_bm25(query, 1)) == [best_elsewhere]
    assert doc_ids(await loaded.search_dense(vector, 1)) == [best_elsewhere]

    filters = {"tenant": [tenant]}
    # k = 1: a post-filter would find nothing; the filter must act inside the search.
    assert [tenant_of[d] for d in doc_ids(await loaded.search_dense(vector, 1, filters))] == [tenant]
    dense = await loaded.search_dense(vector, CORPUS_SIZE, filters)
    bm25 = await loaded.search_bm25(query + " the and of", CORPUS_SIZE, filters)
    hybrid = [
        hit for fusion in (MIN_MAX, RRF) for hit in await loaded.search_hybrid(query, vector, CORPUS_SIZE, filters, fusion)
    ]
    assert len(dense) == CORPUS_SIZE // 2
    assert bm25 and hybrid
    assert {tenant_of[d] for d in doc_ids(dense) + doc_ids(bm25) + doc_ids(hybrid)} == {tenant}
    assert await loaded.search_dense(vector, 3, {"tenant": ["nobody"]}) == []
    assert await loaded.search_hybrid(query, vector, 3, {"tenant": ["nobody"]}, MIN_MAX) == []


# --------------------------------------------------------------------------- ranking on the fixed corpus

TOP_HITS = [
    ("bm25", "sourdough starter hydration", "sourdough"),
    ("bm25", "SYN-ACK handshake", "tcp"),
    ("bm25", "erupting volcano", "volcanoes"),
    ("dense", "mountain spewing molten rock", "volcanoes"),
    ("dense", "fermented loaf with a tangy taste", "sourdough"),
    ("dense", "How do plants make their food from sunlight?", "photosynthesis"),
    ("hybrid", "GIL threads bytecode", "python-gil"),
    ("hybrid", "what happens when a massive star collapses", "black-holes"),
    ("hybrid", "matcha whisk ritual", "tea-ceremony"),
]


async def search(backend: SearchBackend, mode: str, query: str, vector: np.ndarray, k: int, fusion=MIN_MAX):
    if mode == "dense":
        return await backend.search_dense(vector, k)
    if mode == "bm25":
        return await backend.search_bm25(query, k)
    return await backend.search_hybrid(query, vector, k, None, fusion)


async def test_each_mode_ranks_the_expected_document_first(loaded: SearchBackend, embedder):
    for mode, query, expected in TOP_HITS:
        vector = query_vector(embedder, query)
        for fusion in (MIN_MAX, RRF) if mode == "hybrid" else (MIN_MAX,):
            hits = await search(loaded, mode, query, vector, 3, fusion)
            assert doc_ids(hits)[:1] == [expected], (mode, query, fusion.method, doc_ids(hits))


async def test_scores_are_in_their_documented_ranges(loaded: SearchBackend, embedder, corpus_chunks):
    query = "volcanic eruption"
    vector = query_vector(embedder, query)
    dense = await loaded.search_dense(vector, CORPUS_SIZE)
    bm25 = await loaded.search_bm25(query, CORPUS_SIZE)
    min_max = await loaded.search_hybrid(query, vector, CORPUS_SIZE, None, MIN_MAX)
    rrf = await loaded.search_hybrid(query, vector, CORPUS_SIZE, None, RRF)
    for hits in (dense, bm25, min_max, rrf):
        assert hits and [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(0.0 <= h.score <= 1.0 for h in dense + min_max)
    # Dense: (1 + cosine) / 2 of the unit vectors.
    chunks, vectors = corpus_chunks
    row = {c.chunk_id: i for i, c in enumerate(chunks)}
    for hit in dense:
        assert hit.score == pytest.approx((1.0 + float(vectors[row[hit.chunk.chunk_id]] @ vector)) / 2.0, abs=1e-3)
    assert bm25[0].score > 1.0 and all(h.score > 0.0 for h in bm25)  # raw BM25
    assert min_max[0].chunk.doc_id == "volcanoes" and min_max[0].score == pytest.approx(1.0)  # best in both lists
    assert rrf[0].score == pytest.approx(2 / 61) and all(h.score <= 2 / 61 + 1e-9 for h in rrf)


async def test_searches_return_the_stored_vectors_only_when_asked(loaded: SearchBackend, embedder, corpus_chunks):
    chunks, vectors = corpus_chunks
    stored = {c.chunk_id: v for c, v in zip(chunks, vectors, strict=True)}
    # Terms of three acme and three globex documents, so BM25 has hits with and without the filter
    # (with stemming and stopwords of either analyzer).
    query = "light water crust colony"
    vector = query_vector(embedder, query)
    for filters in (None, {"tenant": ["acme"]}):

        async def run(with_vectors: bool) -> list[list[ScoredChunk]]:
            return [
                await loaded.search_dense(vector, 5, filters, with_vectors=with_vectors),
                await loaded.search_bm25(query, 5, filters, with_vectors=with_vectors),
                *[
                    await loaded.search_hybrid(query, vector, 5, filters, fusion, with_vectors=with_vectors)
                    for fusion in (MIN_MAX, RRF)
                ],
            ]

        with_vectors, without = await run(True), await run(False)
        for hits, plain in zip(with_vectors, without, strict=True):
            assert len(hits) >= 3
            assert hits == plain  # same chunks, same scores: the flag only adds the vectors
            assert all(hit.vector is None for hit in plain)
            for hit in hits:
                assert hit.vector is not None and hit.vector.dtype == np.float32 and hit.vector.shape == (DIM,)
                np.testing.assert_allclose(hit.vector, stored[hit.chunk.chunk_id], rtol=0, atol=1e-6)
                assert float(np.linalg.norm(hit.vector)) == pytest.approx(1.0, abs=1e-5)
        for hit in with_vectors[0]:  # dense: score = (1 + cosine) / 2 of the returned vector
            assert hit.score == pytest.approx((1.0 + float(hit.vector @ vector)) / 2.0, abs=1e-3)


# --------------------------------------------------------------------------- tenants and ACLs

ACME_ANYONE = AccessFilter("acme", ("*", "user:zoe"))
GLOBEX_ANYONE = AccessFilter("globex", ("*", "user:zoe"))


async def search_every_mode(
    backend: SearchBackend, query: str, vector: np.ndarray, k: int, access: AccessFilter, filters=None
) -> dict[str, list[ScoredChunk]]:
    return {
        "dense": await backend.search_dense(vector, k, filters, access=access),
        "bm25": await backend.search_bm25(query, k, filters, access=access),
        "min_max": await backend.search_hybrid(query, vector, k, filters, MIN_MAX, access=access),
        "rrf": await backend.search_hybrid(query, vector, k, filters, RRF, access=access),
    }


async def test_a_tenant_searches_lists_and_deletes_only_its_own_documents(loaded: SearchBackend, embedder, corpus):
    tenant_of = {doc_id: tenant for doc_id, tenant, _, _ in corpus}
    query = "volcano lava magma eruption the and of"  # globex's best match; stopwords reach every document
    vector = query_vector(embedder, query)
    for access, tenant in ((ACME_ANYONE, "acme"), (GLOBEX_ANYONE, "globex")):
        for mode, hits in (await search_every_mode(loaded, query, vector, CORPUS_SIZE, access)).items():
            assert hits, mode
            assert {tenant_of[d] for d in doc_ids(hits)} == {tenant}, mode
            assert {hit.chunk.tenant for hit in hits} == {tenant}, mode
        listed = [info.doc_id for info in await loaded.list_documents(tenant=tenant)]
        assert listed == sorted(d for d, t in tenant_of.items() if t == tenant)
    # Another tenant's document is unknown to the caller: nothing deleted.
    assert await loaded.delete_document("volcanoes", tenant="acme") == 0
    assert await loaded.document_chunk_ids("volcanoes", tenant="acme") == set()
    assert await loaded.document_fingerprint("volcanoes", tenant="acme") is None
    assert "volcanoes" in doc_ids(await loaded.search_bm25("volcano", 3, access=GLOBEX_ANYONE))
    assert await loaded.delete_document("volcanoes", tenant="globex") == 1
    assert await loaded.search_bm25("volcano", 3, access=GLOBEX_ANYONE) == []


async def test_two_tenants_may_hold_the_same_document_id(backend: SearchBackend, embedder):
    texts = {"acme": "Acme's README: rockets and anvils.", "globex": "Globex's README: hammocks and magnets."}
    chunks = [
        dataclasses.replace(chunk("README.md", 0, text), chunk_id=f"README.md:0:{tenant}", tenant=tenant, content_hash="h")
        for tenant, text in texts.items()
    ]
    await backend.upsert(chunks, embedder.encode_documents(list(texts.values())))
    assert await backend.document_chunk_ids("README.md", tenant="acme") == {"README.md:0:acme"}
    assert await backend.documents_with_content(["h"], tenant="acme") == {"h": ["README.md"]}
    assert await backend.documents_with_content(["h"], tenant="initech") == {}
    assert await backend.delete_document("README.md", tenant="acme") == 1
    assert [h.chunk.text for h in await backend.search_bm25("readme", 5, access=GLOBEX_ANYONE)] == [texts["globex"]]
    assert await backend.search_bm25("readme", 5, access=ACME_ANYONE) == []
    assert [info.doc_id for info in await backend.list_documents(tenant="globex")] == ["README.md"]


async def test_the_document_view_lists_readers_and_hides_unreadable_documents(backend: SearchBackend, embedder):
    """What the write rule and the listings read (issue 29): each document's readers, and the list and
    the content lookup within an access filter (a filter hiding everything must not pass: the
    readable ones are asserted present)."""
    documents = {
        "payroll": ("Payroll bands of the geology department.", ["group:finance"], "acme"),
        "memo": ("A memo to ann about the geology field trip.", ["user:ann"], "acme"),
        "handbook": ("The geology department handbook.", ["*"], "acme"),
        "nobody": ("A document whose ACL names no one.", [], "acme"),
        "globex-payroll": ("Globex payroll bands.", ["group:finance"], "globex"),
    }
    chunks = [
        dataclasses.replace(chunk(doc_id, 0, text), readers=readers, tenant=tenant, content_hash="same")
        for doc_id, (text, readers, tenant) in documents.items()
    ]
    await backend.upsert(chunks, embedder.encode_documents([text for text, _, _ in documents.values()]))

    assert await backend.document_readers(["payroll", "memo", "handbook", "nobody", "unknown"], tenant="acme") == {
        "payroll": ["group:finance"], "memo": ["user:ann"], "handbook": ["*"], "nobody": [],
    }
    assert await backend.document_readers(["globex-payroll", "payroll"], tenant="globex") == {
        "globex-payroll": ["group:finance"]
    }
    finance = AccessFilter("acme", ("*", "user:bob", "group:finance"))
    ann = AccessFilter("acme", ("*", "user:ann"))
    listed = lambda found: [info.doc_id for info in found]  # noqa: E731
    assert listed(await backend.list_documents(tenant="acme", access=finance)) == ["handbook", "payroll"]
    assert listed(await backend.list_documents(tenant="acme", access=ann)) == ["handbook", "memo"]
    assert listed(await backend.list_documents(tenant="acme")) == ["handbook", "memo", "nobody", "payroll"]
    assert await backend.documents_with_content(["same"], tenant="acme", access=finance) == {"same": ["handbook", "payroll"]}
    assert await backend.documents_with_content(["same"], tenant="acme", access=ann) == {"same": ["handbook", "memo"]}
    outsider = AccessFilter("acme", ("*", "user:eve"))
    assert await backend.documents_with_content(["same"], tenant="acme", access=AccessFilter("acme", ("user:eve",))) == {}
    assert listed(await backend.list_documents(tenant="acme", access=outsider)) == ["handbook"]


async def test_a_group_only_document_is_found_by_the_group_and_by_no_one_else(backend: SearchBackend, embedder):
    documents = {
        "payroll": ("Payroll bands of the geology department for next year.", ["group:finance"]),
        "memo": ("A memo to ann about the geology field trip budget.", ["user:ann"]),
        "handbook": ("The geology department handbook: field trips, budget, safety.", ["*"]),
        "silent": ("Geology budget notes nobody may read.", []),  # an ACL naming nobody
    }
    chunks = [
        dataclasses.replace(chunk(doc_id, 0, text), tenant="acme", readers=readers)
        for doc_id, (text, readers) in documents.items()
    ]
    await backend.upsert(chunks, embedder.encode_documents([text for text, _ in documents.values()]))
    query = "geology department budget"
    vector = query_vector(embedder, query)
    cases = [
        (AccessFilter("acme", ("*", "user:bob", "group:finance")), {"payroll", "handbook"}),
        (AccessFilter("acme", ("*", "user:ann")), {"memo", "handbook"}),
        (AccessFilter("acme", ("*", "user:carl", "group:sales")), {"handbook"}),
        (AccessFilter("globex", ("*", "user:ann", "group:finance")), set()),
    ]
    for access, readable in cases:
        for mode, hits in (await search_every_mode(backend, query, vector, 10, access)).items():
            assert set(doc_ids(hits)) == readable, (access, mode)


async def test_a_narrow_acl_still_returns_k_readable_hits_in_every_mode(backend: SearchBackend, embedder):
    # 200 chunks of one tenant, 10 of them readable by the group "few": the nearest and best-scoring
    # chunks are mostly unreadable, so a search that filtered afterwards would come back short.
    texts = [f"Maintenance report {i}: pump {i % 7} in hall {i % 11} was inspected and its seals replaced." for i in range(200)]
    readable = {i for i in range(200) if i % 20 == 7}
    chunks = [
        dataclasses.replace(
            chunk(f"report-{i}", 0, text), tenant="acme", readers=["group:few"] if i in readable else ["group:many"]
        )
        for i, text in enumerate(texts)
    ]
    vectors = embedder.encode_documents(texts)
    await backend.upsert(chunks, vectors)
    few = AccessFilter("acme", ("*", "user:ann", "group:few"))
    query = "maintenance report pump seals inspected"
    vector = query_vector(embedder, query)
    readable_ids = {f"report-{i}" for i in readable}
    everyone_top = doc_ids(await backend.search_dense(vector, 5))
    assert not set(everyone_top) <= readable_ids  # the unfiltered top 5 is not what "few" may read
    for mode, hits in (await search_every_mode(backend, query, vector, 5, few)).items():
        assert len(hits) == 5, mode
        assert set(doc_ids(hits)) <= readable_ids, mode
    # Dense: exactly the 5 nearest of the readable chunks.
    cosine = {f"report-{i}": float(vectors[i] @ vector) for i in readable}
    exact = sorted(cosine, key=cosine.get, reverse=True)[:5]
    assert doc_ids(await backend.search_dense(vector, 5, access=few)) == exact
    # Combined with a field filter, access still applies inside the search.
    only = {"doc_id": ["report-7", "report-8", "report-27"]}
    assert sorted(doc_ids(await backend.search_dense(vector, 5, only, access=few))) == ["report-27", "report-7"]
    assert sorted(doc_ids(await backend.search_bm25(query, 5, only, access=few))) == ["report-27", "report-7"]


# --------------------------------------------------------------------------- quality on real data

DATASETS = Path(os.environ.get("RAG_DATASETS_DIR", Path(__file__).resolve().parents[3] / "shared" / "datasets"))
VASWANI = DATASETS / "vaswani"
QUERIES = 20
#: Queries with fewer judged documents make nDCG a coin toss, more make the corpus slow to embed.
JUDGED_PER_QUERY = range(3, 13)
DISTRACTORS = 200
#: Hybrid may trail the better single list by this much nDCG@10 (noise of 20 queries).
TOLERANCE = 0.02


@dataclass
class Collection:
    chunks: list[ChunkRecord]
    vectors: np.ndarray
    queries: dict[str, str]
    qrels: dict[str, set[str]]


def read_vaswani() -> tuple[dict[str, str], dict[str, str], dict[str, set[str]]]:
    corpus = VASWANI / "corpus" / "doc-text.trec"
    docs = dict(re.findall(r"<DOCNO>\s*(\S+)\s*</DOCNO>(.*?)</DOC>", corpus.read_text(), re.S))
    topics = (VASWANI / "query-text.trec").read_text()
    queries = {qid: " ".join(text.split()) for qid, text in re.findall(r"<num>\s*(\S+)\s*</num>\s*<title>(.*?)</title>", topics, re.S)}
    qrels: dict[str, set[str]] = {}
    for line in (VASWANI / "qrels").read_text().splitlines():
        qid, _, docno, rel = line.split()
        if int(rel) > 0:
            qrels.setdefault(qid, set()).add(docno)
    return {d: " ".join(t.split()) for d, t in docs.items()}, queries, qrels


@pytest.fixture(scope="module")
def vaswani(embedder) -> Collection:
    if not (VASWANI / "qrels").exists():
        pytest.skip(f"Vaswani collection not found at {VASWANI} (set RAG_DATASETS_DIR to the shared datasets folder)")
    docs, queries, qrels = read_vaswani()
    qids = sorted((q for q in queries if len(qrels.get(q, ())) in JUDGED_PER_QUERY), key=int)[:QUERIES]
    judged = set().union(*(qrels[q] for q in qids))
    others = sorted(set(docs) - judged, key=int)
    kept = sorted(judged | set(random.Random(7).sample(others, DISTRACTORS)), key=int)
    chunks = [ChunkRecord(chunk_id=f"vaswani-{d}", doc_id=d, text=docs[d], chunk_index=0, language="en") for d in kept]
    vectors = embedder.encode_documents([c.text for c in chunks])
    return Collection(chunks, vectors, {q: queries[q].lower() for q in qids}, {q: qrels[q] for q in qids})


def ndcg_at_10(ranked: list[str], relevant: set[str]) -> float:
    dcg = sum(1.0 / math.log2(rank + 2) for rank, doc in enumerate(ranked[:10]) if doc in relevant)
    ideal = sum(1.0 / math.log2(rank + 2) for rank in range(min(10, len(relevant))))
    return dcg / ideal


async def test_hybrid_is_at_least_as_good_as_either_list_on_vaswani(backend: SearchBackend, vaswani, embedder):
    await backend.upsert(vaswani.chunks, vaswani.vectors)
    vectors = embedder.encode_queries(list(vaswani.queries.values()))
    scores: dict[str, list[float]] = {"dense": [], "bm25": [], "min_max": [], "rrf": []}
    for (qid, query), vector in zip(vaswani.queries.items(), vectors, strict=True):
        runs = {
            "dense": await backend.search_dense(vector, 10),
            # English documents and queries, as ingestion and the query's identification name them.
            "bm25": await backend.search_bm25(query, 10, language="en"),
            "min_max": await backend.search_hybrid(query, vector, 10, None, MIN_MAX, language="en"),
            "rrf": await backend.search_hybrid(query, vector, 10, None, RRF, language="en"),
        }
        for name, hits in runs.items():
            scores[name].append(ndcg_at_10(doc_ids(hits), vaswani.qrels[qid]))
    mean = {name: sum(values) / len(values) for name, values in scores.items()}
    best_single = max(mean["dense"], mean["bm25"])
    print(f"{backend.__class__.__name__} nDCG@10 over {len(vaswani.queries)} Vaswani queries: {mean}")
    for fused in ("min_max", "rrf"):
        assert mean[fused] >= best_single - TOLERANCE, mean


# --------------------------------------------------------------------------- languages
# Each backend analyses a chunk in the neutral fields and, when its language is configured, in that
# language's fields (stemmed, diacritics folded after the stemmer); a query reads the neutral fields and
# those of its language (None or not configured: of every configured language), scores summed.

LANGUAGE_DOCUMENTS = {
    "ro-stocare": ("ro", "Stocare", "Conversațiile utilizatorilor sunt stocate criptat pe serverul facultății."),
    "ro-inscriere": ("ro", "Înscriere", "Studenții se înscriu la cursuri prin secretariatul facultății."),
    "en-storage": ("en", "Storage", "Conversations are stored encrypted in the server's database."),
    "en-kites": ("en", "Kites", "Kites need a steady wind to stay in the air."),
    "de-speicher": ("de", "Speicher", "Die Gespräche werden verschlüsselt in der Datenbank gespeichert."),
    "unknown": (None, "", "12345 67890"),
}


@pytest.fixture
async def multilingual(backend: SearchBackend, embedder) -> SearchBackend:
    chunks = [
        ChunkRecord(chunk_id=f"{doc_id}:0", doc_id=doc_id, text=text, chunk_index=0, title=title,
                    source=f"{doc_id}.txt", language=language)
        for doc_id, (language, title, text) in LANGUAGE_DOCUMENTS.items()
    ]
    await backend.upsert(chunks, embedder.encode_documents([c.text for c in chunks]))
    return backend


@pytest.mark.parametrize(
    "query",
    [
        "Unde este stocată conversația?",  # other inflections than the text's: only stemming matches them
        "Unde este stocata conversatia?",  # typed without diacritics
        "Unde este stocaţă conversaţia?",  # cedilla ş/ţ, as old keyboards write them
    ],
)
@pytest.mark.parametrize("language", ["ro", None])
async def test_a_romanian_question_finds_the_romanian_document_in_any_spelling(multilingual, query, language):
    hits = await multilingual.search_bm25(query, 3, language=language)
    assert doc_ids(hits)[:1] == ["ro-stocare"], doc_ids(hits)


async def test_an_english_question_finds_the_english_document_by_its_stem(multilingual):
    # "storing" / "conversation" never occur as such: the English stemmer matches "stored" / "Conversations".
    for language in ("en", None):
        hits = await multilingual.search_bm25("storing a conversation", 3, language=language)
        assert doc_ids(hits)[:1] == ["en-storage"], (language, doc_ids(hits))


async def test_a_language_not_configured_is_found_by_the_neutral_fields(multilingual, embedder):
    # German is not among LANGUAGES: its chunk is in the neutral fields only, found with or without umlauts.
    for query in ("Gespräche Datenbank", "Gesprache Datenbank"):
        for language in ("de", None):
            hits = await multilingual.search_bm25(query, 3, language=language)
            assert doc_ids(hits)[:1] == ["de-speicher"], (query, language, doc_ids(hits))
    hybrid = await multilingual.search_hybrid(
        "Gespräche Datenbank", query_vector(embedder, "Gespräche Datenbank"), 3, None, MIN_MAX, language="de"
    )
    assert "de-speicher" in doc_ids(hybrid)
    assert doc_ids(await multilingual.search_bm25("12345", 3)) == ["unknown"]


async def test_the_hybrid_lexical_part_reads_the_query_language(multilingual, embedder):
    query = "Unde este stocată conversația?"
    hits = await multilingual.search_hybrid(query, query_vector(embedder, query), 3, None, RRF, language="ro")
    assert "ro-stocare" in doc_ids(hits)


# --------------------------------------------------------------------------- graph: the second hop
# The embedded backend reads the graph from its entity graph, OpenSearch from the chunks' graph_entities
# and graph_title fields (backends/opensearch_graph.py): the same follow-ups, the same answers.

HOP_QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
HOP_DOCUMENTS = {
    "kiss-and-tell": (
        "Kiss and Tell (1945 film)",
        "Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss Archer. "
        "In the film, two teenage girls cause their respective parents much concern.",
    ),
    "shirley-temple": (
        "Shirley Temple",
        "Shirley Temple Black was an American actress, singer and dancer, who later served as Chief of Protocol "
        "of the United States and as United States Ambassador to Ghana and to Czechoslovakia.",
    ),
    "jean-arthur": ("Jean Arthur", "Jean Arthur was an American actress and a star of screwball comedies."),
    **{
        f"film-{i}": (
            f"Comedy film {i}",
            f"Comedy film {i} is a comedy film about a teenage girl and her parents, who played parts in a film of "
            f"{1940 + i}; the woman who portrayed the mother held no position.",
        )
        for i in range(6)
    },
}


def hop_chunk(doc_id: str, text: str | None = None, **fields) -> ChunkRecord:
    title, body = HOP_DOCUMENTS[doc_id]
    body = text if text is not None else body
    return ChunkRecord(
        chunk_id=f"{doc_id}:{hashlib.sha256(body.encode()).hexdigest()[:8]}", doc_id=doc_id, text=body, chunk_index=0, title=title,
        source=f"{doc_id}.txt", **fields,
    )


async def hop_search(backend: SearchBackend, embedder, access: AccessFilter, *, hop: bool, k: int = 3) -> list[str]:
    from rag_retriever.backends.base import GraphOptions

    first = await backend.search_hybrid(HOP_QUESTION, query_vector(embedder, HOP_QUESTION), k, None, MIN_MAX, access=access)
    hits, _ = await backend.graph_search(  # type: ignore[attr-defined]
        HOP_QUESTION, first, k, None, access, with_vectors=False, ppr=False, hop=hop, options=GraphOptions.of(RetrieverSettings())
    )
    return doc_ids(hits)


async def test_the_second_hop_reaches_the_bridge_document_and_follows_re_ingests(backend: SearchBackend, embedder):
    everyone = AccessFilter("default", ("*",))
    chunks = [hop_chunk(doc_id) for doc_id in HOP_DOCUMENTS]
    await backend.upsert(chunks, embedder.encode_documents([c.text for c in chunks]))
    plain = await hop_search(backend, embedder, everyone, hop=False)
    assert plain[0] == "kiss-and-tell" and "shirley-temple" not in plain
    hopped = await hop_search(backend, embedder, everyone, hop=True)
    assert hopped[0] == "kiss-and-tell" and "shirley-temple" in hopped

    # Re-ingesting the first document with another star moves the hop with it: its graph part changed.
    recast = hop_chunk("kiss-and-tell", "Kiss and Tell is a 1945 comedy film starring Jean Arthur as Corliss Archer.")
    await backend.replace_documents(["kiss-and-tell"], [recast], embedder.encode_documents([recast.text]), tenant="default")
    hopped = await hop_search(backend, embedder, everyone, hop=True)
    assert "jean-arthur" in hopped and "shirley-temple" not in hopped

    # A deleted document is neither counted nor found any more.
    await backend.delete_document("jean-arthur")
    assert "jean-arthur" not in await hop_search(backend, embedder, everyone, hop=True, k=10)


async def test_the_second_hop_never_returns_what_the_caller_may_not_read(backend: SearchBackend, embedder):
    chunks = [
        hop_chunk(doc_id, tenant="acme", readers=["user:ann"] if doc_id == "shirley-temple" else ["*"])
        for doc_id in HOP_DOCUMENTS
    ]
    await backend.upsert(chunks, embedder.encode_documents([c.text for c in chunks]))
    ann = AccessFilter("acme", ("*", "user:ann"))
    bob = AccessFilter("acme", ("*", "user:bob"))
    assert "shirley-temple" in await hop_search(backend, embedder, ann, hop=True, k=10)
    assert "shirley-temple" not in await hop_search(backend, embedder, bob, hop=True, k=10)
    assert await hop_search(backend, embedder, AccessFilter("globex", ("*",)), hop=True) == []
