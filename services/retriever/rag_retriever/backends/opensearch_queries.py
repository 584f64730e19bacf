"""The OpenSearch backend's searches, as pure functions: the dense, BM25 and hybrid bodies (the
caller's access and filters inside each), the second hop's requests, and the parsers of their hits.

No I/O here (``opensearch.py`` and ``opensearch_graph.py`` send these); the golden tests pin the
exact DSL. Filters arrive normalised (``base.normalise_filters``: known fields, each a list of
values) and are used as they are.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from rag_common.languages import normalise_text
from rag_retriever.backends.base import AccessFilter, Filters
from rag_retriever.backends.opensearch_index import (
    GRAPH_ENTITIES_FIELD,
    GRAPH_TITLE_FIELD,
    SENTENCE_VECTORS_FIELD,
    TEXT_SOURCES,
    VECTOR_FIELD,
    KnnSpace,
    language_field,
)
from rag_retriever.fusion import candidates_per_list
from rag_retriever.records import ChunkRecord, ScoredChunk

#: Vectors are stored in ``_source`` (reindexing needs them) and sent back with hits only when a
#: search asks for them (``with_vectors``, ``with_sentence_vectors``): ``source_filter`` excludes
#: the others; with both, the whole ``_source`` comes back.
SOURCE_WITHOUT_VECTOR = {"excludes": [VECTOR_FIELD, SENTENCE_VECTORS_FIELD]}
SOURCE_WITH_VECTOR = {"excludes": [SENTENCE_VECTORS_FIELD]}
SOURCE_WITH_SENTENCE_VECTORS = {"excludes": [VECTOR_FIELD]}
SOURCE_WITH_BOTH = True
#: A title match says more about a chunk than one in its body (``title^2``, ``title_<code>^2``).
FIELD_BOOSTS = {"text": "", "title": "^2"}
#: The neutral fields, which every chunk fills.
BM25_FIELDS = [f"{source}{FIELD_BOOSTS[source]}" for source in TEXT_SOURCES]
#: The chunk fields stored and returned as they are (``ChunkRecord.to_payload``).
CHUNK_FIELDS = tuple(f.name for f in fields(ChunkRecord))


# --------------------------------------------------------------------------- queries


def access_clauses(access: AccessFilter | None) -> list[dict[str, Any]]:
    """What ``access`` may read: its tenant AND one of its principals among the chunk's readers."""
    if access is None:
        return []
    return [{"term": {"tenant": access.tenant}}, {"terms": {"readers": list(access.principals)}}]


def filter_clauses(filters: Filters | None, access: AccessFilter | None = None) -> list[dict[str, Any]]:
    """The access clauses, then one ``terms`` clause per field: AND across fields, OR within one,
    exact keyword matches. ``filters`` as ``base.normalise_filters`` made them (checked, lists)."""
    clauses = access_clauses(access)
    # A copy of each list: the body must not share the caller's.
    clauses += [{"terms": {field: list(values)}} for field, values in (filters or {}).items()]
    return clauses


def knn_clause(
    vector: np.ndarray, k: int, filters: Filters | None, ef_search: int, access: AccessFilter | None = None
) -> dict[str, Any]:
    """The dense query. The filter (access and fields) sits inside the knn clause (efficient
    filtering: k allowed hits come back, as in the embedded backend, however narrow the ACL) rather
    than in a bool around it (post-filtering).

    ``num_candidates`` of other engines maps to ``method_parameters.ef_search``: the HNSW candidate
    list per shard, raised to ``k`` (faiss uses it as given, lucene uses max(k, ef_search)).
    """
    body: dict[str, Any] = {
        "vector": np.asarray(vector, dtype=np.float32).reshape(-1).tolist(),
        "k": k,
        "method_parameters": {"ef_search": max(ef_search, k)},
    }
    clauses = filter_clauses(filters, access)
    if clauses:
        body["filter"] = {"bool": {"filter": clauses}}
    return {"knn": {VECTOR_FIELD: body}}


def bm25_fields(languages: Sequence[str], language: str | None, neutral_weight: float = 1.0) -> list[str]:
    """The fields a BM25 query reads: the neutral ones, and the routed ones of ``language`` when it is
    one of the configured ``languages``; else (None: unsure, or a language not configured) those of
    every configured language. Each field analyses the query with its own analyzer, so a wrong guess
    only meets a consistently analysed field (measured: never below neutral alone). With a known
    language the neutral fields weigh ``neutral_weight`` (``RETRIEVER_NEUTRAL_FIELD_WEIGHT``), as in
    the embedded backend."""
    known = language in languages
    chosen = [language] if known else list(languages)
    routed = [f"{language_field(source, code)}{FIELD_BOOSTS[source]}" for code in chosen for source in TEXT_SOURCES]
    if not known or neutral_weight == 1.0:
        return [*BM25_FIELDS, *routed]
    neutral = [f"{source}^{_boost(source) * neutral_weight:g}" for source in TEXT_SOURCES]
    return [*neutral, *routed]


