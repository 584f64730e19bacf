"""Golden tests of the OpenSearch backend's per-language analysis (issue 31): the analyzers of the
index template, the routed ``text_<code>`` / ``title_<code>`` fields a chunk fills, and the fields a
BM25 query (alone, in a hybrid, as a second-hop follow-up) reads for a query language, for none, and
for a language not configured. The real ``OpenSearchBackend`` and opensearch-py client over the
recording connection (``opensearch_fake``); every body spelled out.

Analyzer syntax checked against the OpenSearch documentation (custom analyzer, ``stop`` with the
predefined ``_romanian_`` lists, ``stemmer`` language values, ``lowercase`` ``language``, ``elision``,
``apostrophe``, ``asciifolding``, ``multi_match`` ``most_fields``) and OpenSearch's
``StemmerTokenFilterFactory`` (which names are Snowball). No cluster runs here: the conformance suite
(``OPENSEARCH_URL``) ranks real Romanian text through these analyzers.
"""

from __future__ import annotations

import numpy as np
import pytest
from opensearch_fake import FakeCluster, hits_answer

from rag_common.languages import LANGUAGES, UnsupportedLanguageError
from rag_retriever.backends.base import AccessFilter, FusionSettings, GraphOptions
from rag_retriever.backends.opensearch import OpenSearchBackend
from rag_retriever.backends.opensearch_requests import (
    IndexConfig,
    analysis_settings,
    bm25_fields,
    follow_up_msearch_body,
    index_template_body,
)
from rag_retriever.records import ChunkRecord, ScoredChunk
from rag_retriever.settings import RetrieverSettings

SETTINGS = RetrieverSettings(opensearch_index="rag-chunks", hnsw_ef_search=100)
CONFIG = IndexConfig.of(SETTINGS, dim=4, model_id="test-model", languages=("ro", "en"))
MIN_MAX = FusionSettings("min_max", 0.5)
ANN = AccessFilter("acme", ("*", "user:ann"))
ANN_CLAUSES = [{"term": {"tenant": "acme"}}, {"terms": {"readers": ["*", "user:ann"]}}]
SOURCE_EXCLUDES = {"excludes": ["embedding", "sentence_vectors"]}
NEUTRAL = ["text", "title^2"]
ROMANIAN = [*NEUTRAL, "text_ro", "title_ro^2"]
EVERY_LANGUAGE = [*NEUTRAL, "text_ro", "title_ro^2", "text_en", "title_en^2"]
QUERY = "Unde sunt stocate conversațiile?"


def multi_match(fields: list[str], query: str = QUERY) -> dict:
    return {"multi_match": {"query": query, "fields": fields, "type": "most_fields"}}


@pytest.fixture
def cluster() -> FakeCluster:
    return FakeCluster()


@pytest.fixture
async def backend(cluster: FakeCluster):
    opened = OpenSearchBackend(cluster.client(), CONFIG, fusion=MIN_MAX)
    yield opened
    await opened.close()


# --------------------------------------------------------------------------- which fields a query reads


@pytest.mark.parametrize(
    ("language", "fields"),
    [
        ("ro", ROMANIAN),  # confident: neutral + its own language, summed
        ("en", [*NEUTRAL, "text_en", "title_en^2"]),
        (None, EVERY_LANGUAGE),  # unsure: neutral + every configured language
        ("de", EVERY_LANGUAGE),  # a language not configured has no field of its own: as unsure
    ],
)
async def test_bm25_reads_the_neutral_fields_and_those_of_the_query_language(backend, cluster, language, fields):
    await backend.search_bm25(QUERY, 5, {"content_type": ["text/plain"]}, access=ANN, language=language)
    [call] = cluster.requests("POST", "/rag-chunks/_search")
    assert call.body == {
        "size": 5,
        "_source": SOURCE_EXCLUDES,
        "query": {
            "bool": {
                "must": [multi_match(fields)],
                "filter": [*ANN_CLAUSES, {"terms": {"content_type": ["text/plain"]}}],
            }
        },
    }


async def test_bm25_without_filters_or_access_is_the_bare_multi_match(backend, cluster):
    await backend.search_bm25(QUERY, 3, language="ro")
    [call] = cluster.requests("POST", "/rag-chunks/_search")
    assert call.body == {"size": 3, "_source": SOURCE_EXCLUDES, "query": multi_match(ROMANIAN)}


