"""SearchService over the fixed corpus: each mode finds the expected document, scores as documented."""

from __future__ import annotations

from collections.abc import AsyncIterator

import numpy as np
import pytest
from pydantic import ValidationError

from rag_common.schemas import DocumentIn, SearchRequest
from rag_retriever.document_access import DocumentAccess
from rag_retriever.backends.base import AccessFilter, FusionSettings
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.learned_fusion import FusionModel
from rag_retriever.locking import ReadWriteLock
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from retriever_builders import HNSW, embedded_ingestor, settings_chunker


@pytest.fixture(scope="module")
async def indexed(
    tmp_path_factory, embedder, tokenizer, corpus_documents: list[DocumentIn]
) -> AsyncIterator[tuple[EmbeddedBackend, ReadWriteLock]]:
    backend = EmbeddedBackend(tmp_path_factory.mktemp("search") / "index", dim=embedder.dim, hnsw=HNSW, model_id=embedder.model_id)
    lock = ReadWriteLock()
    # One tenant ("corp") holding the whole corpus, so every search sees all of it.
    documents = [document.model_copy(update={"metadata": {}}) for document in corpus_documents]
    result = await embedded_ingestor(backend, embedder, settings_chunker(tokenizer), lock).ingest(documents, access=DocumentAccess.managing("corp"))
    assert result.documents == len(corpus_documents)
    yield backend, lock
    await backend.close()


#: Everyone of the tenant holding the corpus.
CORP = AccessFilter("corp", ("*", "user:ann"))


#: What a deployment gets by default: the settings are the one source.
SETTINGS = RetrieverSettings()


def service(indexed, embedder, fusion: str = "min_max", **kwargs) -> SearchService:
    """As the runtime composes it over the embedded backend (its graph search injected)."""
    backend, lock = indexed
    composed = {"default_top_k": SETTINGS.default_top_k, "graph": GraphDefaults.of(SETTINGS), "graph_searcher": backend}
    return SearchService(backend, embedder, lock, fusion=FusionSettings(fusion, SETTINGS.hybrid_dense_weight), **{**composed, **kwargs})


#: Paraphrases sharing no useful word with their document: BM25 misses them, dense finds them.
PARAPHRASES = [
    ("fermented loaf with a tangy taste", "sourdough"),
    ("mountain spewing molten rock", "volcanoes"),
    ("getting fit for a 42 km footrace", "marathon"),
]

CASES = [
    # Keyword queries: BM25 is at home here.
    ("bm25", "sourdough starter hydration", "sourdough"),
    ("bm25", "SYN-ACK handshake", "tcp"),
    ("bm25", "Sicilian Defence", "chess"),
    *(("dense", query, expected) for query, expected in PARAPHRASES),
    ("dense", "How do plants make their food from sunlight?", "photosynthesis"),
    # Hybrid: a mix of both.
    ("hybrid", "GIL threads bytecode", "python-gil"),
    ("hybrid", "what happens when a massive star collapses", "black-holes"),
    ("hybrid", "matcha whisk ritual", "tea-ceremony"),
    ("hybrid", "long run before the race", "marathon"),
]


CASES_WITH_FUSION = [
    (mode, query, expected, fusion)
    for mode, query, expected in CASES
    for fusion in (("min_max", "rrf") if mode == "hybrid" else ("min_max",))
]


@pytest.mark.parametrize(("mode", "query", "expected", "fusion"), CASES_WITH_FUSION)
async def test_each_mode_ranks_the_expected_document_first(indexed, embedder, mode, query, expected, fusion):
    response = await service(indexed, embedder, fusion).search(SearchRequest(query=query, mode=mode, top_k=3), CORP)
    assert response.mode == mode
    assert response.passages[0].doc_id == expected, [p.doc_id for p in response.passages]


@pytest.mark.parametrize(("query", "expected"), PARAPHRASES)
async def test_bm25_misses_the_paraphrases_dense_finds(indexed, embedder, query, expected):
    response = await service(indexed, embedder).search(SearchRequest(query=query, mode="bm25", top_k=1), CORP)
    assert [p.doc_id for p in response.passages] != [expected]


async def test_scores_are_the_modes_scores(indexed, embedder):
    search = service(indexed, embedder)
    for mode in ("dense", "hybrid"):
        response = await search.search(SearchRequest(query="volcanic eruption", mode=mode, top_k=12), CORP)
        scores = [p.score for p in response.passages]
        assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    hybrid = await search.search(SearchRequest(query="volcanic eruption", mode="hybrid", top_k=12), CORP)
    assert hybrid.passages[0].score == pytest.approx(1.0)  # best in both lists
    bm25 = await search.search(SearchRequest(query="volcanic eruption", mode="bm25", top_k=12), CORP)
    assert bm25.passages[0].score > 1.0  # raw BM25, not normalised
    rrf = await service(indexed, embedder, "rrf").search(SearchRequest(query="volcanic eruption", top_k=12), CORP)
    assert rrf.passages[0].score == pytest.approx(2 / 61)


async def test_passages_carry_the_chunk_fields(indexed, embedder):
    response = await service(indexed, embedder).search(SearchRequest(query="waggle dance", mode="bm25", top_k=1), CORP)
    [passage] = response.passages
    assert passage.doc_id == "honeybees" and passage.title == "Honeybees" and passage.source == "honeybees.txt"
    assert passage.chunk_id.startswith("honeybees:0:")
    assert passage.metadata == {"content_type": "text/plain"}


