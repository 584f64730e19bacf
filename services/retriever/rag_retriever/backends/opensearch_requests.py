"""Every request body the OpenSearch backend sends, as pure functions, and the parsers of the answers.

No I/O here: each builder maps our inputs to the JSON OpenSearch 2.19 expects, so the golden tests
pin the exact DSL and the backend class stays a thin sequence of calls. Target version: the
``opensearchproject/opensearch:2.19.x`` image of docker-compose.yml (faiss ``cosinesimil`` needs
2.19, the ``score-ranker-processor`` 2.19, knn ``method_parameters`` 2.16; ``z_score``
normalization needs 3.0).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal

import numpy as np

from rag_common.identity import EVERYONE
from rag_common.schemas import SentenceVectors
from rag_retriever.backends.base import (
    FILTER_FIELDS,
    AccessFilter,
    MAX_DOCUMENTS_PER_CONTENT,
    ChunkWriteFailure,
    Filters,
    FusionSettings,
)
from rag_retriever.entity_graph import chunk_node
from rag_retriever.fusion import candidates_per_list
from rag_retriever.records import DEFAULT_TENANT, ChunkRecord, ScoredChunk

#: Bump when the mapping or index settings change; then run ``reindex_into_new_version``, unless the
#: change only adds fields (``ADDED_FIELDS``): those an older index gets in place on startup.
TEMPLATE_VERSION = 5
#: Fields each template version added, when that was its only change: ``{version: {field: mapping}}``.
#: Adding a field to a mapping is allowed (changing one is not), so an index of an older version is
#: brought up to date with one ``PUT {index}/_mapping`` (``mapping_upgrade_body``) instead of refusing
#: chunks that carry the new field under ``dynamic: strict``. Its older chunks simply lack the field.
ADDED_FIELDS: dict[int, dict[str, dict[str, Any]]] = {
    2: {"content_hash": {"type": "keyword"}},  # sha256 of the document's normalised text
    3: {"readers": {"type": "keyword"}},  # the principals that may read the chunk (tenant was mapped already)
    # The structure-and-entity graph's part of each chunk (``entity_graph.chunk_node``): its entities
    # and its document's title entity, what the second hop counts and searches (``opensearch_graph``).
    4: {"graph_entities": {"type": "keyword"}, "graph_title": {"type": "keyword"}},
    # Stored in _source, never indexed: the chunk's sentence vectors (rag_common.sentence_vectors).
    5: {"sentence_vectors": {"type": "object", "enabled": False}},
}
#: The chunk's entities (normalised names, ``rag_retriever.entities``) and its title entity.
GRAPH_ENTITIES_FIELD = "graph_entities"
GRAPH_TITLE_FIELD = "graph_title"
#: What chunks written before version 3 get when an index is upgraded to it: the default tenant,
#: readable by all of it (the embedded backend's format upgrade does the same).
ACCESS_BACKFILL_VERSION = 3
VECTOR_FIELD = "embedding"
#: The chunk's sentence vectors (``SentenceVectors`` as JSON: base64 float32, about 2 KB per sentence).
SENTENCE_VECTORS_FIELD = "sentence_vectors"
#: Vectors are stored in ``_source`` (reindexing needs them) and sent back with hits only when a
#: search asks for them (``with_vectors``, ``with_sentence_vectors``): ``source_filter`` excludes
#: the others; with both, the whole ``_source`` comes back.
SOURCE_WITHOUT_VECTOR = {"excludes": [VECTOR_FIELD, SENTENCE_VECTORS_FIELD]}
SOURCE_WITH_VECTOR = {"excludes": [SENTENCE_VECTORS_FIELD]}
SOURCE_WITH_SENTENCE_VECTORS = {"excludes": [VECTOR_FIELD]}
SOURCE_WITH_BOTH = True
#: A title match says more about a chunk than one in its body.
BM25_FIELDS = ["text", "title^2"]
#: Metadata values that are also indexed as exact-match keyword fields (when strings or string lists).
#: Not ``tenant``: that is the chunk's own field (the ingesting caller's tenant), never the metadata's.
METADATA_KEYWORDS = ("content_type", "acl")
#: The chunk fields stored and returned as they are (``ChunkRecord.to_payload``).
CHUNK_FIELDS = tuple(f.name for f in fields(ChunkRecord))
#: Names of the search pipelines per fusion method (``{alias}-hybrid-{name}``).
PIPELINE_SUFFIX = {"min_max": "minmax", "z_score": "zscore", "rrf": "rrf"}

KnnEngine = Literal["faiss", "lucene"]
KnnSpace = Literal["cosinesimil", "innerproduct"]


@dataclass(frozen=True, slots=True)
class IndexConfig:
    """What the index is built for; ``dim`` and ``model_id`` come from the embedder."""

    alias: str
    dim: int
    model_id: str = ""
    engine: KnnEngine = "faiss"
    space: KnnSpace = "cosinesimil"
    m: int = 16
    ef_construction: int = 200
    ef_search: int = 100

    @property
    def template_name(self) -> str:
        return f"{self.alias}-template"


# --------------------------------------------------------------------------- index, template, aliases


def physical_index_name(alias: str, now: datetime) -> str:
    return f"{alias}-v{TEMPLATE_VERSION}-{now:%Y%m%d-%H%M%S}"


def index_template_body(config: IndexConfig) -> dict[str, Any]:
    """``PUT _index_template/{alias}-template``: every ``{alias}-v*`` physical index gets this."""
    keyword = {"type": "keyword"}
    return {
        "index_patterns": [f"{config.alias}-v*"],
        "priority": 100,
        "version": TEMPLATE_VERSION,
        "template": {
            "settings": {
                "index": {
                    "knn": True,
                    # Default ef at query time for faiss (lucene uses k); queries raise it to k.
                    "knn.algo_param.ef_search": config.ef_search,
                }
            },
            "mappings": {
                # A field the code does not know is a bug: reject the document instead of guessing a type.
                "dynamic": "strict",
                # Checked on startup: vectors of another model or dimension are not comparable.
                "_meta": {"template_version": TEMPLATE_VERSION, "model_id": config.model_id, "dim": config.dim},
                "properties": {
                    VECTOR_FIELD: {
                        "type": "knn_vector",
                        "dimension": config.dim,
                        "method": {
                            "name": "hnsw",
                            "engine": config.engine,
                            "space_type": config.space,
                            "parameters": {"m": config.m, "ef_construction": config.ef_construction},
                        },
                    },
                    "text": {"type": "text", "analyzer": "english"},
                    "title": {
                        "type": "text",
                        "analyzer": "english",
                        "fields": {"keyword": {"type": "keyword", "ignore_above": 256}},
                    },
                    "chunk_id": keyword,
                    "doc_id": keyword,
                    "source": keyword,
                    "section_path": keyword,
                    "content_type": keyword,
                    "tenant": keyword,
                    "acl": keyword,
                    "table_id": keyword,
                    "doc_fingerprint": keyword,
                    **{name: spec for added in ADDED_FIELDS.values() for name, spec in added.items()},
                    "page": {"type": "integer"},
                    "chunk_index": {"type": "integer"},
                    # Returned as stored, never searched: any shape a document's metadata has is fine.
                    "metadata": {"type": "object", "enabled": False},
                    "created_at": {"type": "date"},
                    "updated_at": {"type": "date"},
                },
            },
        },
    }


def mapping_upgrade_body(mappings: Mapping[str, Any]) -> dict[str, Any] | None:
    """``PUT /{index}/_mapping`` bringing an index of an older template version (``mappings`` as
    ``GET _mapping`` returns them) up to ``TEMPLATE_VERSION``: the fields the versions since added and
    ``_meta`` with the new version (``_meta`` is replaced whole, so its other keys are kept). None if
    the index is current, newer, or behind by a version that changed more than fields (reindex then).
    """
    meta = dict(mappings.get("_meta") or {})
    version = meta.get("template_version")
    if not isinstance(version, int) or version >= TEMPLATE_VERSION:
        return None
    missing = range(version + 1, TEMPLATE_VERSION + 1)
    if any(step not in ADDED_FIELDS for step in missing):
        return None
    properties = {name: spec for step in missing for name, spec in ADDED_FIELDS[step].items()}
    return {"_meta": {**meta, "template_version": TEMPLATE_VERSION}, "properties": properties}


def access_backfill_body() -> dict[str, Any]:
    """``POST {alias}/_update_by_query`` after an upgrade to version 3: chunks written before tenants
    and ACLs (no ``readers``) become the default tenant's, readable by all of it."""
    return {
        "query": {"bool": {"must_not": [{"exists": {"field": "readers"}}]}},
        "script": {
            "lang": "painless",
            "source": "ctx._source.tenant = params.tenant; ctx._source.readers = params.readers",
            "params": {"tenant": DEFAULT_TENANT, "readers": [EVERYONE]},
        },
    }


