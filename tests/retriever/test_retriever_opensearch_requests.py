"""Golden tests of the OpenSearch backend: the real ``OpenSearchBackend`` and the real opensearch-py
client, with only the HTTP connection replaced by a recorder (``opensearch_fake``). Every expected
body is spelled out literally: a change to the DSL must show up here as a diff.

DSL checked against the OpenSearch 2.19 documentation (knn_vector / methods and engines, k-NN query,
efficient filtering, hybrid query, normalization-processor, score-ranker-processor, index templates,
aliases); a live cluster run is ``make test-opensearch``.
"""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime

import numpy as np
import pytest
from opensearch_fake import FakeCluster, hit, hits_answer

from rag_common.schemas import DocumentIn, DocumentInfo
from rag_retriever.backends.base import (
    AccessFilter,
    ChunkWriteError,
    ChunkWriteFailure,
    FusionSettings,
    HnswParams,
    IndexMismatchError,
    normalise_filters,
)
from rag_retriever.backends.opensearch import PAGE_SIZE, OpenSearchBackend
from rag_retriever.backends.opensearch_requests import IndexConfig, pipeline_name
from rag_retriever.records import ChunkRecord, ScoredChunk
from rag_retriever.settings import RetrieverSettings
from retriever_builders import build_ingestor, settings_chunker

ALIAS = "rag-chunks"
NOW = datetime(2025, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
STAMP = "2025-01-02T03:04:05.678+00:00"
PHYSICAL = "rag-chunks-v6-20250102-030405"
#: The analysed languages (RAG_LANGUAGES) the pinned bodies assume: Romanian first, then English.
LANGS = ("ro", "en")
CONFIG = IndexConfig.of(
    RetrieverSettings(opensearch_index=ALIAS, hnsw_ef_search=100), dim=4, model_id="test-model", languages=LANGS
)
#: The fusion the backend sets up its pipeline for when it opens (the pinned bodies assume it).
MIN_MAX = FusionSettings("min_max", 0.5)
QUERY_VECTOR = np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)
SOURCE_EXCLUDES = {"excludes": ["embedding", "sentence_vectors"]}
#: With the vector (``with_vectors``): everything but the sentence vectors.
SOURCE_WITH_VECTOR = {"excludes": ["sentence_vectors"]}
ACME = {"tenant": ["acme"]}
KNN = {"vector": [0.5, 0.5, 0.5, 0.5], "k": 5, "method_parameters": {"ef_search": 100}}
ACME_FILTER = {"bool": {"filter": [{"terms": {"tenant": ["acme"]}}]}}
#: The neutral fields, then every configured language's (a search that names no language).
ALL_FIELDS = ["text", "title^2", "text_ro", "title_ro^2", "text_en", "title_en^2"]
MULTI_MATCH = {"multi_match": {"query": "volcano lava", "fields": ALL_FIELDS, "type": "most_fields"}}
#: The mapping of the sentence vectors (template version 4): stored, never indexed.
SENTENCE_VECTORS_MAPPING = {"sentence_vectors": {"type": "object", "enabled": False}}
#: Ann of acme, in the geo group: what she may read, and the clauses that say it in every query.
ANN = AccessFilter("acme", ("*", "user:ann", "group:geo"))
ANN_CLAUSES = [{"term": {"tenant": "acme"}}, {"terms": {"readers": ["*", "user:ann", "group:geo"]}}]


def chunk(doc_id: str, index: int, text: str, **fields) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=f"{doc_id}:{index}:abc", doc_id=doc_id, text=text, chunk_index=index, title=doc_id.title(),
        source=f"{doc_id}.txt", doc_fingerprint="fp-" + doc_id, **fields,
    )


VOLCANO_HASH = "9a" * 32
VOLCANO = chunk("volcanoes", 0, "Lava rises.", page=3, section_path=["Geology", "Volcanoes"], content_hash=VOLCANO_HASH,
                metadata={"tenant": "acme", "content_type": "text/markdown", "acl": ["geo", "staff"], "year": 2024},
                tenant="acme", readers=["group:geo", "user:ann"])
JAZZ = chunk("jazz", 0, "| Style | Era |", table_id="jazz-t1", metadata={"content_type": "text/plain"}, tenant="globex")


def source_of(record: ChunkRecord) -> dict:
    """What the backend stores for ``record`` (minus the vector), as OpenSearch returns it."""
    source = {
        "chunk_id": record.chunk_id, "doc_id": record.doc_id, "text": record.text, "title": record.title,
        "source": record.source, "chunk_index": record.chunk_index, "section_path": record.section_path,
        "doc_fingerprint": record.doc_fingerprint, "metadata": record.metadata,
        "tenant": record.tenant, "readers": record.readers,
        "created_at": STAMP, "updated_at": STAMP,
    }
    if record.page is not None:
        source["page"] = record.page
    if record.table_id is not None:
        source["table_id"] = record.table_id
    if record.content_hash is not None:
        source["content_hash"] = record.content_hash
    if record.language is not None:
        source["language"] = record.language
    return source


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
async def backend(cluster: FakeCluster):
    opened = OpenSearchBackend(cluster.client(), CONFIG, fusion=MIN_MAX, clock=lambda: NOW)
    yield opened
    await opened.close()


# --------------------------------------------------------------------------- index, template, pipelines

#: The analyzers of RAG_LANGUAGES ro, en: neutral (no stemming) and one per language, each stemming
#: with Snowball (``porter2`` is Snowball English; OpenSearch's ``english`` stemmer is Porter 1) and
#: folding diacritics after the stemmer.
EXPECTED_ANALYSIS = {
    "filter": {
        "rag_ro_stop": {"type": "stop", "stopwords": "_romanian_"},
        "rag_ro_stemmer": {"type": "stemmer", "language": "romanian"},
        "rag_en_stop": {"type": "stop", "stopwords": "_english_"},
        "rag_en_stemmer": {"type": "stemmer", "language": "porter2"},
    },
    "analyzer": {
        "rag_neutral": {"type": "custom", "tokenizer": "standard", "filter": ["lowercase", "asciifolding"]},
        "rag_ro": {
            "type": "custom", "tokenizer": "standard",
            "filter": ["lowercase", "rag_ro_stop", "rag_ro_stemmer", "asciifolding"],
        },
        "rag_en": {
            "type": "custom", "tokenizer": "standard",
            "filter": ["lowercase", "rag_en_stop", "rag_en_stemmer", "asciifolding"],
        },
    },
}

