"""Any sentence-transformers bi-encoder, loaded from a local path or the offline HF cache."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from rag_common.embedders.models import resolve_model_path


class SentenceTransformerEmbedder:
    def __init__(
        self,
        model: str = "all-MiniLM-L6-v2",
        *,
        device: str | None = None,
        batch_size: int = 64,
        query_prefix: str = "",
        document_prefix: str = "",
    ) -> None:
        self.model_id = model
        self._path = resolve_model_path(model)
        self._device = device
        self._batch_size = batch_size
        self._query_prefix = query_prefix
        self._document_prefix = document_prefix
        self._model = None
        self._lock = threading.Lock()
        self.dim = 0
        self.max_seq_length = 0

    def warm_up(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(self._path), device=self._device, local_files_only=True)
            self.dim = int(model.get_embedding_dimension())
            self.max_seq_length = int(model.max_seq_length)
            model.encode(["warm up"], normalize_embeddings=True, show_progress_bar=False)
            self._model = model

    @property
    def model(self):  # noqa: ANN201 - SentenceTransformer, imported lazily
        if self._model is None:
            self.warm_up()
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.model.get_embedding_dimension()), dtype=np.float32)
        vectors = self.model.encode(
            texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode([self._query_prefix + t for t in texts])

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode([self._document_prefix + t for t in texts])

    def count_tokens(self, text: str) -> int:
        return len(self.model.tokenizer(text, add_special_tokens=False)["input_ids"])

    @property
    def path(self) -> Path:
        return self._path
