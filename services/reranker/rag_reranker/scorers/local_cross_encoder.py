"""What every cross-encoder loader shares: the checked settings and the model resolved on local disk."""

from __future__ import annotations

import threading
from pathlib import Path

from rag_common.embedders import resolve_model_path


class LocalCrossEncoder:
    """Base of the loaders (sentence-transformers, FlagEmbedding): one model, one place to check its settings.

    ``model`` is a local directory or a Hugging Face id already in the offline cache; it is
    resolved at construction so a missing model fails at start-up, never by downloading.
    """

    def __init__(
        self,
        model: str,
        max_length: int = 512,
        sigmoid: bool = True,
        batch_size: int = 32,
        device: str | None = None,
    ) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.model_id = model
        self._path = resolve_model_path(model)
        self._requested_max_length = max_length
        self._sigmoid = sigmoid
        self._batch_size = batch_size
        self._requested_device = device
        self._lock = threading.Lock()
        #: Tokens per (query, passage) pair the model sees; known after ``warm_up``.
        self.max_length = 0

    @property
    def path(self) -> Path:
        return self._path