def create_index_body(alias: str | None) -> dict[str, Any]:
    """``PUT /{physical}``: settings and mappings come from the template; the alias (if any) atomically."""
    return {"aliases": {alias: {}}} if alias else {}


def reindex_body(source: str, dest: str) -> dict[str, Any]:
    return {"source": {"index": source}, "dest": {"index": dest}}


def alias_swap_body(alias: str, old_indices: Iterable[str], new_index: str) -> dict[str, Any]:
    """``POST _aliases``: one request, so readers and writers see the old index or the new, never neither."""
    actions: list[dict[str, Any]] = [{"remove": {"index": old, "alias": alias}} for old in sorted(old_indices)]
    actions.append({"add": {"index": new_index, "alias": alias}})
    return {"actions": actions}


# --------------------------------------------------------------------------- search pipelines


def pipeline_name(alias: str, fusion: FusionSettings) -> str:
    """A pure function of the fusion parameters: replicas with other settings (say, mid rolling
    deploy) use their own pipeline instead of overwriting each other's weights."""
    name = f"{alias}-hybrid-{PIPELINE_SUFFIX[fusion.method]}"
    if fusion.method == "rrf":
        return name if fusion.rank_constant == 60 else f"{name}-k{fusion.rank_constant}"
    per_mille = round(fusion.dense_weight * 1000)
    return name if per_mille == 500 else f"{name}-dense{per_mille}"