EXPECTED_TEMPLATE = {
    "index_patterns": ["rag-chunks-v*"],
    "priority": 100,
    "version": 6,
    "template": {
        "settings": {"index": {"knn": True, "knn.algo_param.ef_search": 100}, "analysis": EXPECTED_ANALYSIS},
        "mappings": {
            "dynamic": "strict",
            "_meta": {"template_version": 6, "model_id": "test-model", "dim": 4, "languages": ["ro", "en"]},
            "properties": {
                "embedding": {
                    "type": "knn_vector",
                    "dimension": 4,
                    "method": {
                        "name": "hnsw",
                        "engine": "faiss",
                        "space_type": "cosinesimil",
                        "parameters": {"m": 16, "ef_construction": 200},
                    },
                },
                "text": {"type": "text", "analyzer": "rag_neutral"},
                "title": {
                    "type": "text",
                    "analyzer": "rag_neutral",
                    "fields": {"keyword": {"type": "keyword", "ignore_above": 256}},
                },
                # Routed: filled only for chunks of that language.
                "text_ro": {"type": "text", "analyzer": "rag_ro"},
                "title_ro": {"type": "text", "analyzer": "rag_ro"},
                "text_en": {"type": "text", "analyzer": "rag_en"},
                "title_en": {"type": "text", "analyzer": "rag_en"},
                "chunk_id": {"type": "keyword"},
                "doc_id": {"type": "keyword"},
                "source": {"type": "keyword"},
                "section_path": {"type": "keyword"},
                "content_type": {"type": "keyword"},
                "tenant": {"type": "keyword"},
                "acl": {"type": "keyword"},
                "table_id": {"type": "keyword"},
                "doc_fingerprint": {"type": "keyword"},
                "language": {"type": "keyword"},
                "content_hash": {"type": "keyword"},
                "readers": {"type": "keyword"},
                "graph_entities": {"type": "keyword"},
                "graph_title": {"type": "keyword"},
                "sentence_vectors": {"type": "object", "enabled": False},
                "page": {"type": "integer"},
                "chunk_index": {"type": "integer"},
                "metadata": {"type": "object", "enabled": False},
                "created_at": {"type": "date"},
                "updated_at": {"type": "date"},
            },
        },
    },
}

MIN_MAX_PIPELINE = {
    "description": "min_max then weighted mean of [dense, bm25] = [0.5, 0.5]",
    "phase_results_processors": [
        {
            "normalization-processor": {
                "normalization": {"technique": "min_max"},
                "combination": {"technique": "arithmetic_mean", "parameters": {"weights": [0.5, 0.5]}},
            }
        }
    ],
}


async def test_ensure_index_creates_template_then_index_with_alias_then_pipeline(backend, cluster):
    await backend.ensure_index()

    assert [(c.method, c.path, c.params, c.body) for c in cluster.calls] == [
        ("PUT", "/_index_template/rag-chunks-template", {}, EXPECTED_TEMPLATE),
        ("HEAD", "/_alias/rag-chunks", {}, None),
        # The alias comes with the index in one request: never an index without it.
        ("PUT", f"/{PHYSICAL}", {}, {"aliases": {"rag-chunks": {}}}),
        ("PUT", "/_search/pipeline/rag-chunks-hybrid-minmax", {}, MIN_MAX_PIPELINE),
    ]


@pytest.mark.parametrize(
    ("engine", "space", "m", "ef_construction"), [("lucene", "cosinesimil", 32, 400), ("faiss", "innerproduct", 8, 64)]
)
async def test_template_follows_the_knn_settings(cluster, engine, space, m, ef_construction):
    config = dataclasses.replace(CONFIG, engine=engine, space=space, hnsw=HnswParams(m, ef_construction, ef_search=256))
    await OpenSearchBackend(cluster.client(), config, fusion=MIN_MAX, clock=lambda: NOW).ensure_index()
    template = cluster.requests("PUT", "/_index_template/rag-chunks-template")[0].body["template"]
    assert template["settings"] == {"index": {"knn": True, "knn.algo_param.ef_search": 256}, "analysis": EXPECTED_ANALYSIS}
    assert template["mappings"]["properties"]["embedding"]["method"] == {
        "name": "hnsw", "engine": engine, "space_type": space, "parameters": {"m": m, "ef_construction": ef_construction},
    }


def mapping_answer(dim: int, model_id: str, version: int = 6, languages: list[str] | None = None) -> dict:
    meta = {"template_version": version, "model_id": model_id, "dim": dim}
    if version >= 6:
        meta["languages"] = ["ro", "en"] if languages is None else languages
    return {
        PHYSICAL: {
            "mappings": {
                "_meta": meta,
                "properties": {"embedding": {"type": "knn_vector", "dimension": dim}},
            }
        }
    }


async def test_ensure_index_keeps_an_existing_alias_after_checking_its_vectors(backend, cluster):
    cluster.routes[("HEAD", "/_alias/rag-chunks")] = (200, None)
    cluster.routes[("GET", "/rag-chunks/_mapping")] = (200, mapping_answer(4, "test-model"))
    await backend.ensure_index()
    assert [(c.method, c.path) for c in cluster.calls] == [
        ("PUT", "/_index_template/rag-chunks-template"),
        ("HEAD", "/_alias/rag-chunks"),
        ("GET", "/rag-chunks/_mapping"),
        ("PUT", "/_search/pipeline/rag-chunks-hybrid-minmax"),
    ]


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
async def test_ensure_index_refuses_an_index_from_before_per_language_analysis(backend, cluster, version):
    # Its text and title were analysed in English only and it has no routed fields: every chunk with a
    # language would be rejected ("dynamic": "strict"). Nothing is changed in place; the error says how.
    cluster.routes[("HEAD", "/_alias/rag-chunks")] = (200, None)
    cluster.routes[("GET", "/rag-chunks/_mapping")] = (200, mapping_answer(4, "test-model", version=version))
    with pytest.raises(IndexMismatchError) as refused:
        await backend.ensure_index()
    assert str(refused.value) == (
        f"index {PHYSICAL} (alias rag-chunks) must be reindexed: it has template version {version}, analysed before "
        "per-language fields (version 6). Stop ingestion and run OpenSearchBackend.reindex_into_new_version() "
        "(docs/retriever.md, 'Changing the mapping'): it copies the stored vectors, no re-embedding"
    )
    assert [(c.method, c.path) for c in cluster.calls] == [
        ("PUT", "/_index_template/rag-chunks-template"), ("HEAD", "/_alias/rag-chunks"), ("GET", "/rag-chunks/_mapping"),
    ]


@pytest.mark.parametrize("languages", [["en"], ["ro", "en", "de"], []])
async def test_ensure_index_refuses_an_index_of_other_languages(backend, cluster, languages):
    cluster.routes[("HEAD", "/_alias/rag-chunks")] = (200, None)
    cluster.routes[("GET", "/rag-chunks/_mapping")] = (200, mapping_answer(4, "test-model", languages=languages))
    with pytest.raises(IndexMismatchError, match=re.escape(
        f"must be reindexed: it analyses the languages {sorted(languages)}, RAG_LANGUAGES names ['en', 'ro']"
    )):
        await backend.ensure_index()


async def test_ensure_index_accepts_its_languages_in_any_order(backend, cluster):
    cluster.routes[("HEAD", "/_alias/rag-chunks")] = (200, None)
    cluster.routes[("GET", "/rag-chunks/_mapping")] = (200, mapping_answer(4, "test-model", languages=["en", "ro"]))
    await backend.ensure_index()
    assert cluster.calls[-1].path == "/_search/pipeline/rag-chunks-hybrid-minmax"


async def test_a_later_version_that_only_adds_fields_upgrades_a_version_6_index_in_place(backend, cluster, monkeypatch):
    # The in-place path stays for additive changes: a (hypothetical) version 7 adding one keyword.
    from rag_retriever.backends import opensearch_index

    monkeypatch.setattr(opensearch_index, "TEMPLATE_VERSION", 7)
    monkeypatch.setitem(opensearch_index.ADDED_FIELDS, 7, {"colour": {"type": "keyword"}})
    cluster.routes[("HEAD", "/_alias/rag-chunks")] = (200, None)
    cluster.routes[("GET", "/rag-chunks/_mapping")] = (200, mapping_answer(4, "test-model"))
    await backend.ensure_index()
    assert [(c.method, c.path, c.body) for c in cluster.calls][2:] == [
        ("GET", "/rag-chunks/_mapping", None),
        (
            "PUT", f"/{PHYSICAL}/_mapping",
            {
                "_meta": {"template_version": 7, "model_id": "test-model", "dim": 4, "languages": ["ro", "en"]},
                "properties": {"colour": {"type": "keyword"}},
            },
        ),
        ("PUT", "/_search/pipeline/rag-chunks-hybrid-minmax", MIN_MAX_PIPELINE),
    ]


