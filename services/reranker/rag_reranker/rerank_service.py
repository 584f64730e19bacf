"""Reranking as plain Python: score every candidate, order, keep the best ``top_k``."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from rag_common.schemas import Passage, RerankRequest, RerankResponse
from rag_reranker.scorers.base import PairScorer


class RerankService:
    def __init__(self, scorer: PairScorer) -> None:
        self._scorer = scorer

    @property
    def scorer(self) -> PairScorer:
        return self._scorer

    async def rerank(self, request: RerankRequest) -> RerankResponse:
        if not request.passages:
            # Nothing to score means no stage ran: no model call and nothing to time.
            return RerankResponse(passages=[], stages=[], timings_ms={})

        name = self._scorer.name
        started = time.perf_counter()
        scores = await asyncio.to_thread(self._scorer.score, request.query, [p.text for p in request.passages])
        elapsed_ms = (time.perf_counter() - started) * 1000.0

        scores = np.asarray(scores, dtype=np.float64)
        if scores.shape != (len(request.passages),):
            raise RuntimeError(
                f"scorer {name!r} returned scores of shape {scores.shape} for {len(request.passages)} passages"
            )
        if not np.all(np.isfinite(scores)):
            # A NaN would sort arbitrarily and cannot be sent as JSON; it means the model is broken.
            raise RuntimeError(f"scorer {name!r} returned non-finite scores")

        return RerankResponse(
            passages=rank_passages(request.passages, scores, request.top_k),
            stages=[name],
            timings_ms={name: round(elapsed_ms, 3)},
        )


def rank_passages(passages: list[Passage], scores: np.ndarray, top_k: int) -> list[Passage]:
    """The ``top_k`` passages by descending score, each carrying its new score.

    Ties keep their input order (a stable sort), so equal scores never reshuffle the retriever's order.
    """
    order = np.argsort(-scores, kind="stable")[:top_k]
    return [passages[i].model_copy(update={"score": float(scores[i])}) for i in order]
