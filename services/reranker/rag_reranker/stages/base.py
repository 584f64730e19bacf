"""What every stage of the rerank chain sees and returns.

A stage takes the candidates in their current order with their current scores and returns a new
order (possibly shorter: gMMR selects ``top_k``) and new scores. Stages never see HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from rag_common.schemas import Passage, RerankStageSpec
from rag_reranker.stages.candidate_embeddings import CandidateEmbeddings


class StageSkipped(Exception):
    """The stage cannot run for this request (e.g. no cross-encoder configured); the order is kept."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class CandidateSet:
    """The request's candidates. ``order`` indexes ``passages``; ``scores`` is aligned to ``passages``."""

    query: str
    passages: list[Passage]
    order: np.ndarray
    scores: np.ndarray
    embeddings: CandidateEmbeddings
    top_k: int

    @classmethod
    def from_request(cls, query: str, passages: list[Passage], top_k: int, embeddings: CandidateEmbeddings) -> CandidateSet:
        return cls(
            query=query,
            passages=passages,
            order=np.arange(len(passages)),
            scores=np.array([p.score for p in passages], dtype=np.float64),
            embeddings=embeddings,
            top_k=top_k,
        )


@dataclass
class StageOutcome:
    order: np.ndarray
    scores: np.ndarray
    detail: dict[str, Any] = field(default_factory=dict)


class ChainStage(Protocol):
    #: The stage's wire name (``RerankStageSpec.name``).
    name: str

    async def run(self, candidates: CandidateSet, spec: RerankStageSpec) -> StageOutcome:
        """New order and scores; raises :class:`StageSkipped` when it cannot apply."""