def test_no_index_from_before_version_6_is_upgraded_in_place():
    from rag_retriever.backends.opensearch_requests import mapping_upgrade_body

    for version in range(7):
        assert mapping_upgrade_body({"_meta": {"template_version": version}}) is None
    assert mapping_upgrade_body({"_meta": {"template_version": 7}}) is None
    assert mapping_upgrade_body({}) is None


@pytest.mark.parametrize(
    ("dim", "model_id", "message"), [(768, "test-model", "768-dimensional"), (4, "other-model", "built with model")]
)
async def test_ensure_index_refuses_an_index_built_for_other_vectors(backend, cluster, dim, model_id, message):
    cluster.routes[("HEAD", "/_alias/rag-chunks")] = (200, None)
    cluster.routes[("GET", "/rag-chunks/_mapping")] = (200, mapping_answer(dim, model_id))
    with pytest.raises(IndexMismatchError, match=message):
        await backend.ensure_index()


@pytest.mark.parametrize(
    ("fusion", "name", "processor"),
    [
        (
            FusionSettings("z_score", dense_weight=0.5),
            "rag-chunks-hybrid-zscore",
            {
                "normalization-processor": {
                    "normalization": {"technique": "z_score"},
                    "combination": {"technique": "arithmetic_mean", "parameters": {"weights": [0.5, 0.5]}},
                }
            },
        ),
        (
            FusionSettings("min_max", dense_weight=0.7),
            "rag-chunks-hybrid-minmax-dense700",
            {
                "normalization-processor": {
                    "normalization": {"technique": "min_max"},
                    "combination": {"technique": "arithmetic_mean", "parameters": {"weights": [0.7, 0.3]}},
                }
            },
        ),
        (
            FusionSettings("rrf", 0.5),
            "rag-chunks-hybrid-rrf",
            {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": 60}}},
        ),
        (
            FusionSettings("rrf", 0.5, rank_constant=20),
            "rag-chunks-hybrid-rrf-k20",
            {"score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": 20}}},
        ),
    ],
)
async def test_each_fusion_has_its_own_pipeline(cluster, fusion, name, processor):
    await OpenSearchBackend(cluster.client(), CONFIG, fusion=fusion, clock=lambda: NOW).ensure_index()
    [put] = cluster.requests("PUT", f"/_search/pipeline/{name}")
    assert put.body["phase_results_processors"] == [processor]
    assert pipeline_name(ALIAS, fusion) == name


# --------------------------------------------------------------------------- queries


async def test_dense_query_filters_inside_the_knn_clause(backend, cluster):
    await backend.search_dense(QUERY_VECTOR, 5, ACME)
    [call] = cluster.calls
    assert (call.method, call.path, call.params) == ("POST", "/rag-chunks/_search", {})
    assert call.body == {
        "size": 5,
        "_source": SOURCE_EXCLUDES,
        "query": {"knn": {"embedding": {**KNN, "filter": ACME_FILTER}}},
    }


async def test_dense_query_raises_ef_search_to_k_and_combines_filter_fields(backend, cluster):
    # Filters reach a backend normalised (the search service's one step): a single value is a list.
    await backend.search_dense(QUERY_VECTOR, 150, normalise_filters({"source": ["a.txt", "b.txt"], "tenant": "acme"}))
    knn = cluster.calls[0].body["query"]["knn"]["embedding"]
    assert (knn["k"], knn["method_parameters"]) == (150, {"ef_search": 150})
    assert knn["filter"] == {
        "bool": {"filter": [{"terms": {"source": ["a.txt", "b.txt"]}}, {"terms": {"tenant": ["acme"]}}]}
    }
    await backend.search_dense(QUERY_VECTOR, 5)
    assert cluster.calls[1].body["query"] == {"knn": {"embedding": KNN}}


async def test_bm25_query_is_multi_match_with_filter_context(backend, cluster):
    await backend.search_bm25("volcano lava", 7, ACME)
    await backend.search_bm25("volcano lava", 7)
    filtered, unfiltered = cluster.calls
    assert (filtered.path, filtered.params) == ("/rag-chunks/_search", {})
    assert filtered.body == {
        "size": 7,
        "_source": SOURCE_EXCLUDES,
        "query": {"bool": {"must": [MULTI_MATCH], "filter": [{"terms": {"tenant": ["acme"]}}]}},
    }
    assert unfiltered.body == {"size": 7, "_source": SOURCE_EXCLUDES, "query": MULTI_MATCH}


async def test_every_query_filters_on_tenant_and_readers_inside_the_search(backend, cluster):
    await backend.search_dense(QUERY_VECTOR, 5, access=ANN)
    await backend.search_dense(QUERY_VECTOR, 5, ACME, access=ANN)
    await backend.search_bm25("volcano lava", 7, access=ANN)
    await backend.search_bm25("volcano lava", 7, {"content_type": ["text/plain"]}, access=ANN)
    await backend.search_hybrid("volcano lava", QUERY_VECTOR, 5, None, FusionSettings("min_max", 0.5), access=ANN)
    dense, dense_filtered, bm25, bm25_filtered, _, hybrid = cluster.calls
    # Inside the knn clause (efficient filtering: k readable hits however narrow the ACL), access first.
    assert dense.body == {
        "size": 5,
        "_source": SOURCE_EXCLUDES,
        "query": {"knn": {"embedding": {**KNN, "filter": {"bool": {"filter": ANN_CLAUSES}}}}},
    }
    assert dense_filtered.body["query"]["knn"]["embedding"]["filter"] == {
        "bool": {"filter": [*ANN_CLAUSES, {"terms": {"tenant": ["acme"]}}]}
    }
    # Filter context of the BM25 bool: membership only, the score untouched.
    assert bm25.body == {
        "size": 7,
        "_source": SOURCE_EXCLUDES,
        "query": {"bool": {"must": [MULTI_MATCH], "filter": ANN_CLAUSES}},
    }
    assert bm25_filtered.body["query"] == {
        "bool": {"must": [MULTI_MATCH], "filter": [*ANN_CLAUSES, {"terms": {"content_type": ["text/plain"]}}]}
    }
    # Both hybrid sub-queries: neither list can bring an unreadable chunk into the fusion.
    assert hybrid.params == {"search_pipeline": "rag-chunks-hybrid-minmax"}
    assert hybrid.body == {
        "size": 50,
        "_source": SOURCE_EXCLUDES,
        "query": {
            "hybrid": {
                "queries": [
                    {"knn": {"embedding": {**KNN, "k": 50, "filter": {"bool": {"filter": ANN_CLAUSES}}}}},
                    {"bool": {"must": [MULTI_MATCH], "filter": ANN_CLAUSES}},
                ]
            }
        },
    }


