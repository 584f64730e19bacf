"""HTTP face of the generator: ``POST /v1/generate`` and its Server-Sent Events twin
``POST /v1/generate/stream``. Logic lives in ``AnswerGenerator``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from langchain_openai import ChatOpenAI

from rag_common.llm import build_chat_model, llm_readiness
from rag_common.schemas import GenerateRequest, GenerateResponse
from rag_common.service import create_service_app
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.settings import GeneratorSettings
from rag_generator.stream_events import ErrorEvent, FinalEvent, StreamEvent, TokenEvent

logger = logging.getLogger(__name__)


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
        quote_match_threshold=settings.quote_match_threshold,
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

    @app.post("/v1/generate/stream", response_class=EventSourceResponse, tags=["generate"])
    async def generate_stream(body: GenerateRequest, request: Request) -> AsyncIterator[ServerSentEvent]:
        """``token`` events ``{"text": ...}``, then one ``final`` event (a ``GenerateResponse``), or one
        ``error`` event ``{"error": ..., "status": 503|504}``."""
        try:
            async for event in request.app.state.generator.stream(body):
                yield to_server_sent_event(event)
        except Exception as exc:  # the status line is already sent: report it in-band
            logger.exception("generate stream failed")
            yield to_server_sent_event(ErrorEvent(f"internal error: {type(exc).__name__}", 500))

    return app


def to_server_sent_event(event: StreamEvent) -> ServerSentEvent:
    if isinstance(event, TokenEvent):
        return ServerSentEvent(event="token", data={"text": event.text})
    if isinstance(event, FinalEvent):
        return ServerSentEvent(event="final", data=event.response)
    return ServerSentEvent(event="error", data={"error": event.error, "status": event.status})