def _boost(source: str) -> float:
    return float(FIELD_BOOSTS[source].lstrip("^") or 1)


def bm25_clause(
    query: str, filters: Filters | None, access: AccessFilter | None = None, *, fields: Sequence[str]
) -> dict[str, Any]:
    """``fields`` from ``bm25_fields``. ``most_fields`` sums their scores, like the embedded backend's
    BM25 over its fields (measured: summing beats dis_max once the language is right). The query is
    ``normalise_text``-ed (NFC, cedilla ş/ţ as ș/ț), as the indexed text."""
    match = {"multi_match": {"query": normalise_text(query), "fields": list(fields), "type": "most_fields"}}
    clauses = filter_clauses(filters, access)
    # Filter context: decides membership without touching the BM25 score.
    return {"bool": {"must": [match], "filter": clauses}} if clauses else match


def source_filter(with_vectors: bool, with_sentence_vectors: bool = False) -> bool | dict[str, Any]:
    """The search body's ``_source``: everything stored but the vectors not asked for."""
    if with_vectors:
        return SOURCE_WITH_BOTH if with_sentence_vectors else SOURCE_WITH_VECTOR
    return SOURCE_WITH_SENTENCE_VECTORS if with_sentence_vectors else SOURCE_WITHOUT_VECTOR


def dense_search_body(
    vector: np.ndarray, k: int, filters: Filters | None, ef_search: int,
    *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
) -> dict[str, Any]:
    query = knn_clause(vector, k, filters, ef_search, access)
    return {"size": k, "_source": source_filter(with_vectors, with_sentence_vectors), "query": query}


def bm25_search_body(
    query: str, k: int, filters: Filters | None,
    *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
    fields: Sequence[str],
) -> dict[str, Any]:
    return {
        "size": k,
        "_source": source_filter(with_vectors, with_sentence_vectors),
        "query": bm25_clause(query, filters, access, fields=fields),
    }


def hybrid_search_body(
    query: str, vector: np.ndarray, k: int, filters: Filters | None, ef_search: int,
    *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
    fields: Sequence[str],
) -> dict[str, Any]:
    """Sent with ``search_pipeline=<pipeline_name>``; without it OpenSearch would not fuse at all.

    Each sub-query yields up to ``size`` hits per shard, and normalization sees only those, so
    ``size`` is the per-list candidate depth of the embedded backend (``candidates_per_list``);
    the caller keeps the first ``k``. Filters, access included, go inside each sub-query (the
    hybrid-level ``filter`` needs OpenSearch 3.0). So ``with_vectors`` brings back the vectors of
    all ``size`` fused hits, not only the first ``k`` (about 8 KB of JSON per 384-d hit), and
    ``with_sentence_vectors`` their sentence vectors (about 2 KB per sentence).
    """
    candidates = candidates_per_list(k)
    return {
        "size": candidates,
        "_source": source_filter(with_vectors, with_sentence_vectors),
        "query": {
            "hybrid": {
                # Order matters: the pipeline's weights are [dense, bm25].
                "queries": [
                    knn_clause(vector, candidates, filters, ef_search, access),
                    bm25_clause(query, filters, access, fields=fields),
                ]
            }
        },
    }


# --------------------------------------------------------------------------- graph (second hop)


def entity_stats_body(names: Collection[str]) -> dict[str, Any]:
    """How many chunks mention each of ``names`` (``graph_entities``) and how many documents it is the
    title of (``graph_title``, distinct ``doc_id``): the embedded graph's ``entity_degree`` and
    ``is_title``, for the query's n-grams and the top passages' entities, in one request. Index-wide,
    like the embedded graph (the counts only decide which names a hop follows; every search it then
    makes is restricted to what the caller may read)."""
    wanted = sorted(set(names))
    return {
        "size": 0,
        "track_total_hits": False,
        "query": {
            "bool": {
                "should": [{"terms": {GRAPH_ENTITIES_FIELD: wanted}}, {"terms": {GRAPH_TITLE_FIELD: wanted}}],
                "minimum_should_match": 1,
            }
        },
        "aggs": {
            "entities": {"terms": {"field": GRAPH_ENTITIES_FIELD, "include": wanted, "size": len(wanted)}},
            "titles": {
                "terms": {"field": GRAPH_TITLE_FIELD, "include": wanted, "size": len(wanted)},
                "aggs": {"documents": {"cardinality": {"field": "doc_id"}}},
            },
        },
    }