async def test_hybrid_query_has_dense_then_bm25_each_filtered_and_names_its_pipeline(backend, cluster):
    await backend.search_hybrid("volcano lava", QUERY_VECTOR, 5, ACME, FusionSettings("min_max", 0.5))
    put, search = cluster.calls
    assert (put.method, put.path, put.body) == ("PUT", "/_search/pipeline/rag-chunks-hybrid-minmax", MIN_MAX_PIPELINE)
    assert (search.method, search.path) == ("POST", "/rag-chunks/_search")
    assert search.params == {"search_pipeline": "rag-chunks-hybrid-minmax"}
    # size = candidates per list (max(4k, 50)): what each sub-query feeds the normalisation.
    assert search.body == {
        "size": 50,
        "_source": SOURCE_EXCLUDES,
        "query": {
            "hybrid": {
                "queries": [
                    {"knn": {"embedding": {**KNN, "k": 50, "filter": ACME_FILTER}}},
                    {"bool": {"must": [MULTI_MATCH], "filter": [{"terms": {"tenant": ["acme"]}}]}},
                ]
            }
        },
    }


async def test_every_hybrid_query_is_sent_with_its_search_pipeline(backend, cluster):
    fusions = [FusionSettings("min_max", 0.5), FusionSettings("rrf", 0.5), FusionSettings("z_score", 0.5), FusionSettings("min_max", 0.5), FusionSettings("rrf", 0.5)]
    for fusion in fusions:
        await backend.search_hybrid("lava", QUERY_VECTOR, 3, None, fusion)
    hybrid_calls = [c for c in cluster.calls if c.path.endswith("/_search") and "hybrid" in c.body["query"]]
    assert len(hybrid_calls) == len(fusions)
    assert [c.params.get("search_pipeline") for c in hybrid_calls] == [pipeline_name(ALIAS, f) for f in fusions]
    # Each pipeline is created once, before the first query that names it.
    puts = [c.path.rsplit("/", 1)[1] for c in cluster.requests("PUT")]
    assert puts == ["rag-chunks-hybrid-minmax", "rag-chunks-hybrid-rrf", "rag-chunks-hybrid-zscore"]
    for name in puts:
        first_use = next(i for i, c in enumerate(cluster.calls) if c.params.get("search_pipeline") == name)
        assert cluster.calls.index(cluster.requests("PUT", f"/_search/pipeline/{name}")[0]) < first_use


async def test_with_vectors_every_query_asks_for_all_but_the_sentence_vectors(backend, cluster):
    await backend.search_dense(QUERY_VECTOR, 5, ACME, with_vectors=True)
    await backend.search_bm25("volcano lava", 7, with_vectors=True)
    await backend.search_hybrid("volcano lava", QUERY_VECTOR, 5, None, FusionSettings("min_max", 0.5), with_vectors=True)
    dense, bm25, put, hybrid = cluster.calls
    assert (dense.path, dense.params) == ("/rag-chunks/_search", {})
    assert dense.body == {
        "size": 5,
        "_source": SOURCE_WITH_VECTOR,
        "query": {"knn": {"embedding": {**KNN, "filter": ACME_FILTER}}},
    }
    assert (bm25.path, bm25.params) == ("/rag-chunks/_search", {})
    assert bm25.body == {"size": 7, "_source": SOURCE_WITH_VECTOR, "query": MULTI_MATCH}
    assert put.path == "/_search/pipeline/rag-chunks-hybrid-minmax"
    assert (hybrid.path, hybrid.params) == ("/rag-chunks/_search", {"search_pipeline": "rag-chunks-hybrid-minmax"})
    assert hybrid.body == {
        "size": 50,
        "_source": SOURCE_WITH_VECTOR,
        "query": {"hybrid": {"queries": [{"knn": {"embedding": {**KNN, "k": 50}}}, MULTI_MATCH]}},
    }


async def test_without_vectors_every_query_excludes_the_vector(backend, cluster):
    await backend.search_dense(QUERY_VECTOR, 5, with_vectors=False)
    await backend.search_bm25("volcano lava", 7)
    await backend.search_hybrid("volcano lava", QUERY_VECTOR, 5, None, FusionSettings("min_max", 0.5))
    bodies = [c.body for c in cluster.calls if c.path == "/rag-chunks/_search"]
    assert len(bodies) == 3
    assert [body["_source"] for body in bodies] == [{"excludes": ["embedding", "sentence_vectors"]}] * 3


@pytest.mark.parametrize(
    ("with_vectors", "source"),
    [(False, {"excludes": ["embedding"]}), (True, True)],
)
async def test_with_sentence_vectors_every_query_asks_for_them(backend, cluster, with_vectors, source):
    flags = {"with_vectors": with_vectors, "with_sentence_vectors": True}
    await backend.search_dense(QUERY_VECTOR, 5, **flags)
    await backend.search_bm25("volcano lava", 7, **flags)
    await backend.search_hybrid("volcano lava", QUERY_VECTOR, 5, None, FusionSettings("min_max", 0.5), **flags)
    dense, bm25, _, hybrid = cluster.calls
    assert dense.body == {"size": 5, "_source": source, "query": {"knn": {"embedding": KNN}}}
    assert bm25.body == {"size": 7, "_source": source, "query": MULTI_MATCH}
    assert hybrid.body == {
        "size": 50,
        "_source": source,
        "query": {"hybrid": {"queries": [{"knn": {"embedding": {**KNN, "k": 50}}}, MULTI_MATCH]}},
    }


async def test_unknown_filter_field_is_rejected_before_any_request(backend, cluster):
    # Filters are checked where they are normalised, once, before any backend call (the backends
    # take the normalised form as it is).
    with pytest.raises(ValueError, match="allowed: doc_id, source, tenant, content_type"):
        await backend.search_bm25("lava", 3, normalise_filters({"author": ["x"]}))
    assert cluster.calls == []


# --------------------------------------------------------------------------- answers → ScoredChunk


async def test_hits_become_scored_chunks_with_every_field(backend, cluster):
    cluster.searches.append(hits_answer([hit(source_of(VOLCANO), 0.9), hit(source_of(JAZZ), 0.55)]))
    cluster.searches.append(hits_answer([hit(source_of(VOLCANO), 7.25)]))
    dense = await backend.search_dense(QUERY_VECTOR, 2)
    bm25 = await backend.search_bm25("lava", 2)
    assert dense == [ScoredChunk(VOLCANO, 0.9), ScoredChunk(JAZZ, 0.55)]
    assert bm25 == [ScoredChunk(VOLCANO, 7.25)]  # raw BM25, not normalised
    assert dense[0].to_passage().section_path == ["Geology", "Volcanoes"]


#: float32 values whose shortest decimal form is long: rounding anywhere on the way would show.
VOLCANO_VECTOR = np.array([0.1, -0.7, 1 / 3, 0.6], dtype=np.float32)
JAZZ_VECTOR = np.array([0.0, 0.5, 0.5, 0.70710677], dtype=np.float32)


def with_vector(record: ChunkRecord, vector: np.ndarray) -> dict:
    """``source_of`` plus the vector as the backend wrote it (``chunk_source``: float32 → float)."""
    return {**source_of(record), "embedding": vector.tolist()}


async def test_hits_fetched_with_vectors_carry_the_exact_stored_float32_vectors(backend, cluster):
    cluster.searches.append(
        hits_answer([hit(with_vector(VOLCANO, VOLCANO_VECTOR), 0.9), hit(with_vector(JAZZ, JAZZ_VECTOR), 0.55)])
    )
    cluster.searches.append(hits_answer([hit(with_vector(JAZZ, JAZZ_VECTOR), 7.25)]))
    dense = await backend.search_dense(QUERY_VECTOR, 2, with_vectors=True)
    bm25 = await backend.search_bm25("jazz", 1, with_vectors=True)

    assert dense == [ScoredChunk(VOLCANO, 0.9), ScoredChunk(JAZZ, 0.55)]  # the chunk fields stay as they were
    assert bm25 == [ScoredChunk(JAZZ, 7.25)]
    for scored, expected in [(dense[0], VOLCANO_VECTOR), (dense[1], JAZZ_VECTOR), (bm25[0], JAZZ_VECTOR)]:
        assert scored.vector.dtype == np.float32
        assert scored.vector.tobytes() == expected.tobytes()
    passage = dense[0].to_passage()
    assert passage.embedding == [0.10000000149011612, -0.699999988079071, 0.3333333432674408, 0.6000000238418579]
    assert all(type(value) is float for value in passage.embedding)


