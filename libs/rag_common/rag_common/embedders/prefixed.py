"""What the local bi-encoders share, whatever runs the network: one class for both backends.

The model's local weights (``resolve_model_path``: nothing is downloaded), the batch size, the
query and document prefixes some models are trained with (``"query: "``, ``"passage: "``; by default the
ones the model folder declares, as sentence-transformers' encode_query/encode_document use them), the lock
around the one-time load, and the encode methods that put the prefixes on and warn about documents
the model will truncate. A backend (:mod:`~rag_common.embedders.onnx_runtime`,
:mod:`~rag_common.embedders.sentence_transformer`) supplies the load (``warm_up``), the forward pass
(``_encode``) and its tokenizer's view (``input_tokens``, ``warn_truncation``).
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from rag_common.embedders.models import resolve_model_path
from rag_common.embedders.st_config import declared_prompts

#: Texts per forward pass of a bi-encoder unless its caller says otherwise (the reranker passes its
#: ``RERANKER_BATCH_SIZE``); no setting of the other services holds it.
EMBED_BATCH_SIZE = 64


class PrefixedBiEncoder(ABC):
    #: ``EMBEDDER_BACKEND`` value of the subclass.
    backend: str

    def __init__(
        self, model: str, *, batch_size: int, query_prefix: str | None, document_prefix: str | None
    ) -> None:
        """A prefix of ``None`` is the one the model declares (``st_config.declared_prompts``; none: ``""``)."""
        self.model_id = model
        self._path = resolve_model_path(model)
        self._batch_size = batch_size
        declared_query, declared_document = declared_prompts(self._path)
        self._query_prefix = declared_query if query_prefix is None else query_prefix
        self._document_prefix = declared_document if document_prefix is None else document_prefix
        self._lock = threading.Lock()
        self.dim = 0
        self.max_seq_length = 0

    @property
    def path(self) -> Path:
        return self._path

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._encode([self._query_prefix + t for t in texts])

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self._encode(self._prefixed_documents(texts))

    def _prefixed_documents(self, texts: list[str]) -> list[str]:
        """``texts`` as the model sees them as documents (prefixed), truncation warned about."""
        prefixed = [self._document_prefix + t for t in texts]
        self.warn_truncation(prefixed)
        return prefixed

    @abstractmethod
    def warm_up(self) -> None:
        """Load weights and run one dummy batch, so the first request is not slow."""

    @abstractmethod
    def _encode(self, texts: list[str]) -> np.ndarray:
        """Unit vectors of ``texts`` exactly as given (already prefixed): shape (n, dim), float32."""

    @abstractmethod
    def warn_truncation(self, texts: list[str]) -> int:
        """Log (warning) how many of ``texts`` the model will cut at ``max_seq_length``; returns that number."""