@dataclass(frozen=True, slots=True)
class EntityCounts:
    """The answer to ``entity_stats_body``: ``graph_retrieval.EntityStats`` over the names asked."""

    chunks: Mapping[str, int]
    documents: Mapping[str, int]

    def is_entity(self, name: str) -> bool:
        return self.chunks.get(name, 0) > 0 or self.documents.get(name, 0) > 0

    def entity_degree(self, name: str) -> int:
        return self.chunks.get(name, 0) + self.documents.get(name, 0)

    def is_title(self, name: str) -> bool:
        return self.documents.get(name, 0) > 0


def entity_stats_from(response: Mapping[str, Any]) -> EntityCounts:
    aggregations = response.get("aggregations", {})
    chunks = {bucket["key"]: int(bucket["doc_count"]) for bucket in aggregations.get("entities", {}).get("buckets", [])}
    documents = {
        bucket["key"]: int(bucket["documents"]["value"]) for bucket in aggregations.get("titles", {}).get("buckets", [])
    }
    return EntityCounts(chunks, documents)


def follow_up_msearch_body(
    names: Sequence[str], k: int, filters: Filters | None,
    *, access: AccessFilter | None, with_vectors: bool, fields: Sequence[str],
) -> list[dict[str, Any]]:
    """``POST {alias}/_msearch``: one BM25 search per follow-up name, each exactly ``bm25_search_body``
    (the caller's filters and access inside, the query's ``fields``), in one round trip. Header lines
    are empty: the index is the URL's."""
    lines: list[dict[str, Any]] = []
    for name in names:
        lines.append({})
        lines.append(bm25_search_body(name, k, filters, access=access, with_vectors=with_vectors, fields=fields))
    return lines


def msearch_hits(response: Mapping[str, Any], *, with_vectors: bool) -> list[list[ScoredChunk]]:
    """Each ``_msearch`` answer's hits, in request order; a failed one raises (no silent partial hop)."""
    answers = []
    for answer in response.get("responses", []):
        if "error" in answer:
            raise RuntimeError(f"a follow-up search failed: {answer['error']}")
        answers.append(scored_hits(answer, with_vectors=with_vectors))
    return answers


# --------------------------------------------------------------------------- hits


def chunk_from_source(source: dict[str, Any]) -> ChunkRecord:
    # Absent fields (stored as null, or older documents) take the dataclass defaults.
    return ChunkRecord.from_payload({key: source[key] for key in CHUNK_FIELDS if source.get(key) is not None})


def dense_score(raw: float, space: KnnSpace) -> float:
    """OpenSearch's k-NN score → ``(1 + cosine) / 2`` in [0, 1], the embedded backend's dense score.

    ``cosinesimil`` already scores ``(2 - (1 - cos)) / 2``. ``innerproduct`` scores ``1 + dot`` for a
    positive dot product and ``1 / (1 - dot)`` otherwise; with unit vectors ``dot`` is the cosine.
    """
    if space == "innerproduct":
        cosine = raw - 1.0 if raw >= 1.0 else 1.0 - 1.0 / max(raw, 1e-12)
        raw = (1.0 + cosine) / 2.0
    return min(max(raw, 0.0), 1.0)


def vector_from_source(source: dict[str, Any]) -> np.ndarray:
    """The stored vector of a hit fetched with ``with_vectors``. It was written as the float32 values
    (``chunk_source``) and JSON keeps them exactly, so this is the upserted array bit for bit."""
    values = source.get(VECTOR_FIELD)
    if values is None:
        raise ValueError(f"hit {source.get('chunk_id')!r} has no {VECTOR_FIELD!r} in its _source")
    return np.asarray(values, dtype=np.float32)


def scored_hits(
    response: dict[str, Any], score: Any = float, *, with_vectors: bool = False, limit: int | None = None
) -> list[ScoredChunk]:
    """A search answer's (first ``limit``) hits in order, each score passed through ``score``; with
    ``with_vectors`` each carries its stored vector."""
    hits = response.get("hits", {}).get("hits", [])[:limit]
    return [
        ScoredChunk(
            chunk_from_source(hit["_source"]),
            score(float(hit["_score"])),
            vector_from_source(hit["_source"]) if with_vectors else None,
        )
        for hit in hits
    ]
