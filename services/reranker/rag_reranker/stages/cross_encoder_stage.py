"""Chain stage: the cross-encoder's relevance score for every candidate, through the micro-batcher."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from rag_common.schemas import RerankStageSpec
from rag_reranker.stages.base import CandidateSet, StageOutcome, StageSkipped


class PairScoringQueue(Protocol):
    async def score(self, pairs: list[tuple[str, str]]) -> np.ndarray: ...


NO_MODEL_REASON = (
    "no cross-encoder configured (RERANKER_CROSS_ENCODER_MODEL is empty); "
    "set it to a local copy of e.g. BAAI/bge-reranker-v2-m3"
)


class CrossEncoderStage:
    name = "cross_encoder"

    def __init__(self, queue: PairScoringQueue | None, model_id: str = "") -> None:
        self._queue = queue
        self.model_id = model_id

    async def run(self, candidates: CandidateSet, spec: RerankStageSpec) -> StageOutcome:
        if self._queue is None:
            raise StageSkipped(NO_MODEL_REASON)
        scores = np.asarray(
            await self._queue.score([(candidates.query, p.text) for p in candidates.passages]), dtype=np.float64
        )
        if scores.shape != (len(candidates.passages),):
            raise RuntimeError(f"cross-encoder returned {scores.shape} scores for {len(candidates.passages)} passages")
        if not np.all(np.isfinite(scores)):
            # A NaN would sort arbitrarily and cannot be sent as JSON: the model is broken.
            raise RuntimeError("cross-encoder returned non-finite scores")
        # Only the candidates still in play are reordered (an earlier gMMR may have cut the set).
        order = candidates.order[np.argsort(-scores[candidates.order], kind="stable")]
        return StageOutcome(order=order, scores=scores, detail={"model": self.model_id})