async def test_stored_vectors_round_trip_from_upsert_to_search_bit_for_bit(backend, cluster):
    vectors = np.random.default_rng(3).normal(size=(2, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    await backend.upsert([VOLCANO, JAZZ], vectors)
    written = cluster.calls[0].body[1::2]  # the _source documents the cluster stored
    cluster.searches.append(hits_answer([hit(source, 1.0 - i / 10) for i, source in enumerate(written)]))
    hits = await backend.search_bm25("anything", 2, with_vectors=True)
    assert [h.vector.tobytes() for h in hits] == [v.tobytes() for v in vectors]


async def test_hybrid_with_vectors_keeps_the_first_k_hits_and_their_vectors(backend, cluster):
    vectors = [np.full(4, 0.5 - i / 100, dtype=np.float32) for i in range(20)]
    fused = [hit(with_vector(chunk(f"d{i}", 0, f"text {i}"), vectors[i]), 1.0 - i / 100) for i in range(20)]
    cluster.searches.append(hits_answer(fused))
    hits = await backend.search_hybrid("text", QUERY_VECTOR, 3, None, FusionSettings("min_max", 0.5), with_vectors=True)
    assert [(h.chunk.doc_id, h.score) for h in hits] == [("d0", 1.0), ("d1", 0.99), ("d2", 0.98)]
    assert [h.vector.tolist() for h in hits] == [v.tolist() for v in vectors[:3]]


async def test_vectors_are_read_only_when_asked_for(backend, cluster):
    # A stray vector in _source is ignored without the flag ...
    cluster.searches.append(hits_answer([hit(with_vector(VOLCANO, VOLCANO_VECTOR), 0.9)]))
    [plain] = await backend.search_dense(QUERY_VECTOR, 1)
    assert plain.vector is None and plain.to_passage().embedding is None
    # ... and a hit without one, when asked, is an error rather than a passage without an embedding.
    cluster.searches.append(hits_answer([hit(source_of(VOLCANO), 0.9)]))
    with pytest.raises(ValueError, match="volcanoes:0:abc.*no 'embedding'"):
        await backend.search_dense(QUERY_VECTOR, 1, with_vectors=True)


async def test_innerproduct_scores_map_back_to_one_plus_cosine_over_two(cluster):
    backend = OpenSearchBackend(cluster.client(), dataclasses.replace(CONFIG, space="innerproduct"), fusion=MIN_MAX)
    # OpenSearch innerproduct: 1 + dot for dot > 0, 1 / (1 - dot) otherwise.
    cluster.searches.append(hits_answer([hit(source_of(VOLCANO), 1.8), hit(source_of(JAZZ), 1 / 1.5)]))
    scores = [h.score for h in await backend.search_dense(QUERY_VECTOR, 2)]
    assert scores == pytest.approx([(1 + 0.8) / 2, (1 - 0.5) / 2])


async def test_hybrid_keeps_the_first_k_of_the_fused_candidates(backend, cluster):
    fused = [hit(source_of(chunk(f"d{i}", 0, f"text {i}")), 1.0 - i / 100) for i in range(20)]
    cluster.searches.append(hits_answer(fused))
    hits = await backend.search_hybrid("text", QUERY_VECTOR, 3, None, FusionSettings("min_max", 0.5))
    assert [(h.chunk.doc_id, h.score) for h in hits] == [("d0", 1.0), ("d1", 0.99), ("d2", 0.98)]


# --------------------------------------------------------------------------- writes


async def test_upsert_sends_index_actions_keyed_by_chunk_id_and_waits_for_refresh(backend, cluster):
    vectors = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.5, 0.0]], dtype=np.float32)
    await backend.upsert([VOLCANO, JAZZ], vectors)

    [call] = cluster.calls
    assert (call.method, call.path, call.params) == ("POST", "/_bulk", {"refresh": "wait_for"})
    assert call.body == [
        {"index": {"_index": "rag-chunks", "_id": "volcanoes:0:abc"}},
        {
            "chunk_id": "volcanoes:0:abc",
            "doc_id": "volcanoes",
            "text": "Lava rises.",
            "title": "Volcanoes",
            "source": "volcanoes.txt",
            "chunk_index": 0,
            "section_path": ["Geology", "Volcanoes"],
            "doc_fingerprint": "fp-volcanoes",
            "metadata": {"tenant": "acme", "content_type": "text/markdown", "acl": ["geo", "staff"], "year": 2024},
            "page": 3,
            "content_hash": VOLCANO_HASH,
            "tenant": "acme",
            "readers": ["group:geo", "user:ann"],
            "content_type": "text/markdown",
            "acl": ["geo", "staff"],
            "graph_entities": ["geology", "lava"],
            "graph_title": "volcanoes",
            "created_at": STAMP,
            "updated_at": STAMP,
            "embedding": [1.0, 0.0, 0.0, 0.0],
        },
        {"index": {"_index": "rag-chunks", "_id": "jazz:0:abc"}},
        {
            "chunk_id": "jazz:0:abc",
            "doc_id": "jazz",
            "text": "| Style | Era |",
            "title": "Jazz",
            "source": "jazz.txt",
            "chunk_index": 0,
            "section_path": [],
            "doc_fingerprint": "fp-jazz",
            "metadata": {"content_type": "text/plain"},
            "table_id": "jazz-t1",
            "tenant": "globex",
            "readers": ["*"],
            "content_type": "text/plain",
            "graph_entities": ["style", "era"],
            "graph_title": "jazz",
            "created_at": STAMP,
            "updated_at": STAMP,
            "embedding": [0.0, 0.5, 0.5, 0.0],
        },
    ]


async def test_upsert_rejects_bad_vectors_before_sending(backend, cluster):
    with pytest.raises(ValueError, match="shape"):
        await backend.upsert([VOLCANO], np.zeros((1, 3), dtype=np.float32))
    with pytest.raises(ValueError, match="NaN"):
        await backend.upsert([VOLCANO], np.full((1, 4), np.nan, dtype=np.float32))
    await backend.upsert([], np.zeros((0, 4), dtype=np.float32))
    assert cluster.calls == []


async def test_per_item_bulk_errors_surface_as_one_failure_per_chunk(backend, cluster):
    cluster.bulk_errors["jazz:0:abc"] = (
        400,
        {"type": "mapper_parsing_exception", "reason": "failed to parse field [page] of type [integer]"},
    )
    with pytest.raises(ChunkWriteError) as error:
        await backend.upsert([VOLCANO, JAZZ], np.ones((2, 4), dtype=np.float32))
    assert error.value.failures == [
        ChunkWriteFailure(
            chunk_id="jazz:0:abc",
            doc_id="jazz",
            reason="mapper_parsing_exception: failed to parse field [page] of type [integer] (HTTP 400)",
        )
    ]
    assert error.value.doc_ids == {"jazz"}
    assert "1 chunk(s) not indexed: jazz:0:abc: mapper_parsing_exception" in str(error.value)