async def test_only_dense_and_hybrid_embed_the_query(indexed, embedder):
    search = service(indexed, embedder)
    bm25 = await search.search(SearchRequest(query="lava", mode="bm25"), CORP)
    hybrid = await search.search(SearchRequest(query="lava", mode="hybrid"), CORP)
    assert set(bm25.timings_ms) == {"search", "total"}
    # Hybrid fusion happens inside the backend (server-side on OpenSearch), so it is part of "search".
    assert set(hybrid.timings_ms) == {"embed", "search", "total"}


async def test_filters_and_default_top_k(indexed, embedder):
    search = service(indexed, embedder, default_top_k=4)
    response = await search.search(SearchRequest(query="energy", filters={"tenant": "corp"}), CORP)
    assert len(response.passages) == 4
    assert (await search.search(SearchRequest(query="energy", filters={"tenant": "acme"}), CORP)).passages == []
    response = await search.search(SearchRequest(query="energy", top_k=2, filters={"doc_id": ["jazz", "chess"]}), CORP)
    assert sorted(p.doc_id for p in response.passages) == ["chess", "jazz"]


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
async def test_another_tenant_sees_nothing_of_the_corpus(indexed, embedder, mode):
    search = service(indexed, embedder)
    assert len((await search.search(SearchRequest(query="volcano lava the", mode=mode, top_k=5), CORP)).passages) == 5
    outsider = AccessFilter("globex", ("*", "user:ann"))
    assert (await search.search(SearchRequest(query="volcano lava the", mode=mode, top_k=5), outsider)).passages == []


def test_unknown_filter_fields_and_empty_value_lists_are_refused_by_the_wire_schema():
    # Issue 12: an unknown field used to pass the schema and come back as an undocumented 400.
    with pytest.raises(ValidationError, match="'doc_id', 'source', 'tenant' or 'content_type'"):
        SearchRequest(query="lava", filters={"author": "x"})
    with pytest.raises(ValidationError, match="at least 1 item"):
        SearchRequest(query="lava", filters={"tenant": []})
    schema = SearchRequest.model_json_schema()["properties"]["filters"]
    assert schema["propertyNames"] == {"enum": ["doc_id", "source", "tenant", "content_type"]}


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
async def test_include_embeddings_returns_the_query_and_passage_vectors(indexed, embedder, mode):
    search = service(indexed, embedder)
    query = "the queen bee and her colony"  # "the", "and": every document has a BM25 hit
    response = await search.search(SearchRequest(query=query, mode=mode, top_k=4, include_embeddings=True), CORP)
    plain = await search.search(SearchRequest(query=query, mode=mode, top_k=4), CORP)

    expected_query = embedder.encode_queries([query])[0]
    assert response.query_embedding == expected_query.tolist()  # the float32 values, as Python floats
    assert "embed" in response.timings_ms  # bm25 embeds the query for this
    backend, _ = indexed
    stored = {hit.chunk.chunk_id: hit.vector for hit in await backend.search_dense(expected_query, 12, with_vectors=True)}
    assert len(response.passages) == 4
    for passage in response.passages:
        assert all(type(value) is float for value in passage.embedding)
        assert passage.embedding == stored[passage.chunk_id].tolist()

    assert plain.query_embedding is None and all(p.embedding is None for p in plain.passages)
    assert [p.chunk_id for p in plain.passages] == [p.chunk_id for p in response.passages]


async def test_a_backend_that_drops_the_vectors_is_an_error_not_a_silent_null(indexed, embedder):
    backend, lock = indexed

    class NoVectors:
        async def search_bm25(self, query, k, filters=None, *, access=None, with_vectors=False, language=None):
            return await backend.search_bm25(query, k, filters, access=access, language=language)  # ignores with_vectors

    search = SearchService(
        NoVectors(), embedder, lock, fusion=FusionSettings.of(SETTINGS), default_top_k=SETTINGS.default_top_k,  # type: ignore[arg-type]
        graph=GraphDefaults.of(SETTINGS),
    )
    with pytest.raises(RuntimeError, match="without their vectors"):
        await search.search(SearchRequest(query="waggle dance", mode="bm25", include_embeddings=True), CORP)


async def test_abilities_the_backend_lacks_are_reported_not_looked_for(indexed, embedder):
    # Without a graph searcher injected the graph flags are ignored and said to be; learned fusion
    # without a candidate source refuses to run (the settings refuse that pairing before it gets here).
    plain = service(indexed, embedder, graph_searcher=None)
    request = SearchRequest(query="waggle dance", mode="bm25", top_k=2, graph=True, second_hop=True)
    response = await plain.search(request, CORP)
    assert response.timings_ms["graph_unavailable"] == 1 and "graph" not in response.timings_ms
    assert [p.doc_id for p in response.passages][:1] == ["honeybees"]  # the first pass, as it was
    model = FusionModel(("hop_z",), np.zeros(1), np.ones(1), np.ones(1), 0.0, {})
    learned = service(indexed, embedder, learned=model)
    with pytest.raises(RuntimeError, match="learned fusion needs the embedded backend"):
        await learned.search(SearchRequest(query="waggle dance", mode="hybrid", top_k=2), CORP)
