"""Golden tests of the OpenSearch backend's second hop (``backends/opensearch_graph.py``): the real
``OpenSearchBackend`` and opensearch-py client over the recording connection (``opensearch_fake``).
Every body is spelled out: the entity-count aggregation, then one ``_msearch`` of BM25 follow-ups,
each restricted to what the caller may read. DSL checked against the OpenSearch 2.19 documentation
(terms aggregation ``include`` as an exact-value array, ``cardinality``, multi-search NDJSON)."""

from __future__ import annotations

import pytest

from opensearch_fake import FakeCluster, hit, hits_answer
from rag_common.schemas import SearchRequest
from rag_retriever.backends.base import AccessFilter, FusionSettings, GraphOptions
from rag_retriever.backends.opensearch import OpenSearchBackend
from rag_retriever.backends.opensearch_requests import (
    EntityCounts,
    IndexConfig,
    entity_stats_body,
    entity_stats_from,
    follow_up_msearch_body,
)
from rag_retriever.locking import ReadWriteLock
from rag_retriever.records import ChunkRecord, ScoredChunk
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings

#: No analysed language: a BM25 query reads the neutral fields alone (test_retriever_opensearch_languages
#: pins the language fields).
CONFIG = IndexConfig.of(RetrieverSettings(opensearch_index="rag-chunks"), dim=4, model_id="test-model", languages=())
QUERY = "Who played Corliss Archer?"
ANN = AccessFilter("acme", ("*", "user:ann"))
#: The graph options a deployment gets by default (the settings are their one source).
OPTIONS = GraphOptions.of(RetrieverSettings())
ANN_CLAUSES = [{"term": {"tenant": "acme"}}, {"terms": {"readers": ["*", "user:ann"]}}]


def chunk(doc_id: str, title: str, text: str) -> ChunkRecord:
    return ChunkRecord(chunk_id=f"{doc_id}:0", doc_id=doc_id, text=text, chunk_index=0, title=title,
                       source=f"{doc_id}.txt", tenant="acme")


KISS = chunk("kiss", "Kiss and Tell (1945 film)", "Kiss and Tell is a 1945 American comedy film starring Shirley Temple as Corliss Archer.")
FILM = chunk("film-1", "Comedy film 1", "Comedy film 1 is a comedy film.")
TEMPLE = chunk("temple", "Shirley Temple", "Shirley Temple served as United States Ambassador to Ghana.")
#: The query's spans and n-grams, and the two passages' entities (the title "kiss and tell" is not one).
NAMES = [
    "american", "comedy", "corliss archer", "played corliss", "played corliss archer", "shirley temple",
    "who played", "who played corliss", "who played corliss archer",
]
STATS_BODY = {
    "size": 0,
    "track_total_hits": False,
    "query": {
        "bool": {
            "should": [{"terms": {"graph_entities": NAMES}}, {"terms": {"graph_title": NAMES}}],
            "minimum_should_match": 1,
        }
    },
    "aggs": {
        "entities": {"terms": {"field": "graph_entities", "include": NAMES, "size": 9}},
        "titles": {
            "terms": {"field": "graph_title", "include": NAMES, "size": 9},
            "aggs": {"documents": {"cardinality": {"field": "doc_id"}}},
        },
    },
}
#: corliss archer: one chunk (the query's entity); shirley temple: two chunks and one document's title;
#: american: a hub (more than entity_max_chunks = 50); comedy: three chunks.
STATS_ANSWER = {
    "hits": {"hits": []},
    "aggregations": {
        "entities": {"buckets": [
            {"key": "american", "doc_count": 51}, {"key": "comedy", "doc_count": 3},
            {"key": "corliss archer", "doc_count": 1}, {"key": "shirley temple", "doc_count": 2},
        ]},
        "titles": {"buckets": [{"key": "shirley temple", "doc_count": 1, "documents": {"value": 1}}]},
    },
}


def follow_up(name: str) -> dict:
    return {
        "size": 3,
        "_source": {"excludes": ["embedding", "sentence_vectors"]},
        "query": {
            "bool": {
                "must": [{"multi_match": {"query": name, "fields": ["text", "title^2"], "type": "most_fields"}}],
                "filter": ANN_CLAUSES,
            }
        },
    }


def source(record: ChunkRecord) -> dict:
    return {key: value for key, value in record.to_payload().items() if value is not None}


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
async def backend(cluster: FakeCluster):
    opened = OpenSearchBackend(cluster.client(), CONFIG, fusion=FusionSettings.of(RetrieverSettings()))
    yield opened
    await opened.close()


def test_entity_counts_answer_the_graph_questions():
    counts = entity_stats_from(STATS_ANSWER)
    assert counts == EntityCounts(
        {"american": 51, "comedy": 3, "corliss archer": 1, "shirley temple": 2}, {"shirley temple": 1}
    )
    assert counts.entity_degree("shirley temple") == 3 and counts.is_title("shirley temple")
    assert counts.is_entity("comedy") and not counts.is_title("comedy")
    assert not counts.is_entity("who played") and counts.entity_degree("who played") == 0
    assert entity_stats_body(reversed(NAMES)) == STATS_BODY  # sorted, each once


