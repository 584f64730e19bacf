"""HTTP face of the generator: ``POST /v1/generate``. Logic lives in ``AnswerGenerator``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from langchain_openai import ChatOpenAI

from rag_common.llm import build_chat_model, llm_readiness
from rag_common.schemas import GenerateRequest, GenerateResponse
from rag_common.service import create_service_app
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.settings import GeneratorSettings


def build_answer_model(llm_settings: LLMSettings, settings: GeneratorSettings) -> ChatOpenAI:
    """The shared chat model with the generator's own token budget and sampling."""
    model = build_chat_model(llm_settings, max_tokens=settings.max_tokens)
    return model.model_copy(update={"frequency_penalty": settings.frequency_penalty})


def build_answer_generator(llm_settings: LLMSettings, settings: GeneratorSettings) -> AnswerGenerator:
    return AnswerGenerator(
        build_answer_model(llm_settings, settings),
        max_passages=settings.max_passages,
        max_passage_chars=settings.max_passage_chars,
        answer_max_chars=settings.answer_max_chars,
        max_citations=settings.max_citations,
        history_turns=settings.history_turns,
        history_answer_chars=settings.history_answer_chars,
        llm_timeout_s=settings.llm_timeout_s,
    )


def create_app(settings: GeneratorSettings | None = None, llm_settings: LLMSettings | None = None) -> FastAPI:
    settings = settings or GeneratorSettings()
    llm_settings = llm_settings or LLMSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        app.state.generator = build_answer_generator(llm_settings, settings)
        yield

    async def readiness() -> dict[str, str]:
        return {"llm": await llm_readiness(llm_settings)}

    app = create_service_app("generator", lifespan=lifespan, readiness=readiness)

    @app.post("/v1/generate", response_model=GenerateResponse, tags=["generate"])
    async def generate(body: GenerateRequest, request: Request) -> GenerateResponse:
        return await request.app.state.generator.generate(body)

    return app
