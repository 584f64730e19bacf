"""The scorer seam: every reranking stage (bi-encoder, cross-encoder, later fusions) fits it."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class PairScorer(Protocol):
    #: Stage name reported in ``RerankResponse.stages`` and ``timings_ms``.
    name: str

    def warm_up(self) -> None:
        """Load weights and run one dummy batch, so the first request is not slow. Idempotent."""

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        """Shape ``(len(passages),)``; higher means more relevant. Blocking: call it off the event loop."""