def pipeline_body(fusion: FusionSettings) -> dict[str, Any]:
    """``PUT _search/pipeline/{name}``. Weights are in sub-query order: [dense, bm25]."""
    if fusion.method == "rrf":
        processor = {
            "score-ranker-processor": {"combination": {"technique": "rrf", "rank_constant": fusion.rank_constant}}
        }
        description = f"RRF of [dense, bm25], rank_constant {fusion.rank_constant}"
    else:
        # Rounded so they sum to exactly 1.0, which the processor requires.
        dense = round(fusion.dense_weight, 4)
        weights = [dense, round(1.0 - dense, 4)]
        processor = {
            "normalization-processor": {
                "normalization": {"technique": fusion.method},
                "combination": {"technique": "arithmetic_mean", "parameters": {"weights": weights}},
            }
        }
        description = f"{fusion.method} then weighted mean of [dense, bm25] = {weights}"
    return {"description": description, "phase_results_processors": [processor]}


# --------------------------------------------------------------------------- queries


def access_clauses(access: AccessFilter | None) -> list[dict[str, Any]]:
    """What ``access`` may read: its tenant AND one of its principals among the chunk's readers."""
    if access is None:
        return []
    return [{"term": {"tenant": access.tenant}}, {"terms": {"readers": list(access.principals)}}]


