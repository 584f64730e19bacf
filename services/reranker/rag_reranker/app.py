"""The reranker's HTTP API. Routes are thin: validation by the wire schemas, logic in RerankService,
assembled by ``runtime.py``."""

from __future__ import annotations

from fastapi import FastAPI, Request

from rag_common.schemas import RerankRequest, RerankResponse
from rag_common.service import create_service_app
from rag_common.settings import LLMSettings
from rag_reranker.runtime import open_runtime
from rag_reranker.settings import RerankerSettings


def create_app(settings: RerankerSettings | None = None, llm_settings: LLMSettings | None = None) -> FastAPI:
    """``llm_settings``: the evaluator endpoint for adaptive λ (default: the ``LLM_*`` environment)."""
    settings = settings or RerankerSettings()
    app = create_service_app("reranker", lambda: open_runtime(settings, llm_settings), service_token=settings.service_token)

    @app.post("/v1/rerank", response_model=RerankResponse, response_model_exclude_none=False, tags=["rerank"])
    async def rerank(body: RerankRequest, request: Request) -> RerankResponse:
        return await request.app.state.runtime.rerank.rerank(body)

    return app
