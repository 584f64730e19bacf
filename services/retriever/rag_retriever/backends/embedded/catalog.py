"""The embedded index's catalog lookups: what is stored of a document (its chunk ids, fingerprint,
vectors, sentence vectors, readers), which documents hold a content, the document list and the
chunk count. Reads of the tantivy index only, through the index's searcher (which checks it is
open); no lock: a tantivy searcher is a consistent snapshot.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection

import numpy as np
import tantivy
from tantivy import Query

from rag_common.schemas import DocumentInfo, SentenceVectors
from rag_retriever.backends.base import MAX_DOCUMENTS_PER_CONTENT, AccessFilter
from rag_retriever.backends.embedded.text_index import TextIndex, all_hits, record
from rag_retriever.records import ChunkRecord

# Tantivy's default cap on aggregation buckets; list_documents cannot list more documents than this.
_MAX_LISTED_DOCUMENTS = 65_000
#: Content hashes per aggregation in ``documents_with_content``.
_LOOKUP_BATCH = 1000


class TantivyCatalog:
    """The lookups of what the tantivy index stores (the access-checked catalog the routes use is
    ``rag_retriever.document_access.DocumentCatalog``, over the backend)."""

    def __init__(self, text: TextIndex, searcher: Callable[[], tantivy.Searcher]) -> None:
        self._text = text
        self._searcher = searcher

    def document_chunk_ids(self, doc_id: str, *, tenant: str | None = None) -> set[str]:
        searcher = self._searcher()
        return {chunk.chunk_id for chunk in self._text.records_matching(searcher, self._text.doc_query(doc_id, tenant))}

    def document_fingerprint(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        searcher = self._searcher()
        hits = searcher.search(self._text.doc_query(doc_id, tenant), limit=1).hits
        return record(searcher, hits[0][1]).doc_fingerprint if hits else None

    def document_vectors(self, doc_id: str, *, tenant: str | None = None) -> dict[str, np.ndarray]:
        searcher = self._searcher()
        vectors = {}
        for address in all_hits(searcher, self._text.doc_query(doc_id, tenant)):
            stored = searcher.doc(address)
            chunk = ChunkRecord.from_payload(json.loads(stored.get_first("payload")))
            vectors[chunk.chunk_id] = np.frombuffer(stored.get_first("vector"), dtype="<f4").astype(np.float32)
        return vectors

    def document_sentence_vectors(
        self, doc_id: str, *, tenant: str | None = None
    ) -> dict[str, tuple[str, SentenceVectors | None]]:
        searcher = self._searcher()
        return {
            chunk.chunk_id: (chunk.text, chunk.sentence_vectors)
            for chunk in self._text.records_matching(searcher, self._text.doc_query(doc_id, tenant))
        }

    def document_readers(self, doc_ids: Collection[str], *, tenant: str) -> dict[str, list[str]]:
        searcher = self._searcher()
        readers = {}
        for doc_id in sorted(set(doc_ids)):
            # Every chunk of a document carries the same readers: one hit says them.
            hits = searcher.search(self._text.doc_query(doc_id, tenant), limit=1).hits
            if hits:
                readers[doc_id] = list(record(searcher, hits[0][1]).readers)
        return readers

    def documents_with_content(
        self, hashes: Collection[str], *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> dict[str, list[str]]:
        wanted = sorted(set(hashes))
        searcher = self._searcher()
        holders: dict[str, list[str]] = {}
        if searcher.num_docs == 0:
            return holders
        # One bucket per hash, so a batch stays far below tantivy's cap on aggregation buckets.
        for start in range(0, len(wanted), _LOOKUP_BATCH):
            batch = wanted[start : start + _LOOKUP_BATCH]
            aggregation = {
                "hashes": {
                    "terms": {"field": "content_hash", "size": len(batch)},
                    "aggs": {"docs": {"terms": {"field": "doc_id", "size": MAX_DOCUMENTS_PER_CONTENT}}},
                }
            }
            query = self._text.in_tenant(self._text.terms_query("content_hash", batch), tenant)
            result = searcher.aggregate(self._text.restricted(query, access), aggregation)
            for bucket in result["hashes"]["buckets"]:
                holders[bucket["key"]] = sorted(doc["key"] for doc in bucket["docs"]["buckets"])
        return holders

    def list_documents(self, *, tenant: str | None = None, access: AccessFilter | None = None) -> list[DocumentInfo]:
        searcher = self._searcher()
        if searcher.num_docs == 0:
            return []
        result = searcher.aggregate(
            self._text.restricted(self._text.in_tenant(Query.all_query(), tenant), access),
            {"docs": {"terms": {"field": "doc_id", "size": _MAX_LISTED_DOCUMENTS}}},
        )
        documents = []
        for bucket in result["docs"]["buckets"]:
            hits = searcher.search(self._text.doc_query(bucket["key"], tenant), limit=1).hits
            if not hits:
                continue
            chunk = record(searcher, hits[0][1])
            documents.append(
                DocumentInfo(
                    doc_id=chunk.doc_id,
                    title=chunk.title,
                    source=chunk.source,
                    chunks=bucket["doc_count"],
                    content_hash=chunk.content_hash,
                )
            )
        return sorted(documents, key=lambda info: info.doc_id)

    def count(self) -> int:
        return self._searcher().num_docs
