"""HTTP face of the generator: ``POST /v1/generate`` and its Server-Sent Events twin
``POST /v1/generate/stream``. Logic lives in ``AnswerGenerator``, assembled by ``runtime.py``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent

from rag_common.errors import RagError
from rag_common.schemas import GenerateRequest, GenerateResponse
from rag_common.service import create_service_app, error_responses, status_for
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.runtime import open_runtime
from rag_generator.settings import GeneratorSettings
from rag_generator.stream_events import ErrorEvent, FinalEvent, StreamEvent, TokenEvent

logger = logging.getLogger(__name__)


def _generator(request: Request) -> AnswerGenerator:
    return request.app.state.runtime.generator


def create_app(settings: GeneratorSettings | None = None, llm_settings: LLMSettings | None = None) -> FastAPI:
    settings = settings or GeneratorSettings()
    app = create_service_app("generator", lambda: open_runtime(settings, llm_settings), service_token=settings.service_token)

    # 503: the LLM is down, or busy beyond the request's budget (with Retry-After); 504: it timed out.
    @app.post("/v1/generate", response_model=GenerateResponse, tags=["generate"], responses=error_responses(503, 504))
    async def generate(body: GenerateRequest, request: Request) -> GenerateResponse:
        return await _generator(request).generate(body)

    @app.post(
        "/v1/generate/stream",
        response_class=EventSourceResponse,
        tags=["generate"],
        responses=error_responses(503, 504),
    )
    async def generate_stream(body: GenerateRequest, request: Request) -> AsyncIterator[ServerSentEvent]:
        """``token`` events ``{"text": ...}``, then one ``final`` event (a ``GenerateResponse``), or one
        ``error`` event ``{"error": ..., "status": 503|504, "retry_after_s": ...}`` (``retry_after_s``
        when the LLM is busy and said when it expects room)."""
        try:
            async for event in _generator(request).stream(body):
                yield to_server_sent_event(event)
        except Exception as exc:  # the status line is already sent: report it in-band
            logger.exception("generate stream failed")
            yield ServerSentEvent(event="error", data={"error": f"internal error: {type(exc).__name__}", "status": 500})

    return app


def to_server_sent_event(event: StreamEvent) -> ServerSentEvent:
    if isinstance(event, TokenEvent):
        return ServerSentEvent(event="token", data={"text": event.text})
    if isinstance(event, FinalEvent):
        return ServerSentEvent(event="final", data=event.response)
    return _error_event(event)


def _error_event(event: ErrorEvent) -> ServerSentEvent:
    error: RagError = event.error
    data: dict[str, object] = {"error": error.message, "status": status_for(error)}
    if (retry_after_s := getattr(error, "retry_after_s", None)) is not None:
        data["retry_after_s"] = retry_after_s
    return ServerSentEvent(event="error", data=data)