async def test_the_hybrid_lexical_part_reads_the_query_language_fields(backend, cluster):
    vector = np.array([0.5, 0.5, 0.5, 0.5], dtype=np.float32)
    await backend.search_hybrid(QUERY, vector, 5, None, MIN_MAX, access=ANN, language="ro")
    [call] = cluster.requests("POST", "/rag-chunks/_search")
    knn = {"vector": [0.5, 0.5, 0.5, 0.5], "k": 50, "method_parameters": {"ef_search": 100}}
    assert call.params == {"search_pipeline": "rag-chunks-hybrid-minmax"}
    assert call.body["query"] == {
        "hybrid": {
            "queries": [
                {"knn": {"embedding": {**knn, "filter": {"bool": {"filter": ANN_CLAUSES}}}}},
                {"bool": {"must": [multi_match(ROMANIAN)], "filter": ANN_CLAUSES}},
            ]
        }
    }


@pytest.mark.parametrize(
    ("typed", "sent"),
    [
        ("conversaţiile ştiinţifice", "conversațiile științifice"),  # cedilla → comma below
        ("conversat\u0326iile", "conversațiile"),  # decomposed (NFD) → composed
        ("conversatiile", "conversatiile"),  # no diacritics: left alone, asciifolding matches it
    ],
)
async def test_the_query_is_normalised_as_the_indexed_text(backend, cluster, typed, sent):
    await backend.search_bm25(typed, 3, language="ro")
    [call] = cluster.requests("POST", "/rag-chunks/_search")
    assert call.body["query"] == multi_match(ROMANIAN, sent)


def test_no_configured_language_means_the_neutral_fields_alone():
    assert bm25_fields((), "ro") == NEUTRAL
    assert bm25_fields((), None) == NEUTRAL


def test_follow_ups_read_the_fields_they_are_given():
    lines = follow_up_msearch_body(["românia"], 2, None, access=ANN, with_vectors=False, fields=ROMANIAN)
    assert lines == [
        {},
        {
            "size": 2,
            "_source": SOURCE_EXCLUDES,
            "query": {"bool": {"must": [multi_match(ROMANIAN, "românia")], "filter": ANN_CLAUSES}},
        },
    ]


async def test_the_second_hop_follows_up_in_the_query_language(backend, cluster):
    kiss = ChunkRecord(
        chunk_id="kiss:0", doc_id="kiss", text="Shirley Temple a jucat în Kiss and Tell.", chunk_index=0,
        title="Kiss and Tell", source="kiss.txt", tenant="acme", language="ro",
    )
    cluster.searches.append(
        {"hits": {"hits": []}, "aggregations": {
            "entities": {"buckets": [{"key": "shirley temple", "doc_count": 2}]},
            "titles": {"buckets": [{"key": "shirley temple", "doc_count": 1, "documents": {"value": 1}}]},
        }}
    )
    cluster.routes[("POST", "/rag-chunks/_msearch")] = (200, {"responses": [hits_answer([])]})
    await backend.graph_search(
        "Cine a jucat în Kiss and Tell?", [ScoredChunk(kiss, 1.0)], 3, None, ANN, with_vectors=False, ppr=False,
        hop=True, options=GraphOptions.of(RetrieverSettings()), language="ro",
    )
    [msearch] = cluster.requests("POST", "/rag-chunks/_msearch")
    assert msearch.body[1]["query"]["bool"]["must"] == [multi_match(ROMANIAN, "shirley temple")]


# --------------------------------------------------------------------------- what a chunk fills


def chunk(chunk_id: str, text: str, title: str, language: str | None) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=chunk_id, doc_id=chunk_id.split(":")[0], text=text, chunk_index=0, title=title,
        source="s.txt", language=language,
    )


async def test_a_chunk_fills_the_routed_fields_of_its_own_configured_language_only(backend, cluster):
    chunks = [
        chunk("ro:0", "Conversaţiile sunt stocate.", "Stocare", "ro"),  # cedilla: written comma-below
        chunk("en:0", "Conversations are stored.", "", "en"),  # no title: no title_en
        chunk("de:0", "Gespräche werden gespeichert.", "Speicher", "de"),  # not configured: neutral only
        chunk("xx:0", "12345", "", None),  # no language named: neutral only
    ]
    await backend.upsert(chunks, np.ones((4, 4), dtype=np.float32) / 2)
    [bulk] = cluster.requests("POST", "/_bulk")
    sources = bulk.body[1::2]
    routed = [
        {key: value for key, value in source.items() if key.startswith(("text_", "title_"))} for source in sources
    ]
    assert routed == [
        {"text_ro": "Conversațiile sunt stocate.", "title_ro": "Stocare"},
        {"text_en": "Conversations are stored."},
        {},
        {},
    ]
    # The stored text stays as ingested, and the chunk's language is stored (keyword) when named.
    assert sources[0]["text"] == "Conversaţiile sunt stocate." and sources[0]["language"] == "ro"
    assert sources[2]["language"] == "de" and "language" not in sources[3]


