"""Chain stage: gMMR selection of ``top_k`` candidates, with a fixed or query-adaptive λ."""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Literal

import numpy as np

from rag_common.schemas import GmmrSpec, RerankStageSpec
from rag_reranker.stages.adaptive_lambda import AdaptiveLambdaSelector
from rag_reranker.stages.base import CandidateSet, StageOutcome
from rag_reranker.stages.gmmr import GeometricMMR

if TYPE_CHECKING:
    from rag_reranker.settings import RerankerSettings

logger = logging.getLogger(__name__)


class GmmrStage:
    name = "gmmr"

    def __init__(
        self,
        default_lambda: float,
        *,
        default_relevance: Literal["cosine", "scores"],
        adaptive: AdaptiveLambdaSelector | None,
        lambdas: tuple[float, ...],
        adaptive_timeout_s: float,
    ) -> None:
        """Everything but ``adaptive`` is the settings' (``of``, the one source of their defaults)."""
        self.default_lambda = default_lambda
        self.default_relevance = default_relevance
        self._adaptive = adaptive
        self._lambdas = lambdas
        self._adaptive_timeout_s = adaptive_timeout_s

    @classmethod
    def of(cls, settings: RerankerSettings, *, adaptive: AdaptiveLambdaSelector | None) -> GmmrStage:
        return cls(
            settings.mmr_lambda,
            default_relevance=settings.mmr_relevance,
            adaptive=adaptive,
            lambdas=tuple(settings.adaptive_lambdas),
            adaptive_timeout_s=settings.evaluator_timeout_s,
        )

    async def run(self, candidates: CandidateSet, spec: RerankStageSpec) -> StageOutcome:
        assert isinstance(spec, GmmrSpec)
        in_play = candidates.order
        query_vector = await candidates.embeddings.query_vector()
        vectors = (await candidates.embeddings.matrix())[in_play]
        relevance_kind = spec.relevance or self.default_relevance
        relevance = scaled_scores(candidates.scores[in_play]) if relevance_kind == "scores" else None
        detail: dict[str, object] = {}
        if spec.mmr_lambda == "adaptive":
            lam, detail = await self._adaptive_lambda(candidates, query_vector, vectors, relevance)
        else:
            lam = self.default_lambda if spec.mmr_lambda is None else float(spec.mmr_lambda)
        selected = GeometricMMR(lam).select(query_vector, vectors, candidates.top_k, relevance)
        return StageOutcome(
            order=in_play[selected], scores=candidates.scores, detail={"lambda": lam, "relevance": relevance_kind, **detail}
        )

    async def _adaptive_lambda(
        self, candidates: CandidateSet, query_vector: np.ndarray, vectors: np.ndarray, relevance: np.ndarray | None
    ) -> tuple[float, dict[str, object]]:
        """The evaluator's λ; on any evaluator failure the default λ, said in the detail (not an error)."""
        if self._adaptive is None:
            return self.default_lambda, {"lambda_policy": "fixed", "fallback": "no evaluator configured"}
        selections = GeometricMMR().lambda_sweep(query_vector, vectors, candidates.top_k, self._lambdas, relevance)
        texts = [candidates.passages[i].text for i in candidates.order]
        try:
            async with asyncio.timeout(self._adaptive_timeout_s):
                choice = await self._adaptive.choose(candidates.query, selections, texts)
        except Exception as exc:
            reason = f"evaluator failed: {type(exc).__name__}: {exc}"[:300]
            logger.warning("adaptive λ: %s; using λ=%s", reason, self.default_lambda)
            return self.default_lambda, {"lambda_policy": "fixed", "fallback": reason}
        return choice.lambda_, {
            "lambda_policy": "adaptive",
            "lambda_scores": {str(k): round(v, 3) for k, v in choice.scores.items()},
            "plan": choice.plan,
            "distinct_sets": choice.distinct_sets,
        }


def scaled_scores(scores: np.ndarray) -> np.ndarray:
    """Min-max to [0, 1], the range of the cosine it replaces; all-equal scores are all 1."""
    low, high = float(scores.min()), float(scores.max())
    if high - low <= 1e-12:
        return np.ones_like(scores, dtype=np.float64)
    return (scores - low) / (high - low)
