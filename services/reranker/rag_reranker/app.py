"""The reranker's HTTP API. Routes are thin: validation by the wire schemas, logic in RerankService."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from rag_common.schemas import RerankRequest, RerankResponse
from rag_common.service import create_service_app
from rag_common.settings import LLMSettings
from rag_reranker.rerank_service import RerankService
from rag_reranker.parts import build_parts
from rag_reranker.settings import RerankerSettings
from rag_reranker.torch_runtime import apply_torch_threads


def create_app(settings: RerankerSettings | None = None, llm_settings: LLMSettings | None = None) -> FastAPI:
    """``llm_settings``: the evaluator endpoint for adaptive λ (default: the ``LLM_*`` environment)."""
    settings = settings or RerankerSettings()
    llm_settings = llm_settings or LLMSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.model_status = "loading"
        apply_torch_threads(settings.torch_threads)
        parts = build_parts(settings, llm_settings)
        await asyncio.to_thread(parts.embedder.warm_up)
        if parts.cross_encoder is not None:
            await asyncio.to_thread(parts.cross_encoder.warm_up)
        if parts.pair_queue is not None:
            parts.pair_queue.start()
        app.state.parts = parts
        app.state.rerank = RerankService(parts.stages, default_chain=settings.default_chain, embedder=parts.embedder)
        app.state.model_status = "ok"
        try:
            yield
        finally:
            if parts.pair_queue is not None:
                await parts.pair_queue.aclose()

    async def readiness() -> dict[str, str]:
        return {"model": getattr(app.state, "model_status", "not started")}

    app = create_service_app("reranker", lifespan=lifespan, readiness=readiness)

    @app.post("/v1/rerank", response_model=RerankResponse, response_model_exclude_none=False, tags=["rerank"])
    async def rerank(body: RerankRequest, request: Request) -> RerankResponse:
        return await request.app.state.rerank.rerank(body)

    return app
