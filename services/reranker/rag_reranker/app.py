"""The reranker's HTTP API. Routes are thin: validation by the wire schemas, logic in RerankService."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from rag_common.schemas import RerankRequest, RerankResponse
from rag_common.service import create_service_app
from rag_reranker.rerank_service import RerankService
from rag_reranker.scorer_factory import build_scorer
from rag_reranker.settings import RerankerSettings
from rag_reranker.torch_runtime import apply_torch_threads


def create_app(settings: RerankerSettings | None = None) -> FastAPI:
    settings = settings or RerankerSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.model_status = "loading"
        apply_torch_threads(settings.torch_threads)
        scorer = build_scorer(settings)
        await asyncio.to_thread(scorer.warm_up)
        app.state.rerank = RerankService(scorer)
        app.state.model_status = "ok"
        yield

    async def readiness() -> dict[str, str]:
        return {"model": getattr(app.state, "model_status", "not started")}

    app = create_service_app("reranker", lifespan=lifespan, readiness=readiness)

    @app.post("/v1/rerank", response_model=RerankResponse, tags=["rerank"])
    async def rerank(body: RerankRequest, request: Request) -> RerankResponse:
        return await request.app.state.rerank.rerank(body)

    return app
