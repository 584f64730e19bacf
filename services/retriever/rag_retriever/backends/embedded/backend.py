"""The embedded backend's async ``SearchBackend``: each call of ``EmbeddedIndex`` in a worker thread,
hybrid fused in-process (``EmbeddedIndex.search_hybrid``, ``rag_retriever.fusion``).

Beyond ``SearchBackend`` it has the abilities ``backends.base`` declares: ``GraphSearcher``
(``graph_search``), ``FusionCandidateSource`` (``fusion_candidates``) and ``StagedWriter``
(``prepare_replacement`` / ``commit_prepared`` / ``abandon_prepared``). ``rag_retriever.runtime``
hands them to the services; nothing looks for them here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.languages import LanguageIdentifier
from rag_common.schemas import DocumentInfo, SentenceVectors
from rag_retriever.backends.base import AccessFilter, Filters, FusionCandidates, FusionSettings, GraphOptions, HnswParams
from rag_retriever.backends.embedded.index import EmbeddedIndex
from rag_retriever.backends.embedded.prepared_write import PreparedWrite
from rag_retriever.records import ChunkRecord, ScoredChunk


class EmbeddedBackend:
    """``SearchBackend`` over an ``EmbeddedIndex``: its blocking calls run in worker threads."""

    def __init__(
        self, index_dir: str | Path, dim: int, hnsw: HnswParams, *, model_id: str = "",
        languages: Collection[str] | None = None, identifier: LanguageIdentifier | None = None,
        neutral_weight: float = 1.0,
    ) -> None:
        """``languages``, ``identifier``, ``neutral_weight``: as ``EmbeddedIndex`` takes them."""
        self.index = EmbeddedIndex(
            index_dir, dim, hnsw, model_id=model_id, languages=languages, identifier=identifier,
            neutral_weight=neutral_weight,
        )

    async def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        await asyncio.to_thread(self.index.upsert, chunks, vectors)

    async def delete_document(self, doc_id: str, *, tenant: str | None = None) -> int:
        return await asyncio.to_thread(self.index.delete_document, doc_id, tenant=tenant)

    async def replace_documents(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> None:
        await asyncio.to_thread(self.index.replace_documents, doc_ids, chunks, vectors, tenant=tenant)

    # A replacement in two steps (``EmbeddedIndex.prepare_replacement``): the ingestor lets searches run
    # while it is prepared and holds its lock alone for the commit (``Ingestor._write``).
    async def prepare_replacement(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> PreparedWrite | None:
        return await asyncio.to_thread(self.index.prepare_replacement, doc_ids, chunks, vectors, tenant=tenant)

    async def commit_prepared(self, prepared: PreparedWrite | None) -> None:
        await asyncio.to_thread(self.index.commit_prepared, prepared)

    async def abandon_prepared(self, prepared: PreparedWrite | None) -> None:
        await asyncio.to_thread(self.index.abandon_prepared, prepared)

    async def document_chunk_ids(self, doc_id: str, *, tenant: str | None = None) -> set[str]:
        return await asyncio.to_thread(self.index.document_chunk_ids, doc_id, tenant=tenant)

    async def document_fingerprint(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        return await asyncio.to_thread(self.index.document_fingerprint, doc_id, tenant=tenant)

    async def document_vectors(self, doc_id: str, *, tenant: str | None = None) -> dict[str, np.ndarray]:
        return await asyncio.to_thread(self.index.document_vectors, doc_id, tenant=tenant)

    async def document_sentence_vectors(
        self, doc_id: str, *, tenant: str | None = None
    ) -> dict[str, tuple[str, SentenceVectors | None]]:
        return await asyncio.to_thread(self.index.document_sentence_vectors, doc_id, tenant=tenant)

    async def document_readers(self, doc_ids: Collection[str], *, tenant: str) -> dict[str, list[str]]:
        return await asyncio.to_thread(self.index.document_readers, doc_ids, tenant=tenant)

    async def documents_with_content(
        self, hashes: Collection[str], *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> dict[str, list[str]]:
        return await asyncio.to_thread(self.index.documents_with_content, hashes, tenant=tenant, access=access)

    async def search_dense(
        self, vector: np.ndarray, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        return await asyncio.to_thread(
            self.index.search_dense, vector, k, filters, access=access, with_vectors=with_vectors
        )

    async def search_bm25(
        self, query: str, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
        language: str | None = None,
    ) -> list[ScoredChunk]:
        return await asyncio.to_thread(
            self.index.search_bm25, query, k, filters, access=access, with_vectors=with_vectors, language=language
        )

    async def search_hybrid(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, fusion: FusionSettings,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
        language: str | None = None,
    ) -> list[ScoredChunk]:
        if fusion.method == "z_score":
            raise ValueError("the embedded backend fuses with min_max or rrf; z_score needs the opensearch backend")
        # One thread hop: both lists, fused by label, then only the winners' documents read.
        return await asyncio.to_thread(
            self.index.search_hybrid, query, vector, k, filters, fusion, access=access, with_vectors=with_vectors,
            language=language,
        )

    async def graph_search(
        self, query: str, hits: list[ScoredChunk], k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, hop: bool, options: GraphOptions,
    ) -> tuple[list[ScoredChunk], dict[str, Any]]:
        return await asyncio.to_thread(
            self.index.graph_search, query, hits, k, filters, access,
            with_vectors=with_vectors, ppr=ppr, hop=hop, options=options,
        )

    async def fusion_candidates(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, options: GraphOptions, dense_weight: float, language: str | None = None,
    ) -> FusionCandidates:
        """Learned fusion's candidates: the two lists hybrid search fuses (same depth, access inside
        each; BM25 analysed for ``language``), then the graph's additions and every candidate's
        signals; one thread hop, as ``search_hybrid``."""
        return await asyncio.to_thread(
            self.index.fusion_candidates, query, vector, k, filters, access,
            with_vectors=with_vectors, ppr=ppr, options=options, dense_weight=dense_weight, language=language,
        )

    async def list_documents(
        self, *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> list[DocumentInfo]:
        return await asyncio.to_thread(self.index.list_documents, tenant=tenant, access=access)

    async def count(self) -> int:
        return await asyncio.to_thread(self.index.count)

    async def close(self) -> None:
        await asyncio.to_thread(self.index.close)