def filter_clauses(filters: Filters | None, access: AccessFilter | None = None) -> list[dict[str, Any]]:
    """The access clauses, then one ``terms`` clause per field: AND across fields, OR within one,
    exact keyword matches."""
    clauses = access_clauses(access)
    for field, values in (filters or {}).items():
        if field not in FILTER_FIELDS:
            raise ValueError(f"unknown filter field {field!r}; allowed: {', '.join(FILTER_FIELDS)}")
        clauses.append({"terms": {field: [values] if isinstance(values, str) else list(values)}})
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


def bm25_clause(query: str, filters: Filters | None, access: AccessFilter | None = None) -> dict[str, Any]:
    # most_fields sums the fields' scores, like the embedded backend's BM25 over text + title.
    match = {"multi_match": {"query": query, "fields": list(BM25_FIELDS), "type": "most_fields"}}
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
    *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
) -> dict[str, Any]:
    return {
        "size": k,
        "_source": source_filter(with_vectors, with_sentence_vectors),
        "query": bm25_clause(query, filters, access),
    }


def hybrid_search_body(
    query: str, vector: np.ndarray, k: int, filters: Filters | None, ef_search: int,
    *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
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
                    bm25_clause(query, filters, access),
                ]
            }
        },
    }


# --------------------------------------------------------------------------- documents


def doc_query(doc_id: str, tenant: str | None = None) -> dict[str, Any]:
    """A document's chunks: (tenant, doc_id) identifies it; ``tenant=None`` (tools, tests) any tenant's."""
    if tenant is None:
        return {"term": {"doc_id": doc_id}}
    return {"bool": {"filter": [{"term": {"doc_id": doc_id}}, {"term": {"tenant": tenant}}]}}


def delete_document_body(doc_id: str, tenant: str | None = None) -> dict[str, Any]:
    return {"query": doc_query(doc_id, tenant)}


def chunk_ids_body(doc_id: str, page_size: int, after: str | None = None, tenant: str | None = None) -> dict[str, Any]:
    """One page of a document's chunk ids, sorted so ``search_after`` can page through any number."""
    body: dict[str, Any] = {
        "size": page_size,
        "_source": False,
        "query": doc_query(doc_id, tenant),
        "sort": [{"chunk_id": "asc"}],
    }
    if after is not None:
        body["search_after"] = [after]
    return body


def document_vectors_body(
    doc_id: str, page_size: int, after: str | None = None, tenant: str | None = None
) -> dict[str, Any]:
    """One page of a document's chunk ids with their stored vectors (reused by a re-ingest that
    changes no chunk text, e.g. only the ACL)."""
    body = chunk_ids_body(doc_id, page_size, after, tenant)
    body["_source"] = ["chunk_id", VECTOR_FIELD]
    return body


def document_sentence_vectors_body(
    doc_id: str, page_size: int, after: str | None = None, tenant: str | None = None
) -> dict[str, Any]:
    """One page of a document's chunk ids with their text and stored sentence vectors (a re-ingest
    embeds only the sentence strings none of them has a vector for)."""
    body = chunk_ids_body(doc_id, page_size, after, tenant)
    body["_source"] = ["chunk_id", "text", SENTENCE_VECTORS_FIELD]
    return body


def fingerprint_body(doc_id: str, tenant: str | None = None) -> dict[str, Any]:
    return {"size": 1, "_source": ["doc_fingerprint"], "query": doc_query(doc_id, tenant)}


def scope_clauses(tenant: str | None, access: AccessFilter | None) -> list[dict[str, Any]]:
    """The documents of ``tenant`` that ``access`` may read (either may be None: no restriction)."""
    clauses = access_clauses(access)
    if tenant is not None and (access is None or access.tenant != tenant):
        clauses.insert(0, {"term": {"tenant": tenant}})
    return clauses


