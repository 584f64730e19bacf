"""Reranking as plain Python: run the requested chain of stages over the candidates, keep ``top_k``
and answer with their ids and new scores (the caller holds the passages themselves).

Each stage is timed and reported. A stage that cannot apply is *skipped* with the reason; a stage
that raises is *failed*: the order from before it is kept, the chain goes on, and the response is
marked ``degraded`` — a broken stage costs ranking quality, never the request.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from rag_common.embedders import Embedder
from rag_common.schemas import (
    CrossEncoderSpec,
    DiffusionSpec,
    GmmrSpec,
    RankedPassage,
    RerankRequest,
    RerankResponse,
    RerankStageName,
    RerankStageSpec,
    StageReport,
)
from rag_common.errors import InvalidInput
from rag_reranker.metrics import INFLIGHT_REQUESTS, REQUEST_SECONDS, STAGE_SECONDS
from rag_reranker.stages.base import CandidateSet, ChainStage, StageSkipped
from rag_reranker.stages.candidate_embeddings import CandidateEmbeddings, EmbeddingMismatch

logger = logging.getLogger(__name__)

_SPEC_BY_NAME: dict[str, type] = {"cross_encoder": CrossEncoderSpec, "diffusion": DiffusionSpec, "gmmr": GmmrSpec}


def default_specs(names: Sequence[RerankStageName]) -> list[RerankStageSpec]:
    return [_SPEC_BY_NAME[name]() for name in names]


class RerankService:
    def __init__(
        self,
        stages: Mapping[str, ChainStage],
        *,
        default_chain: Sequence[RerankStageName],
        embedder: Embedder | None = None,
    ) -> None:
        unknown = set(default_chain) - set(stages)
        if unknown:
            raise ValueError(f"default chain names stages this service does not have: {sorted(unknown)}")
        self._stages = dict(stages)
        self._default_specs = default_specs(default_chain)
        self._embedder = embedder

    @property
    def default_chain(self) -> list[str]:
        return [spec.name for spec in self._default_specs]

    async def rerank(self, request: RerankRequest) -> RerankResponse:
        INFLIGHT_REQUESTS.inc()
        started = time.perf_counter()
        try:
            return await self._rerank(request)
        finally:
            INFLIGHT_REQUESTS.dec()
            REQUEST_SECONDS.observe(time.perf_counter() - started)

    async def _rerank(self, request: RerankRequest) -> RerankResponse:
        specs = self._default_specs if request.stages is None else request.stages
        if not request.passages:
            # Nothing to order: no stage runs, no model is called.
            reports = [StageReport(name=s.name, status="skipped", reason="no passages") for s in specs]
            return RerankResponse(ranking=[], stages=[], timings_ms={}, reports=reports)
        try:
            embeddings = CandidateEmbeddings(request.query, request.query_embedding, request.passages, self._embedder)
        except EmbeddingMismatch as exc:
            raise InvalidInput(str(exc)) from exc
        candidates = CandidateSet.from_request(request.query, request.passages, request.top_k, embeddings)

        reports: list[StageReport] = []
        for spec in specs:
            reports.append(await self._run_stage(spec, candidates))
        ran = [r.name for r in reports if r.status == "ran"]
        final = candidates.order[: request.top_k]
        return RerankResponse(
            # Ids and scores only: the caller holds the passages (and their vectors) already.
            ranking=[
                RankedPassage(chunk_id=request.passages[i].chunk_id, score=float(candidates.scores[i])) for i in final
            ],
            stages=ran,
            timings_ms={r.name: r.ms for r in reports if r.status == "ran"},
            reports=reports,
            degraded=any(r.status == "failed" for r in reports),
        )

    async def _run_stage(self, spec: RerankStageSpec, candidates: CandidateSet) -> StageReport:
        stage = self._stages.get(spec.name)
        if stage is None:
            return StageReport(name=spec.name, status="skipped", reason="stage not available in this service")
        started = time.perf_counter()
        try:
            outcome = await stage.run(candidates, spec)
        except StageSkipped as skip:
            return StageReport(name=spec.name, status="skipped", reason=skip.reason)
        except Exception as exc:
            logger.exception("rerank stage %s failed; keeping the order from before it", spec.name)
            ms = round((time.perf_counter() - started) * 1000.0, 3)
            return StageReport(name=spec.name, status="failed", reason=f"{type(exc).__name__}: {exc}"[:300], ms=ms)
        seconds = time.perf_counter() - started
        STAGE_SECONDS.labels(spec.name).observe(seconds)
        candidates.order, candidates.scores = outcome.order, outcome.scores
        return StageReport(name=spec.name, status="ran", ms=round(seconds * 1000.0, 3), detail=outcome.detail)