async def test_delete_document_is_a_refreshed_delete_by_query_on_doc_id(backend, cluster):
    cluster.routes[("POST", "/rag-chunks/_delete_by_query")] = (200, {"deleted": 3, "failures": [], "total": 3})
    assert await backend.delete_document("volcanoes") == 3
    [call] = cluster.calls
    assert (call.method, call.path, call.params, call.body) == (
        "POST", "/rag-chunks/_delete_by_query", {"refresh": "true"}, {"query": {"term": {"doc_id": "volcanoes"}}},
    )
    # Within a tenant: another tenant's document of the same id is left alone.
    assert await backend.delete_document("volcanoes", tenant="acme") == 3
    assert cluster.calls[1].body == {"query": ACME_VOLCANOES}


#: A document is (tenant, doc_id).
ACME_VOLCANOES = {"bool": {"filter": [{"term": {"doc_id": "volcanoes"}}, {"term": {"tenant": "acme"}}]}}


#: Each copied chunk: routed fields made again for the configured languages (none for another
#: language, or none at all), and a chunk from before tenants (no readers) given the default tenant.
REINDEX_SCRIPT = {
    "lang": "painless",
    "source": (
        "for (String code : params.all) { for (String source : params.sources) "
        "{ ctx._source.remove(source + '_' + code); } } "
        "String language = ctx._source.language; "
        "if (language != null && params.languages.contains(language)) { for (String source : params.sources) "
        "{ if (ctx._source[source] != null && ctx._source[source] != '') "
        "{ ctx._source[source + '_' + language] = ctx._source[source]; } } } "
        "if (ctx._source.readers == null) { ctx._source.tenant = params.tenant; ctx._source.readers = params.readers; }"
    ),
    "params": {
        "all": ["ar", "da", "de", "el", "en", "es", "fi", "fr", "hu", "it", "nl", "no", "pt", "ro", "ru", "sv", "tr"],
        "languages": ["ro", "en"],
        "sources": ["text", "title"],
        "tenant": "default",
        "readers": ["*"],
    },
}


async def test_reindex_swaps_the_alias_atomically_in_one_request(backend, cluster):
    old = "rag-chunks-v1-20240101-000000"
    cluster.routes[("GET", "/_alias/rag-chunks")] = (200, {old: {"aliases": {"rag-chunks": {}}}})
    cluster.routes[("POST", "/_reindex")] = (200, {"total": 12, "created": 12, "failures": []})

    assert await backend.reindex_into_new_version() == PHYSICAL

    assert [(c.method, c.path, c.params, c.body) for c in cluster.calls] == [
        ("PUT", "/_index_template/rag-chunks-template", {}, EXPECTED_TEMPLATE),
        ("GET", "/_alias/rag-chunks", {}, None),
        ("PUT", f"/{PHYSICAL}", {}, {}),
        (
            "POST", "/_reindex", {"refresh": "true", "wait_for_completion": "true"},
            {"source": {"index": "rag-chunks"}, "dest": {"index": PHYSICAL}, "script": REINDEX_SCRIPT},
        ),
        (
            "POST", "/_aliases", {},
            {"actions": [{"remove": {"index": old, "alias": "rag-chunks"}}, {"add": {"index": PHYSICAL, "alias": "rag-chunks"}}]},
        ),
    ]


# --------------------------------------------------------------------------- reads of the catalog


async def test_document_chunk_ids_pages_with_search_after(backend, cluster, monkeypatch):
    monkeypatch.setattr("rag_retriever.backends.opensearch.PAGE_SIZE", 2)
    ids = [f"doc:{i}:x" for i in range(3)]
    cluster.searches.extend(
        [
            hits_answer([{"_id": ids[0], "_score": None, "sort": [ids[0]]}, {"_id": ids[1], "_score": None, "sort": [ids[1]]}]),
            hits_answer([{"_id": ids[2], "_score": None, "sort": [ids[2]]}]),
        ]
    )
    assert await backend.document_chunk_ids("doc") == set(ids)
    first, second = cluster.calls
    query = {"term": {"doc_id": "doc"}}
    assert first.body == {"size": 2, "_source": False, "query": query, "sort": [{"chunk_id": "asc"}]}
    assert second.body == {**first.body, "search_after": ["doc:1:x"]}


async def test_per_document_reads_are_scoped_to_the_tenant(backend, cluster):
    await backend.document_chunk_ids("volcanoes", tenant="acme")
    await backend.document_fingerprint("volcanoes", tenant="acme")
    chunk_ids, fingerprint = cluster.calls
    assert chunk_ids.body == {"size": 1000, "_source": False, "query": ACME_VOLCANOES, "sort": [{"chunk_id": "asc"}]}
    assert fingerprint.body == {"size": 1, "_source": ["doc_fingerprint"], "query": ACME_VOLCANOES}


async def test_document_vectors_pages_through_the_stored_vectors(backend, cluster, monkeypatch):
    monkeypatch.setattr("rag_retriever.backends.opensearch.PAGE_SIZE", 2)
    ids = [f"volcanoes:{i}:x" for i in range(3)]
    vectors = [np.array([0.1, -0.7, 1 / 3, 0.6], dtype=np.float32) * (i + 1) for i in range(3)]

    def stored(i: int) -> dict:
        return {"_id": ids[i], "_score": None, "sort": [ids[i]], "_source": {"chunk_id": ids[i], "embedding": vectors[i].tolist()}}

    cluster.searches.extend([hits_answer([stored(0), stored(1)]), hits_answer([stored(2)])])
    found = await backend.document_vectors("volcanoes", tenant="acme")
    assert {chunk_id: vector.tobytes() for chunk_id, vector in found.items()} == {
        ids[i]: vectors[i].tobytes() for i in range(3)
    }
    first, second = cluster.calls
    assert first.body == {
        "size": 2, "_source": ["chunk_id", "embedding"], "query": ACME_VOLCANOES, "sort": [{"chunk_id": "asc"}],
    }
    assert second.body == {**first.body, "search_after": [ids[1]]}


async def test_document_fingerprint(backend, cluster):
    cluster.searches.append(hits_answer([hit({"chunk_id": "d:0:x", "doc_fingerprint": "fp"}, 1.0)]))
    assert await backend.document_fingerprint("d") == "fp"
    assert cluster.calls[0].body == {"size": 1, "_source": ["doc_fingerprint"], "query": {"term": {"doc_id": "d"}}}
    assert await backend.document_fingerprint("unknown") is None


async def test_list_documents_pages_a_composite_aggregation(backend, cluster, monkeypatch):
    monkeypatch.setattr("rag_retriever.backends.opensearch.PAGE_SIZE", 2)

    def bucket(doc_id: str, count: int) -> dict:
        source = {"title": doc_id.upper(), "source": f"{doc_id}.md"}
        if doc_id != "c":  # c was indexed before content hashes existed
            source["content_hash"] = f"hash-{doc_id}"
        first = {"hits": {"hits": [{"_id": f"{doc_id}:0", "_source": source}]}}
        return {"key": {"doc_id": doc_id}, "doc_count": count, "first": first}

    cluster.searches.extend(
        [
            {"aggregations": {"docs": {"after_key": {"doc_id": "b"}, "buckets": [bucket("a", 2), bucket("b", 1)]}}},
            {"aggregations": {"docs": {"after_key": {"doc_id": "c"}, "buckets": [bucket("c", 5)]}}},
        ]
    )
    assert await backend.list_documents() == [
        DocumentInfo(doc_id="a", title="A", source="a.md", chunks=2, content_hash="hash-a"),
        DocumentInfo(doc_id="b", title="B", source="b.md", chunks=1, content_hash="hash-b"),
        DocumentInfo(doc_id="c", title="C", source="c.md", chunks=5, content_hash=None),
    ]
    first, second = cluster.calls
    assert first.body == {
        "size": 0,
        "aggs": {
            "docs": {
                "composite": {"size": 2, "sources": [{"doc_id": {"terms": {"field": "doc_id"}}}]},
                "aggs": {"first": {"top_hits": {"size": 1, "_source": {"includes": ["title", "source", "content_hash"]}}}},
            }
        },
    }
    assert second.body["aggs"]["docs"]["composite"]["after"] == {"doc_id": "b"}