def list_documents_body(
    page_size: int, after: str | None = None, tenant: str | None = None, access: AccessFilter | None = None
) -> dict[str, Any]:
    """One page of documents (of ``tenant``, readable under ``access``): a composite aggregation on
    doc_id (pages through all of them, unlike ``terms``), with one chunk's title, source and content
    hash per document."""
    composite: dict[str, Any] = {"size": page_size, "sources": [{"doc_id": {"terms": {"field": "doc_id"}}}]}
    if after is not None:
        composite["after"] = {"doc_id": after}
    clauses = scope_clauses(tenant, access)
    if not clauses:
        scope = {}
    elif len(clauses) == 1:
        scope = {"query": clauses[0]}
    else:
        scope = {"query": {"bool": {"filter": clauses}}}
    return {
        "size": 0,
        **scope,
        "aggs": {
            "docs": {
                "composite": composite,
                "aggs": {
                    "first": {"top_hits": {"size": 1, "_source": {"includes": ["title", "source", "content_hash"]}}}
                },
            }
        },
    }


def documents_with_content_body(
    hashes: Collection[str], tenant: str | None = None, access: AccessFilter | None = None
) -> dict[str, Any]:
    """Which documents (of ``tenant``, readable under ``access``) hold each of ``hashes``: a ``terms``
    query on ``content_hash`` and, per hash (one bucket each: ``size`` = the number of hashes), a
    ``terms`` aggregation on ``doc_id``. No hits, only the buckets. The caller sends at most
    ``PAGE_SIZE`` hashes per request."""
    wanted = sorted(set(hashes))
    query: dict[str, Any] = {"terms": {"content_hash": wanted}}
    scope = scope_clauses(tenant, access)
    if scope:
        query = {"bool": {"filter": [query, *scope]}}
    return {
        "size": 0,
        "query": query,
        "aggs": {
            "hashes": {
                "terms": {"field": "content_hash", "size": len(wanted)},
                "aggs": {"docs": {"terms": {"field": "doc_id", "size": MAX_DOCUMENTS_PER_CONTENT}}},
            }
        },
    }


def document_readers_body(doc_ids: Collection[str], tenant: str) -> dict[str, Any]:
    """The readers of each of ``doc_ids`` in ``tenant``: one bucket per indexed document (``size`` =
    the number of ids; the caller sends at most ``PAGE_SIZE``) with one chunk's ``readers`` (every
    chunk of a document carries the same)."""
    wanted = sorted(set(doc_ids))
    return {
        "size": 0,
        "query": {"bool": {"filter": [{"terms": {"doc_id": wanted}}, {"term": {"tenant": tenant}}]}},
        "aggs": {
            "docs": {
                "terms": {"field": "doc_id", "size": len(wanted)},
                "aggs": {"first": {"top_hits": {"size": 1, "_source": {"includes": ["readers"]}}}},
            }
        },
    }


def document_readers_from(response: Mapping[str, Any]) -> dict[str, list[str]]:
    """The answer to ``document_readers_body``: ``{doc_id: readers}`` of the indexed documents; chunks
    indexed before ACLs existed (no ``readers``) read as everyone's."""
    buckets = response.get("aggregations", {}).get("docs", {}).get("buckets", [])
    readers = {}
    for bucket in buckets:
        stored = bucket["first"]["hits"]["hits"][0]["_source"].get("readers", [EVERYONE])
        readers[bucket["key"]] = [stored] if isinstance(stored, str) else list(stored)
    return readers


def documents_with_content_from(response: Mapping[str, Any]) -> dict[str, list[str]]:
    """The answer to ``documents_with_content_body``: ``{hash: sorted doc ids}``, held hashes only."""
    buckets = response.get("aggregations", {}).get("hashes", {}).get("buckets", [])
    return {bucket["key"]: sorted(doc["key"] for doc in bucket["docs"]["buckets"]) for bucket in buckets}


def _keywords(value: Any) -> str | list[str] | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return value
    return None