async def test_the_hop_counts_entities_then_sends_its_follow_ups_in_one_msearch(backend, cluster):
    cluster.searches.append(STATS_ANSWER)
    cluster.routes[("POST", "/rag-chunks/_msearch")] = (
        200, {"took": 3, "responses": [hits_answer([hit(source(TEMPLE), 8.0)]), hits_answer([hit(source(FILM), 2.0)])]},
    )
    first = [ScoredChunk(KISS, 10.0), ScoredChunk(FILM, 5.0)]
    hits, info = await backend.graph_search(
        QUERY, first, 3, None, ANN, with_vectors=False, ppr=False, hop=True, options=OPTIONS
    )
    assert [(c.method, c.path, c.params, c.body) for c in cluster.calls] == [
        ("POST", "/rag-chunks/_search", {}, STATS_BODY),
        # shirley temple (a title) first; american is a hub, corliss archer the query's own; then the
        # second passage's comedy.
        ("POST", "/rag-chunks/_msearch", {}, [{}, follow_up("shirley temple"), {}, follow_up("comedy")]),
    ]
    # kiss 1.0; temple 0.9 x its parent's 1.0 x 8/8; film keeps its own 0.5 over 0.9 x 0.5 x 2/2.
    assert [(hit.chunk.doc_id, round(hit.score, 6)) for hit in hits] == [("kiss", 1.0), ("temple", 0.9), ("film-1", 0.5)]
    assert info == {"query_entities": 1, "hops": 2}


async def test_no_follow_up_means_no_msearch(backend, cluster):
    cluster.searches.append({"aggregations": {"entities": {"buckets": []}, "titles": {"buckets": []}}})
    hits, info = await backend.graph_search(
        QUERY, [ScoredChunk(KISS, 2.0)], 3, None, ANN, with_vectors=False, ppr=False, hop=True, options=OPTIONS
    )
    assert [c.path for c in cluster.calls] == ["/rag-chunks/_search"]
    assert [(hit.chunk.doc_id, hit.score) for hit in hits] == [("kiss", 1.0)] and info["hops"] == 0


async def test_a_failed_follow_up_fails_the_search(backend, cluster):
    cluster.searches.append(STATS_ANSWER)
    cluster.routes[("POST", "/rag-chunks/_msearch")] = (
        200, {"responses": [{"error": {"type": "search_phase_execution_exception"}, "status": 500}, hits_answer([])]},
    )
    with pytest.raises(RuntimeError, match="follow-up search failed"):
        await backend.graph_search(
            QUERY, [ScoredChunk(KISS, 10.0), ScoredChunk(FILM, 5.0)], 3, None, ANN,
            with_vectors=False, ppr=False, hop=True, options=OPTIONS,
        )


def test_follow_ups_carry_filters_and_vectors_like_any_bm25_search():
    lines = follow_up_msearch_body(
        ["ghana"], 2, {"content_type": ["text/plain"]}, access=None, with_vectors=True, fields=["text", "title^2"]
    )
    assert lines == [
        {},
        {
            "size": 2,
            "_source": {"excludes": ["sentence_vectors"]},  # follow-ups never carry sentence vectors
            "query": {
                "bool": {
                    "must": [{"multi_match": {"query": "ghana", "fields": ["text", "title^2"], "type": "most_fields"}}],
                    "filter": [{"terms": {"content_type": ["text/plain"]}}],
                }
            },
        },
    ]


async def test_the_service_runs_the_hop_on_opensearch_and_says_pagerank_is_unavailable(backend, cluster):
    cluster.searches.extend([hits_answer([hit(source(KISS), 10.0), hit(source(FILM), 5.0)]), STATS_ANSWER])
    cluster.routes[("POST", "/rag-chunks/_msearch")] = (
        200, {"responses": [hits_answer([hit(source(TEMPLE), 8.0)]), hits_answer([])]},
    )
    on = RetrieverSettings(graph_ppr=True, graph_second_hop=True)
    service = SearchService(
        backend, None, ReadWriteLock(), fusion=FusionSettings.of(on), default_top_k=on.default_top_k,  # type: ignore[arg-type]
        graph=GraphDefaults.of(on), graph_searcher=backend,
    )
    response = await service.search(SearchRequest(query=QUERY, top_k=3, mode="bm25"), ANN)
    assert [passage.doc_id for passage in response.passages] == ["kiss", "temple", "film-1"]
    assert "graph" in response.timings_ms and response.timings_ms["graph_ppr_unavailable"] == 1
    assert "graph_unavailable" not in response.timings_ms

    cluster.calls.clear()
    cluster.searches.append(hits_answer([hit(source(KISS), 10.0)]))
    response = await service.search(SearchRequest(query=QUERY, top_k=3, mode="bm25", second_hop=False), ANN)
    assert [c.path for c in cluster.calls] == ["/rag-chunks/_search"]  # PageRank alone: no graph request
    assert response.timings_ms["graph_ppr_unavailable"] == 1