async def test_list_documents_of_a_tenant(backend, cluster):
    cluster.searches.append({"aggregations": {"docs": {"buckets": []}}})
    assert await backend.list_documents(tenant="acme") == []
    [call] = cluster.calls
    assert call.body["query"] == {"term": {"tenant": "acme"}}
    assert call.body["size"] == 0 and "docs" in call.body["aggs"]


async def test_documents_with_content_aggregates_doc_ids_per_hash(backend, cluster, monkeypatch):
    monkeypatch.setattr("rag_retriever.backends.opensearch.PAGE_SIZE", 2)

    def answer(buckets: dict[str, list[str]]) -> dict:
        return {
            **hits_answer([]),
            "aggregations": {
                "hashes": {
                    "buckets": [
                        {"key": h, "doc_count": 9, "docs": {"buckets": [{"key": d, "doc_count": 3} for d in docs]}}
                        for h, docs in buckets.items()
                    ]
                }
            },
        }

    cluster.searches.extend([answer({"h1": ["b", "a"]}), answer({"h3": ["c"]})])
    # h2 is held by no document; three hashes with pages of two: two requests.
    assert await backend.documents_with_content(["h3", "h1", "h2", "h1"]) == {"h1": ["a", "b"], "h3": ["c"]}

    first, second = cluster.calls
    assert (first.method, first.path) == ("POST", "/rag-chunks/_search")
    assert first.body == {
        "size": 0,
        "query": {"terms": {"content_hash": ["h1", "h2"]}},
        "aggs": {
            "hashes": {
                "terms": {"field": "content_hash", "size": 2},
                "aggs": {"docs": {"terms": {"field": "doc_id", "size": 1000}}},
            }
        },
    }
    assert second.body["query"] == {"terms": {"content_hash": ["h3"]}}
    assert second.body["aggs"]["hashes"]["terms"]["size"] == 1
    assert await backend.documents_with_content([]) == {}
    assert len(cluster.calls) == 2

    # Duplicates are looked for within the caller's tenant.
    await backend.documents_with_content(["h1"], tenant="acme")
    assert cluster.calls[2].body["query"] == {
        "bool": {"filter": [{"terms": {"content_hash": ["h1"]}}, {"term": {"tenant": "acme"}}]}
    }


async def test_listings_and_duplicates_within_the_callers_access_are_filtered_in_the_request(backend, cluster):
    """Issue 29: the list and the content lookup ask only for what the caller may read (tenant AND
    one of its principals among the readers), never filter afterwards."""
    access = AccessFilter("acme", ("*", "user:ann", "group:finance"))
    cluster.searches.extend([{"aggregations": {"docs": {"buckets": []}}}, {**hits_answer([]), "aggregations": {}}])
    assert await backend.list_documents(tenant="acme", access=access) == []
    assert await backend.documents_with_content(["h1"], tenant="acme", access=access) == {}
    listing, lookup = cluster.calls
    readable = [{"term": {"tenant": "acme"}}, {"terms": {"readers": ["*", "user:ann", "group:finance"]}}]
    assert listing.body == {
        "size": 0,
        "query": {"bool": {"filter": readable}},
        "aggs": {
            "docs": {
                "composite": {"size": PAGE_SIZE, "sources": [{"doc_id": {"terms": {"field": "doc_id"}}}]},
                "aggs": {"first": {"top_hits": {"size": 1, "_source": {"includes": ["title", "source", "content_hash"]}}}},
            }
        },
    }
    assert lookup.body["query"] == {"bool": {"filter": [{"terms": {"content_hash": ["h1"]}}, *readable]}}


async def test_document_readers_reads_one_chunk_per_document(backend, cluster):
    def bucket(doc_id: str, readers: list[str] | None) -> dict:
        source = {} if readers is None else {"readers": readers}
        return {"key": doc_id, "doc_count": 3, "first": {"hits": {"hits": [{"_id": f"{doc_id}:0", "_source": source}]}}}

    cluster.searches.append(
        {**hits_answer([]), "aggregations": {"docs": {"buckets": [bucket("a", ["group:hr"]), bucket("old", None)]}}}
    )
    # "old" was indexed before ACLs (no readers: everyone's); "b" does not exist.
    assert await backend.document_readers(["b", "a", "old", "a"], tenant="acme") == {"a": ["group:hr"], "old": ["*"]}
    [call] = cluster.calls
    assert call.body == {
        "size": 0,
        "query": {"bool": {"filter": [{"terms": {"doc_id": ["a", "b", "old"]}}, {"term": {"tenant": "acme"}}]}},
        "aggs": {
            "docs": {
                "terms": {"field": "doc_id", "size": 3},
                "aggs": {"first": {"top_hits": {"size": 1, "_source": {"includes": ["readers"]}}}},
            }
        },
    }


async def test_count_reads_the_alias(backend, cluster):
    cluster.routes[("POST", "/rag-chunks/_count")] = (200, {"count": 42})
    assert await backend.count() == 42


# --------------------------------------------------------------------------- through the ingestor


async def test_ingestor_reports_a_document_the_index_rejected_and_removes_its_partial_chunks(cluster, embedder, tokenizer):
    backend = OpenSearchBackend(cluster.client(), dataclasses.replace(CONFIG, dim=embedder.dim), fusion=MIN_MAX, clock=lambda: NOW)
    ingestor = build_ingestor(backend, embedder, settings_chunker(tokenizer))
    # Both documents are new (the default search answer is empty); the index rejects every chunk of "bad".
    def reject_bad(call):
        return 200, {
            "took": 1,
            "errors": True,
            "items": [
                {"index": {"_index": PHYSICAL, "_id": action["index"]["_id"], "status": 400,
                           "error": {"type": "illegal_argument_exception", "reason": "no"}}}
                if action["index"]["_id"].startswith("bad:")
                else {"index": {"_index": PHYSICAL, "_id": action["index"]["_id"], "status": 201, "result": "created"}}
                for action in call.body[::2]
            ],
        }

    cluster.routes[("POST", "/_bulk")] = reject_bad
    cluster.routes[("POST", "/rag-chunks/_delete_by_query")] = (200, {"deleted": 0, "failures": []})
    result = await ingestor.ingest([DocumentIn(id="good", text="Fine text."), DocumentIn(id="bad", text="Broken text.")])

    assert (result.documents, result.doc_ids) == (1, ["good"])
    [failure] = result.failed
    assert failure.name == "bad" and "illegal_argument_exception: no (HTTP 400)" in failure.reason
    deletes = [c.body["query"]["bool"]["filter"] for c in cluster.requests("POST", "/rag-chunks/_delete_by_query")]
    # Replace both, then remove what went in of the rejected one; each within the caller's tenant.
    assert deletes == [[{"term": {"doc_id": d}}, {"term": {"tenant": "default"}}] for d in ("good", "bad", "bad")]
    await backend.close()


# --------------------------------------------------------------------------- settings → backend