def chunk_source(chunk: ChunkRecord, vector: np.ndarray, now: str) -> dict[str, Any]:
    """The stored document of one chunk: its payload (every ``ChunkRecord`` field; a new one the
    mapping lacks is rejected by ``dynamic: strict`` rather than silently lost), the metadata
    keywords, its graph fields (entities, title entity), timestamps and the vector. ``created_at`` = ``updated_at``: the ingestor replaces a
    changed document's chunks whole, so a chunk is never updated in place."""
    source = {key: value for key, value in chunk.to_payload().items() if value is not None}
    for key in METADATA_KEYWORDS:
        value = _keywords(chunk.metadata.get(key))
        if value is not None:
            source[key] = value
    node = chunk_node(chunk)
    source[GRAPH_ENTITIES_FIELD] = list(node.entities)
    if node.title_entity:
        source[GRAPH_TITLE_FIELD] = node.title_entity
    source["created_at"] = now
    source["updated_at"] = now
    source[VECTOR_FIELD] = np.asarray(vector, dtype=np.float32).tolist()
    return source


def bulk_actions(
    index: str, chunks: Sequence[ChunkRecord], vectors: np.ndarray, now: str
) -> list[dict[str, Any]]:
    """``index`` actions (create or replace) keyed by chunk id: re-sending a chunk never duplicates it."""
    return [
        {"_op_type": "index", "_index": index, "_id": chunk.chunk_id, "_source": chunk_source(chunk, vector, now)}
        for chunk, vector in zip(chunks, vectors, strict=True)
    ]


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
    names: Sequence[str], k: int, filters: Filters | None, *, access: AccessFilter | None, with_vectors: bool
) -> list[dict[str, Any]]:
    """``POST {alias}/_msearch``: one BM25 search per follow-up name, each exactly ``bm25_search_body``
    (the caller's filters and access inside), in one round trip. Header lines are empty: the index is
    the URL's."""
    lines: list[dict[str, Any]] = []
    for name in names:
        lines.append({})
        lines.append(bm25_search_body(name, k, filters, access=access, with_vectors=with_vectors))
    return lines


def msearch_hits(response: Mapping[str, Any], *, with_vectors: bool) -> list[list[ScoredChunk]]:
    """Each ``_msearch`` answer's hits, in request order; a failed one raises (no silent partial hop)."""
    answers = []
    for answer in response.get("responses", []):
        if "error" in answer:
            raise RuntimeError(f"a follow-up search failed: {answer['error']}")
        answers.append(scored_hits(answer, with_vectors=with_vectors))
    return answers


# --------------------------------------------------------------------------- answers


def bulk_failures(errors: Iterable[dict[str, Any]], doc_id_of: dict[str, str]) -> list[ChunkWriteFailure]:
    """``async_bulk``'s per-item errors (``{op: {"_id", "status", "error"}}``) → one failure per chunk."""
    failures = []
    for item in errors:
        [(_, info)] = item.items()
        chunk_id = str(info.get("_id", ""))
        error = info.get("error")
        if isinstance(error, dict):
            reason = f"{error.get('type', 'error')}: {error.get('reason', '')}".strip()
        else:
            reason = str(error)
        reason = f"{reason} (HTTP {info.get('status')})"
        failures.append(ChunkWriteFailure(chunk_id=chunk_id, doc_id=doc_id_of.get(chunk_id, ""), reason=reason))
    return failures


def chunk_from_source(source: dict[str, Any]) -> ChunkRecord:
    # Absent fields (stored as null, or older documents) take the dataclass defaults.
    return ChunkRecord.from_payload({key: source[key] for key in CHUNK_FIELDS if source.get(key) is not None})


def sentence_vectors_from_source(source: Mapping[str, Any]) -> tuple[str, SentenceVectors | None]:
    """A hit of ``document_sentence_vectors_body``: the chunk's text and its stored sentence vectors
    (None for a chunk written without them)."""
    stored = source.get(SENTENCE_VECTORS_FIELD)
    return source.get("text", ""), SentenceVectors.model_validate(stored) if isinstance(stored, dict) else None


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
