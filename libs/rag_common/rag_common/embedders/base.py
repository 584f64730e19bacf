"""The embedder seam: text in, L2-normalised float32 vectors out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Embedder(Protocol):
    #: Vector dimension.
    dim: int
    #: Longest input in model tokens; longer text would be truncated by the model.
    max_seq_length: int
    #: Identifies the model (name or path) in logs, indexes and reports.
    model_id: str

    def warm_up(self) -> None:
        """Load weights and run one dummy batch, so the first request is not slow."""

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        """Shape (n, dim), float32, unit length."""

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        """Shape (n, dim), float32, unit length."""

    def count_tokens(self, text: str) -> int:
        """Tokens the model would see for ``text`` (without special tokens)."""
