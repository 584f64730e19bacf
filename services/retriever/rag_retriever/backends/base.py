"""The backend seam: the embedded index today, OpenSearch later."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

import numpy as np

from rag_common.schemas import DocumentInfo
from rag_retriever.records import ChunkRecord, ScoredChunk

#: Fields a search may filter on, each an exact match on the whole value.
FILTER_FIELDS = ("doc_id", "source", "tenant", "content_type")

#: ``{field: allowed values}``: a chunk matches when, for every field, its value is one of the
#: allowed values (AND across fields, OR within a field).
Filters = Mapping[str, Sequence[str]]


class SearchBackend(Protocol):
    def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        """Index ``chunks`` with their unit-length ``vectors``; an existing ``chunk_id`` is replaced."""

    def delete_document(self, doc_id: str) -> int:
        """Remove every chunk of ``doc_id``; returns how many there were."""

    def document_chunk_ids(self, doc_id: str) -> set[str]:
        """Chunk ids currently indexed for ``doc_id`` (empty if unknown)."""

    def document_fingerprint(self, doc_id: str) -> str | None:
        """The ``doc_fingerprint`` stored with ``doc_id``'s chunks, or None if unknown."""

    def search_dense(self, vector: np.ndarray, k: int, filters: Filters | None = None) -> list[ScoredChunk]:
        """Nearest chunks by cosine; score = (1 + cosine) / 2 in [0, 1]. Filters apply inside the search."""

    def search_bm25(self, query: str, k: int, filters: Filters | None = None) -> list[ScoredChunk]:
        """Best chunks by BM25 over text and title; score = raw BM25 (>= 0)."""

    def list_documents(self) -> list[DocumentInfo]:
        """One entry per indexed document, ordered by doc_id."""

    def count(self) -> int:
        """Number of indexed chunks."""

    def close(self) -> None:
        """Flush and release files; the backend is unusable afterwards."""