# --------------------------------------------------------------------------- the analyzers


def test_every_supported_language_has_an_analyzer_made_of_defined_or_built_in_filters():
    analysis = analysis_settings(sorted(LANGUAGES))
    built_in = {"lowercase", "asciifolding", "apostrophe", "arabic_normalization"}
    assert sorted(analysis["analyzer"]) == sorted(["rag_neutral", *(f"rag_{code}" for code in LANGUAGES)])
    for name, analyzer in analysis["analyzer"].items():
        assert analyzer["type"] == "custom" and analyzer["tokenizer"] == "standard"
        assert analyzer["filter"][-1] == "asciifolding", name  # folding last: after the stemmer
        assert set(analyzer["filter"]) <= built_in | set(analysis["filter"]), name
    stemmers = {name: spec["language"] for name, spec in analysis["filter"].items() if spec["type"] == "stemmer"}
    stops = {name: spec["stopwords"] for name, spec in analysis["filter"].items() if spec["type"] == "stop"}
    # Snowball wherever OpenSearch's stemmer filter has it (porter2 = Snowball English); Lucene's own
    # light stemmers for Arabic and Greek, which have no Snowball stemmer there.
    assert stemmers == {
        f"rag_{code}_stemmer": ("porter2" if code == "en" else spec.name) for code, spec in LANGUAGES.items()
    }
    assert stops == {f"rag_{code}_stop": f"_{spec.name}_" for code, spec in LANGUAGES.items()}


def test_the_chains_that_follow_their_built_in_analyzer():
    analyzers = analysis_settings(["ar", "el", "fr", "it", "tr"])["analyzer"]
    assert analyzers["rag_ar"]["filter"] == [
        "lowercase", "rag_ar_stop", "arabic_normalization", "rag_ar_stemmer", "asciifolding",
    ]
    assert analyzers["rag_el"]["filter"] == ["rag_el_lowercase", "rag_el_stop", "rag_el_stemmer", "asciifolding"]
    assert analyzers["rag_fr"]["filter"] == [
        "rag_fr_elision", "lowercase", "rag_fr_stop", "rag_fr_stemmer", "asciifolding",
    ]
    assert analyzers["rag_it"]["filter"][0] == "rag_it_elision"
    assert analyzers["rag_tr"]["filter"] == [
        "apostrophe", "rag_tr_lowercase", "rag_tr_stop", "rag_tr_stemmer", "asciifolding",
    ]
    filters = analysis_settings(["el", "fr", "tr"])["filter"]
    assert filters["rag_el_lowercase"] == {"type": "lowercase", "language": "greek"}
    assert filters["rag_tr_lowercase"] == {"type": "lowercase", "language": "turkish"}
    assert filters["rag_fr_elision"] == {
        "type": "elision", "articles_case": True,
        "articles": ["l", "m", "t", "qu", "n", "s", "j", "d", "c", "jusqu", "quoiqu", "lorsqu", "puisqu"],
    }


def test_the_template_maps_only_the_configured_languages():
    properties = index_template_body(CONFIG)["template"]["mappings"]["properties"]
    routed = sorted(name for name in properties if name.startswith(("text_", "title_")))
    assert routed == ["text_en", "text_ro", "title_en", "title_ro"]
    neutral_only = IndexConfig.of(SETTINGS, dim=4, model_id="m", languages=())
    template = index_template_body(neutral_only)["template"]
    assert template["settings"]["analysis"]["analyzer"].keys() == {"rag_neutral"}
    assert not [name for name in template["mappings"]["properties"] if name.startswith(("text_", "title_"))]


def test_the_configured_languages_are_checked_and_kept_once_in_order():
    config = IndexConfig.of(SETTINGS, dim=4, model_id="m", languages=["ro", "en", "ro"])
    assert config.languages == ("ro", "en")
    with pytest.raises(UnsupportedLanguageError, match="'xx'"):
        IndexConfig.of(SETTINGS, dim=4, model_id="m", languages=["ro", "xx"])


def test_with_a_known_language_the_neutral_fields_weigh_the_configured_weight():
    from rag_retriever.backends.opensearch_queries import bm25_fields

    assert bm25_fields(("ro", "en"), "ro", 0.25) == ["text^0.25", "title^0.5", "text_ro", "title_ro^2"]
    # Unsure: every field counts alike, whatever the weight.
    assert bm25_fields(("ro", "en"), None, 0.25) == ["text", "title^2", "text_ro", "title_ro^2", "text_en", "title_en^2"]
