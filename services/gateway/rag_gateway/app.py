"""The public REST API. Routes are thin: validation by the wire schemas, logic in ChatService.

``/v1/chat`` answers in one JSON body, ``/v1/chat/stream`` streams the same answer as Server-Sent
Events, ``/v1/chat/completions`` speaks the OpenAI wire format (rag_gateway/openai_compat.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterable, AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from redis.asyncio import Redis

from rag_common.http import DownstreamError, ServiceClient
from rag_common.schemas import ChatRequest, ChatResponse, ConversationOut, ErrorBody, IngestRequest
from rag_common.service import ServiceError, create_service_app
from rag_gateway.chat_graph import ChatPolicy, ChatServices, Replies, build_chat_graph
from rag_gateway.chat_service import ChatService, downstream_to_service_error
from rag_gateway.conversation_store import ConversationStore
from rag_gateway.generator_stream import GeneratorStreamClient
from rag_gateway.openai_compat import ChatCompletionRequest, completion, completion_chunks, transcript
from rag_gateway.settings import GatewaySettings

_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_ERRORS = {code: {"model": ErrorBody} for code in (404, 422, 503, 504)}


@dataclass(frozen=True)
class _StreamStart:
    request: ChatRequest
    conversation_id: str


async def _start_stream(body: ChatRequest, request: Request) -> _StreamStart:
    """Runs before the SSE response starts, so bad input is a plain 422 and an unknown conversation a 404."""
    return _StreamStart(body, await request.app.state.chat.start_conversation(body.conversation_id))


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    clients: dict[str, ServiceClient] = {}
    streams: list[GeneratorStreamClient] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        redis = Redis.from_url(
            settings.redis_url,
            decode_responses=True,
            socket_timeout=settings.redis_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
        )
        store = ConversationStore(redis, max_turns=settings.conversation_max_turns, ttl_s=settings.conversation_ttl_s)
        clients.update(
            refiner=ServiceClient("refiner", settings.refiner_url, settings.refiner_timeout_s),
            retriever=ServiceClient("retriever", settings.retriever_url, settings.retriever_timeout_s),
            ingest=ServiceClient("retriever", settings.retriever_url, settings.ingest_timeout_s),
            reranker=ServiceClient("reranker", settings.reranker_url, settings.reranker_timeout_s),
            generator=ServiceClient("generator", settings.generator_url, settings.generator_timeout_s),
        )
        streams.append(GeneratorStreamClient(settings.generator_url, settings.generator_timeout_s))
        graph = build_chat_graph(
            ChatServices(
                clients["refiner"], clients["retriever"], clients["reranker"], clients["generator"], store, streams[0]
            ),
            ChatPolicy(
                history_turns=settings.history_turns,
                retrieval_candidates=settings.retrieval_candidates,
                search_mode=settings.search_mode,
                pass_embeddings=settings.pass_embeddings,
                history_token_budget=settings.history_token_budget,
                replies=Replies(
                    chitchat=settings.chitchat_reply,
                    thanks=settings.thanks_reply,
                    out_of_scope=settings.out_of_scope_reply,
                ),
            ),
        )
        app.state.store = store
        app.state.chat = ChatService(
            graph, store, default_top_k=settings.default_top_k, hyde_default=settings.hyde_default
        )
        app.state.ingest = clients["ingest"]
        try:
            yield
        finally:
            await asyncio.gather(*(client.aclose() for client in [*clients.values(), *streams]))
            await redis.aclose()

    async def readiness() -> dict[str, str]:
        checks: dict[str, str] = {}
        try:
            checks["redis"] = "ok" if await app.state.store.ping() else "no PONG"
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            checks["redis"] = f"unreachable: {type(exc).__name__}"
        for name in ("refiner", "retriever", "reranker", "generator"):
            checks[name] = await clients[name].is_healthy()
        return checks

    app = create_service_app("gateway", lifespan=lifespan, readiness=readiness)

    @app.post("/v1/chat", response_model=ChatResponse, tags=["chat"])
    async def chat(body: ChatRequest, request: Request) -> ChatResponse:
        return await request.app.state.chat.chat(body)

    @app.post("/v1/chat/stream", response_class=EventSourceResponse, tags=["chat"], responses=_ERRORS)
    async def chat_stream(
        start: Annotated[_StreamStart, Depends(_start_stream)], request: Request
    ) -> AsyncIterable[ServerSentEvent]:
        """``meta`` {conversation_id, refined_query, intent}, ``token`` {text} per answer delta, then
        ``final`` (the ChatResponse, authoritative; the turn is stored before it is sent) or
        ``error`` {error, status, stage} (nothing stored)."""
        async for event in request.app.state.chat.stream(start.request, start.conversation_id):
            yield ServerSentEvent(event=event.name, data=event.data)

    @app.post(
        "/v1/chat/completions", response_model=None, tags=["openai"], responses={c: _ERRORS[c] for c in (422, 503, 504)}
    )
    async def chat_completions(body: ChatCompletionRequest, request: Request) -> Response:
        """OpenAI-compatible chat completion (stateless; ``stream: true`` for chunks)."""
        chat: ChatService = request.app.state.chat
        history = transcript(body.messages)
        if body.stream:
            events = chat.complete_stream(body.question, history, top_k=body.top_k, hyde=body.hyde)
            return EventSourceResponse(completion_chunks(events, body.model), headers=_SSE_HEADERS)
        response = await chat.complete(body.question, history, top_k=body.top_k, hyde=body.hyde)
        return JSONResponse(completion(response, body.model))

    @app.get("/v1/models", tags=["openai"])
    async def list_models() -> dict:
        """The one model id OpenAI-compatible clients can pick (any id is accepted on completions)."""
        return {
            "object": "list",
            "data": [{"id": settings.openai_model, "object": "model", "created": 0, "owned_by": "rag-gateway"}],
        }

    @app.get("/v1/conversations/{conversation_id}", response_model=ConversationOut, tags=["chat"])
    async def get_conversation(conversation_id: str, request: Request) -> ConversationOut:
        return await request.app.state.chat.conversation(conversation_id)

    @app.delete("/v1/conversations/{conversation_id}", status_code=204, tags=["chat"])
    async def delete_conversation(conversation_id: str, request: Request) -> Response:
        await request.app.state.chat.delete_conversation(conversation_id)
        return Response(status_code=204)

    @app.post("/v1/documents", tags=["documents"])
    async def ingest(request: Request) -> Response:
        """JSON ``{"documents": [...]}`` or ``multipart/form-data`` with one or more ``files``."""
        length = int(request.headers.get("content-length") or 0)
        if length > settings.max_upload_mb * 1024 * 1024:
            raise ServiceError(413, f"request of {length} bytes exceeds the {settings.max_upload_mb} MiB limit")
        content_type = request.headers.get("content-type", "")
        body = await request.body()
        if content_type.startswith("application/json"):
            try:
                payload = IngestRequest.model_validate_json(body)
            except ValueError as exc:
                raise ServiceError(422, f"invalid documents payload: {exc}") from exc
            return await _forward(request, "POST", "/v1/documents", json=payload.model_dump(mode="json"))
        if content_type.startswith("multipart/form-data"):
            return await _forward(
                request, "POST", "/v1/documents/upload", content=body, headers={"content-type": content_type}
            )
        raise ServiceError(415, "send application/json {'documents': [...]} or multipart/form-data with 'files'")

    @app.get("/v1/documents", tags=["documents"])
    async def list_documents(request: Request) -> Response:
        return await _forward(request, "GET", "/v1/documents")

    @app.delete("/v1/documents/{doc_id:path}", tags=["documents"])
    async def delete_document(doc_id: str, request: Request) -> Response:
        return await _forward(request, "DELETE", f"/v1/documents/{doc_id}")

    async def _forward(request: Request, method: str, path: str, **kwargs: object) -> Response:
        try:
            upstream = await request.app.state.ingest.raw(method, path, **kwargs)
        except DownstreamError as exc:
            raise downstream_to_service_error(exc) from exc
        if upstream.status_code >= 500:
            raise ServiceError(503, f"retriever failed: HTTP {upstream.status_code}", stage="retriever")
        return Response(
            content=upstream.content,
            status_code=upstream.status_code,
            media_type=upstream.headers.get("content-type", "application/json"),
        )

    return app