async def test_runtime_opens_the_opensearch_backend_from_settings(cluster, monkeypatch):
    from rag_retriever.backends import opensearch
    from rag_retriever.runtime import open_backend

    monkeypatch.setattr(opensearch, "create_client", lambda settings: cluster.client())
    # The analysed languages come from the shared RAG_LANGUAGES, as every service reads them.
    monkeypatch.setenv("RAG_LANGUAGES", '["ro", "de"]')
    settings = RetrieverSettings(
        backend="opensearch", opensearch_index="kb", knn_engine="lucene", knn_space="innerproduct",
        hnsw_m=24, hnsw_ef_construction=128, hnsw_ef_search=64, hybrid_normalization="z_score", hybrid_dense_weight=0.6,
    )
    opened = await open_backend(settings, dim=384, model_id="all-MiniLM-L6-v2")
    backend = opened.backend
    try:
        assert isinstance(backend, OpenSearchBackend)
        # The second hop, no learned-fusion candidates, no staged writes: declared where it is opened.
        abilities = opened.abilities
        assert (abilities.graph, abilities.fusion_candidates, abilities.staged) == (backend, None, None)
        assert backend.config == IndexConfig(
            alias="kb", dim=384, model_id="all-MiniLM-L6-v2", engine="lucene", space="innerproduct",
            hnsw=HnswParams(m=24, ef_construction=128, ef_search=64), languages=("ro", "de"),
        )
        template, head, create, pipeline = cluster.calls
        assert (template.path, head.path, pipeline.path) == (
            "/_index_template/kb-template", "/_alias/kb", "/_search/pipeline/kb-hybrid-zscore-dense600"
        )
        assert re.fullmatch(r"/kb-v6-\d{8}-\d{6}", create.path) and create.body == {"aliases": {"kb": {}}}
        assert template.body["template"]["mappings"]["properties"]["embedding"]["method"] == {
            "name": "hnsw", "engine": "lucene", "space_type": "innerproduct",
            "parameters": {"m": 24, "ef_construction": 128},
        }
        assert sorted(template.body["template"]["settings"]["analysis"]["analyzer"]) == ["rag_de", "rag_neutral", "rag_ro"]
    finally:
        await backend.close()


def test_client_settings():
    from rag_retriever.backends.opensearch import create_client
    from rag_retriever.settings import RetrieverSettings

    client = create_client(
        RetrieverSettings(backend="opensearch", opensearch_url="https://search.internal:9443", opensearch_user="rag",
                          opensearch_password="s3cret", opensearch_verify_certs=False, opensearch_timeout_s=5)
    )
    assert client.transport.hosts == [{"host": "search.internal", "port": 9443, "use_ssl": True}]
    assert client.transport.kwargs == {"http_auth": ("rag", "s3cret"), "verify_certs": False, "timeout": 5.0}


# --------------------------------------------------------------------------- sentence vectors


#: Two sentences of a 4-d embedder, float32 values with long decimal forms.
SENTENCE_ROWS = np.array([[0.1, -0.7, 1 / 3, 0.6], [0.0, 0.5, 0.5, 0.70710677]], dtype=np.float32)


def with_sentences(record: ChunkRecord) -> ChunkRecord:
    from rag_common.sentence_vectors import pack

    return dataclasses.replace(record, sentence_vectors=pack("Volcanoes > Geology: ", [(0, 5), (6, 11)], SENTENCE_ROWS))


async def test_upsert_stores_the_sentence_vectors_in_the_source_exactly(backend, cluster):
    await backend.upsert([with_sentences(VOLCANO)], np.array([[0.5, 0.5, 0.5, 0.5]], dtype=np.float32))
    [action, source] = cluster.calls[0].body
    assert source["sentence_vectors"] == {
        "context": "Volcanoes > Geology: ",
        "spans": [[0, 5], [6, 11]],
        "dim": 4,
        "method": "embedded",
        # base64 of the 8 little-endian float32 values, row-major.
        "vectors": "zczMPTMzM7+rqqo+mpkZPwAAAAAAAAA/AAAAP/MENT8=",
    }
    # Everything else is what the chunk without sentence vectors stores.
    await backend.upsert([VOLCANO], np.array([[0.5, 0.5, 0.5, 0.5]], dtype=np.float32))
    [_, plain] = cluster.calls[1].body
    assert {key: value for key, value in source.items() if key != "sentence_vectors"} == plain


async def test_sentence_vectors_round_trip_from_upsert_to_search_bit_for_bit(backend, cluster):
    from rag_common.sentence_vectors import unpack

    await backend.upsert([with_sentences(VOLCANO)], np.array([[0.5, 0.5, 0.5, 0.5]], dtype=np.float32))
    [_, written] = cluster.calls[0].body
    cluster.searches.append(hits_answer([hit(written, 0.9)]))
    [scored] = await backend.search_bm25("lava", 1, with_sentence_vectors=True)
    passage = scored.to_passage(with_sentence_vectors=True)
    assert unpack(passage.sentence_vectors).tobytes() == SENTENCE_ROWS.tobytes()
    assert scored.to_passage().sentence_vectors is None  # only when asked for


async def test_the_method_of_pooled_vectors_is_stored_and_read_back_and_a_source_without_one_reads_as_embedded(backend, cluster):
    from rag_common.sentence_vectors import pack

    pooled = dataclasses.replace(
        VOLCANO, sentence_vectors=pack("Volcanoes > Geology: ", [(0, 5), (6, 11)], SENTENCE_ROWS, method="pooled")
    )
    await backend.upsert([pooled], np.array([[0.5, 0.5, 0.5, 0.5]], dtype=np.float32))
    [_, written] = cluster.calls[0].body
    assert written["sentence_vectors"]["method"] == "pooled"
    older = {**written, "sentence_vectors": {k: v for k, v in written["sentence_vectors"].items() if k != "method"}}
    cluster.searches.append(hits_answer([hit(written, 0.9), hit({**older, "chunk_id": "volcanoes:9:y"}, 0.8)]))
    found = await backend.search_bm25("lava", 2, with_sentence_vectors=True)
    assert [s.to_passage(with_sentence_vectors=True).sentence_vectors.method for s in found] == ["pooled", "embedded"]


async def test_document_sentence_vectors_pages_through_text_and_vectors(backend, cluster, monkeypatch):
    monkeypatch.setattr("rag_retriever.backends.opensearch.PAGE_SIZE", 2)
    stored = with_sentences(VOLCANO).sentence_vectors.model_dump()
    ids = [f"volcanoes:{i}:x" for i in range(3)]

    def page_hit(i: int) -> dict:
        source = {"chunk_id": ids[i], "text": "Lava rises."}
        if i != 1:  # chunk 1 was written without sentence vectors
            source["sentence_vectors"] = stored
        return {"_id": ids[i], "_score": None, "sort": [ids[i]], "_source": source}

    cluster.searches.extend([hits_answer([page_hit(0), page_hit(1)]), hits_answer([page_hit(2)])])
    found = await backend.document_sentence_vectors("volcanoes", tenant="acme")
    assert found[ids[1]] == ("Lava rises.", None)
    assert found[ids[0]][0] == "Lava rises." and found[ids[0]][1].model_dump() == stored
    first, second = cluster.calls
    assert first.body == {
        "size": 2, "_source": ["chunk_id", "text", "sentence_vectors"], "query": ACME_VOLCANOES,
        "sort": [{"chunk_id": "asc"}],
    }
    assert second.body == {**first.body, "search_after": [ids[1]]}
