"""The cross-encoder seam: (query, passage) pairs in, one relevance score per pair out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class PairScorer(Protocol):
    #: Identifies the model (name or path) in logs and reports.
    model_id: str

    def warm_up(self) -> None:
        """Load weights and run one dummy batch, so the first request is not slow. Idempotent."""

    def score_pairs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        """Shape ``(len(pairs),)``; higher means more relevant. Blocking: call it off the event loop.

        Pairs may come from different queries (the micro-batcher mixes concurrent requests).
        """
