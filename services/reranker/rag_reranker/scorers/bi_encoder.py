"""Relevance as cosine similarity of bi-encoder embeddings: the fallback when no cross-encoder is set."""

from __future__ import annotations

import numpy as np

from rag_common.embedders import Embedder


class BiEncoderScorer:
    """Scores with the same kind of embedder the retriever uses (MiniLM by default).

    Weaker than a cross-encoder because query and passage never attend to each other, but it is a
    real relevance signal, ships with the repo and runs fast on CPU.
    """

    name = "bi_encoder"

    def __init__(self, embedder: Embedder) -> None:
        self._embedder = embedder

    @property
    def model_id(self) -> str:
        return self._embedder.model_id

    def warm_up(self) -> None:
        self._embedder.warm_up()

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        if not passages:
            return np.zeros(0, dtype=np.float32)
        query_vector = self._embedder.encode_queries([query])[0]
        passage_vectors = self._embedder.encode_documents(passages)
        # Both sides are unit length, so the dot product is the cosine similarity.
        return (passage_vectors @ query_vector).astype(np.float32)
