"""HTTP face of the refiner: ``POST /v1/refine`` (intent, standalone query, optional HyDE). Logic lives in ``QueryRefiner``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request

from rag_common.llm import build_chat_model, llm_readiness
from rag_common.schemas import RefineRequest, RefineResponse
from rag_common.service import create_service_app
from rag_common.settings import LLMSettings
from rag_refiner.query_refiner import QueryRefiner
from rag_refiner.rewrite_prompt import REWRITE_MAX_TOKENS
from rag_refiner.settings import RefinerSettings


def create_app(settings: RefinerSettings | None = None, llm_settings: LLMSettings | None = None) -> FastAPI:
    settings = settings or RefinerSettings()
    llm_settings = llm_settings or LLMSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Fits the intent classifier on the shipped examples (well under a second) before serving.
        app.state.refiner = QueryRefiner.from_settings(build_chat_model(llm_settings, max_tokens=REWRITE_MAX_TOKENS), settings)
        yield

    async def readiness() -> dict[str, str]:
        return {"llm": await llm_readiness(llm_settings)}

    app = create_service_app("refiner", lifespan=lifespan, readiness=readiness)

    @app.post("/v1/refine", response_model=RefineResponse, tags=["refine"])
    async def refine(body: RefineRequest, request: Request) -> RefineResponse:
        return await request.app.state.refiner.refine(body)

    return app
