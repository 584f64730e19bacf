"""HTTP face of the refiner: ``POST /v1/refine`` (intent, standalone query, optional HyDE).
Logic lives in ``QueryRefiner``, assembled by ``runtime.py``."""

from __future__ import annotations

from fastapi import FastAPI, Request

from rag_common.schemas import RefineRequest, RefineResponse
from rag_common.service import create_service_app
from rag_common.settings import LLMSettings
from rag_refiner.runtime import open_runtime
from rag_refiner.settings import RefinerSettings


def create_app(settings: RefinerSettings | None = None, llm_settings: LLMSettings | None = None) -> FastAPI:
    settings = settings or RefinerSettings()
    app = create_service_app("refiner", lambda: open_runtime(settings, llm_settings), service_token=settings.service_token)

    @app.post("/v1/refine", response_model=RefineResponse, tags=["refine"])
    async def refine(body: RefineRequest, request: Request) -> RefineResponse:
        return await request.app.state.runtime.refiner.refine(body)

    return app
