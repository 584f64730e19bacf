"""The OpenSearch backend's document and catalog requests, as pure functions: a document's chunks
(ids, fingerprint, stored vectors and sentence vectors, delete), the catalog's aggregations (list,
content lookup, readers) and their parsers, and the bulk write (chunk documents and its failures).

No I/O here (``opensearch.py`` sends these); the golden tests pin the exact bodies.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from rag_common.identity import EVERYONE
from rag_common.languages import normalise_text
from rag_common.schemas import SentenceVectors
from rag_retriever.backends.base import MAX_DOCUMENTS_PER_CONTENT, AccessFilter, ChunkWriteFailure
from rag_retriever.backends.opensearch_index import (
    GRAPH_ENTITIES_FIELD,
    GRAPH_TITLE_FIELD,
    SENTENCE_VECTORS_FIELD,
    TEXT_SOURCES,
    VECTOR_FIELD,
    language_field,
)
from rag_retriever.backends.opensearch_queries import access_clauses
from rag_retriever.entity_graph import chunk_node
from rag_retriever.records import ChunkRecord

#: Metadata values that are also indexed as exact-match keyword fields (when strings or string lists).
#: Not ``tenant``: that is the chunk's own field (the ingesting caller's tenant), never the metadata's.
METADATA_KEYWORDS = ("content_type", "acl")


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


def sentence_vectors_from_source(source: Mapping[str, Any]) -> tuple[str, SentenceVectors | None]:
    """A hit of ``document_sentence_vectors_body``: the chunk's text and its stored sentence vectors
    (None for a chunk written without them)."""
    stored = source.get(SENTENCE_VECTORS_FIELD)
    return source.get("text", ""), SentenceVectors.model_validate(stored) if isinstance(stored, dict) else None


# --------------------------------------------------------------------------- catalog


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


# --------------------------------------------------------------------------- writes


def _keywords(value: Any) -> str | list[str] | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(item, str) for item in value):
        return value
    return None


def chunk_source(chunk: ChunkRecord, vector: np.ndarray, now: str, languages: Sequence[str]) -> dict[str, Any]:
    """The stored document of one chunk: its payload (every ``ChunkRecord`` field; a new one the
    mapping lacks is rejected by ``dynamic: strict`` rather than silently lost), the metadata
    keywords, its routed language fields, its graph fields (entities, title entity), timestamps and
    the vector. ``created_at`` = ``updated_at``: the ingestor replaces a changed document's chunks
    whole, so a chunk is never updated in place."""
    source = {key: value for key, value in chunk.to_payload().items() if value is not None}
    source.update(routed_texts(chunk, languages))
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


def routed_texts(chunk: ChunkRecord, languages: Sequence[str]) -> dict[str, str]:
    """``text_<code>`` and ``title_<code>`` (non-empty ones) of a chunk whose language is one of the
    configured ``languages``, ``normalise_text``-ed like the queries; none for any other chunk (the
    neutral ``text`` and ``title`` find it). Kept in ``_source`` so that a reindex or an update by
    query carries them (``opensearch_index.REINDEX_SCRIPT`` makes them again for other languages)."""
    code = chunk.language
    if code is None or code not in languages:
        return {}
    texts = {"text": chunk.text, "title": chunk.title}
    return {language_field(source, code): normalise_text(texts[source]) for source in TEXT_SOURCES if texts[source]}


def bulk_actions(
    index: str, chunks: Sequence[ChunkRecord], vectors: np.ndarray, now: str, languages: Sequence[str]
) -> list[dict[str, Any]]:
    """``index`` actions (create or replace) keyed by chunk id: re-sending a chunk never duplicates it."""
    return [
        {
            "_op_type": "index", "_index": index, "_id": chunk.chunk_id,
            "_source": chunk_source(chunk, vector, now, languages),
        }
        for chunk, vector in zip(chunks, vectors, strict=True)
    ]


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
