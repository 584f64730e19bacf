"""Embeddings of the query and candidates, taken from the request or computed once on demand.

The retriever sends the stored vectors when asked (``include_embeddings``), which saves the
reranker re-embedding every candidate; anything missing is embedded here with the same model.
"""

from __future__ import annotations

import asyncio

import numpy as np

from rag_common.embedders import Embedder
from rag_common.schemas import Passage


class EmbeddingMismatch(ValueError):
    """Given embeddings disagree in dimension: the request is wrong, not the service."""


class CandidateEmbeddings:
    def __init__(
        self, query: str, query_embedding: list[float] | None, passages: list[Passage], embedder: Embedder | None
    ) -> None:
        self._query = query
        self._passages = passages
        self._embedder = embedder
        self._query_vector = None if query_embedding is None else np.asarray(query_embedding, dtype=np.float32)
        self._matrix: np.ndarray | None = None
        self.computed = 0  # vectors this request had to embed itself (0 when the retriever sent them all)
        dims = {len(p.embedding) for p in passages if p.embedding is not None}
        if self._query_vector is not None:
            dims.add(self._query_vector.shape[0])
        if embedder is not None and embedder.dim and dims and dims != {embedder.dim}:  # dim is 0 before warm-up
            raise EmbeddingMismatch(
                f"embeddings in the request have dimension {sorted(dims)}, the reranker's embedder "
                f"{embedder.model_id!r} has {embedder.dim}: send embeddings from the same model or none"
            )
        if len(dims) > 1:
            raise EmbeddingMismatch(f"embeddings in the request have mixed dimensions {sorted(dims)}")

    async def query_vector(self) -> np.ndarray:
        if self._query_vector is None:
            embedder = self._require_embedder()
            self._query_vector = (await asyncio.to_thread(embedder.encode_queries, [self._query]))[0]
            self.computed += 1
        return self._query_vector

    async def matrix(self) -> np.ndarray:
        """Shape ``(n, dim)``, aligned to the request's passages."""
        if self._matrix is None:
            missing = [i for i, p in enumerate(self._passages) if p.embedding is None]
            computed = None
            if missing:
                embedder = self._require_embedder()
                texts = [self._passages[i].text for i in missing]
                computed = await asyncio.to_thread(embedder.encode_documents, texts)
                self.computed += len(missing)
            dim = computed.shape[1] if computed is not None else len(self._passages[0].embedding or [])
            matrix = np.zeros((len(self._passages), dim), dtype=np.float32)
            for i, p in enumerate(self._passages):
                if p.embedding is not None:
                    matrix[i] = p.embedding
            if computed is not None:
                matrix[missing] = computed
            self._matrix = matrix
        return self._matrix

    def _require_embedder(self) -> Embedder:
        if self._embedder is None:
            raise RuntimeError("the request carries no embeddings and the reranker has no embedder")
        return self._embedder
