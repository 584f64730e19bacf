"""The public REST API. Routes are thin: validation by the wire schemas, logic in ChatService and
DocumentService, assembled by ``runtime.py``.

``/v1/chat`` answers in one JSON body, ``/v1/chat/stream`` streams the same answer as Server-Sent
Events, ``/v1/chat/completions`` speaks the OpenAI wire format (rag_gateway/openai_compat.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterable
from dataclasses import dataclass
from typing import Annotated

from pydantic import StringConstraints

from fastapi import Depends, FastAPI, Path, Request, Response, Security
from fastapi.security import HTTPBearer
from fastapi.responses import FileResponse, JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent

from rag_common.errors import RagError
from rag_common.identity import Identity, Scope
from rag_common.schemas import ConversationId, DocumentDeleted, DocumentId, DocumentList, IngestRequest, IngestResponse
from rag_common.service import create_service_app, declares_document_access, error_responses, status_for
from rag_common.telemetry import bind_tenant
from rag_common.upload_formats import UPLOAD_ACL_DESCRIPTION, UPLOAD_LANGUAGE_DESCRIPTION
from rag_gateway.authentication import require_scope
from rag_gateway.chat_models import (
    ChatRequest,
    ChatResponse,
    ConversationList,
    ConversationOut,
    FeedbackOut,
    FeedbackRequest,
    SourceChunk,
)
from rag_gateway.chat_service import ChatService, StreamEvent
from rag_gateway.document_service import DocumentService, Relayed
from rag_gateway.rate_limits import RequestKind
from rag_gateway.openai_compat import ChatCompletionRequest, completion, completion_chunks, transcript
from rag_gateway.runtime import open_runtime
from rag_gateway.settings import GatewaySettings
from rag_gateway.web_ui import AuthConfig, StaticFiles, auth_config, security_headers

#: A chunk id as the retriever makes them (``<doc_id>:<n>:<hash>``; the doc id may hold ``/``).
ChunkId = Annotated[str, StringConstraints(min_length=1, max_length=2048)]
#: Redis list indices are 64-bit; no conversation keeps anywhere near this many turns.
MAX_TURN_INDEX = 2**31 - 1
#: One event of the OpenAI stream: a data-only Server-Sent Event (a chunk's JSON, or `[DONE]`).
_DATA_ONLY_EVENT = {"type": "object", "properties": {"data": {"type": "string"}}, "required": ["data"]}
_SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
#: In the OpenAPI document as the `HTTPBearer` scheme; the header is read by the Authenticator, which
#: tells API keys from OIDC tokens and words the 401s.
_BEARER = HTTPBearer(auto_error=False, description="An API key (`rag_…`, `ragctl keys create`) or an OIDC/JWT token")
#: Every protected route can refuse the caller.
_CALLER_ERRORS = error_responses(401, 403, 429)
#: A chat turn can name a conversation that does not exist, and waits on four services.
_CHAT_ERRORS = {**_CALLER_ERRORS, **error_responses(404, 503, 504)}
#: What each route that returns or changes document data declares (tests/test_document_routes_access.py):
#: answers and stored conversations show only what the caller's own principals may read; the document
#: routes relay the retriever's document rule (docs/security.md).
_CALLER_ACL = declares_document_access("caller-acl")
_DOCUMENT_ACCESS = declares_document_access("document-access")
#: What the retriever can answer on ingestion, relayed as it is.
_INGEST_ERRORS = {**_CALLER_ERRORS, **error_responses(413, 415, 422, 503, 504)}
#: The body of ``POST /v1/documents``: one route reads two encodings, so FastAPI cannot infer it.
_INGEST_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/IngestRequest"}},
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "required": ["files"],
                    "properties": {
                        "files": {
                            "type": "array",
                            "minItems": 1,
                            "items": {"type": "string", "format": "binary"},
                            "description": ".txt, .md, .html, .pdf, .json or .jsonl files; each accepted or rejected whole",
                        },
                        "acl": {"type": "string", "description": UPLOAD_ACL_DESCRIPTION},
                        "language": {"type": "string", "description": UPLOAD_LANGUAGE_DESCRIPTION},
                    },
                }
            },
        },
    }
}


def caller(scope: Scope, kind: RequestKind | None = None):
    """A dependency: the authenticated identity, refused (401/403) without ``scope``, and counted
    against the caller's rate limit of ``kind`` (429) before the route does any work."""

    async def authenticated(request: Request, _: Annotated[object, Security(_BEARER)] = None) -> Identity:
        runtime = request.app.state.runtime
        identity = require_scope(await runtime.authenticator.authenticate(request.headers.get("authorization")), scope)
        bind_tenant(identity.tenant)
        if kind is not None and runtime.authenticator.enabled:  # with auth off there is one caller: no limit
            await runtime.rate_limits.hit(kind, identity)
        return identity

    return authenticated


Chatter = Annotated[Identity, Depends(caller("chat", "chat"))]
StreamChatter = Annotated[Identity, Depends(caller("chat", "stream"))]
Reader = Annotated[Identity, Depends(caller("chat"))]
Ingester = Annotated[Identity, Depends(caller("ingest", "ingest"))]


def _chat(request: Request) -> ChatService:
    return request.app.state.runtime.chat


def _documents(request: Request) -> DocumentService:
    return request.app.state.runtime.documents


def _relayed(relayed: Relayed) -> Response:
    return Response(content=relayed.content, status_code=relayed.status_code, media_type=relayed.media_type)


@dataclass(frozen=True)
class _StreamStart:
    identity: Identity
    request: ChatRequest
    conversation_id: str


async def _start_stream(identity: StreamChatter, body: ChatRequest, request: Request) -> _StreamStart:
    """Runs before the SSE response starts, so a refused caller is a plain 401/403/429, bad input a
    422 and an unknown conversation a 404."""
    return _StreamStart(identity, body, await _chat(request).start_conversation(identity, body.conversation_id))


def _server_sent_event(event: StreamEvent) -> ServerSentEvent:
    if isinstance(event.data, RagError):
        error = event.data
        # ``error``: the operator's text (English, names the stage); ``message``: the user's, in their language.
        data = {"error": error.message, "status": status_for(error), "stage": error.stage, "message": event.told}
        if (retry_after_s := getattr(error, "retry_after_s", None)) is not None:
            data["retry_after_s"] = retry_after_s
        return ServerSentEvent(event="error", data=data)
    return ServerSentEvent(event=event.name, data=event.data)


def create_app(settings: GatewaySettings | None = None) -> FastAPI:
    settings = settings or GatewaySettings()
    app = create_service_app(
        "gateway", lambda: open_runtime(settings), extra_schemas=(IngestRequest,), internal=False
    )

    @app.post("/v1/chat", response_model=ChatResponse, tags=["chat"], responses=_CHAT_ERRORS, openapi_extra=_CALLER_ACL)
    async def chat(identity: Chatter, body: ChatRequest, request: Request) -> ChatResponse:
        return await _chat(request).chat(identity, body)

    @app.post(
        "/v1/chat/stream", response_class=EventSourceResponse, tags=["chat"], responses=_CHAT_ERRORS,
        openapi_extra=_CALLER_ACL,
    )
    async def chat_stream(
        start: Annotated[_StreamStart, Depends(_start_stream)], request: Request
    ) -> AsyncIterable[ServerSentEvent]:
        """``meta`` {conversation_id, refined_query, intent, language}, ``token`` {text} per answer delta, then
        ``final`` (the ChatResponse, authoritative; the turn is stored before it is sent) or
        ``error`` {error, status, stage, message} (nothing stored; ``message`` is what to show the user, in
        the question's language). ``meta`` also names the question's ``language``."""
        async for event in _chat(request).stream(start.identity, start.request, start.conversation_id):
            yield _server_sent_event(event)

    @app.post(
        "/v1/chat/completions",
        response_model=None,
        tags=["openai"],
        responses={
            200: {
                "description": "A `chat.completion` object, or with `stream: true` `chat.completion.chunk` "
                "objects as data-only Server-Sent Events ending with `data: [DONE]`",
                # `itemSchema` (OpenAPI 3.2, as FastAPI documents its own SSE routes) describes one event;
                # a `schema` there would describe each event as a bare string, which no event is
                # (found by `make fuzz`: tests/gateway/test_openai_compat.py keeps it true).
                "content": {"application/json": {"schema": {"type": "object"}}, "text/event-stream": {"itemSchema": _DATA_ONLY_EVENT}},
            },
            **_CALLER_ERRORS,
            **error_responses(503, 504),
        },
        openapi_extra=_CALLER_ACL,
    )
    async def chat_completions(identity: Chatter, body: ChatCompletionRequest, request: Request) -> Response:
        """OpenAI-compatible chat completion (stateless; ``stream: true`` for chunks)."""
        chat = _chat(request)
        history = transcript(body.messages)
        if body.stream:
            events = chat.complete_stream(identity, body.question, history, top_k=body.top_k, hyde=body.hyde)
            return EventSourceResponse(completion_chunks(events, body.model), headers=_SSE_HEADERS)
        response = await chat.complete(identity, body.question, history, top_k=body.top_k, hyde=body.hyde)
        return JSONResponse(completion(response, body.model))

    @app.get("/v1/models", tags=["openai"], responses=_CALLER_ERRORS)
    async def list_models(_: Reader) -> dict:
        """The one model id OpenAI-compatible clients can pick (any id is accepted on completions)."""
        return {
            "object": "list",
            "data": [{"id": settings.openai_model, "object": "model", "created": 0, "owned_by": "rag-gateway"}],
        }

    @app.get(
        "/v1/conversations",
        response_model=ConversationList,
        tags=["chat"],
        responses={**_CALLER_ERRORS, **error_responses(503)},
    )
    async def list_conversations(identity: Reader, request: Request) -> ConversationList:
        """The caller's own live conversations, the most recent first (at most 100)."""
        return await _chat(request).conversations(identity)

    @app.get(
        "/v1/conversations/{conversation_id}/sources/{chunk_id:path}",
        response_model=SourceChunk,
        tags=["chat"],
        responses={**_CALLER_ERRORS, **error_responses(404, 503)},
        openapi_extra=_CALLER_ACL,
    )
    async def get_source(
        identity: Reader, conversation_id: ConversationId, chunk_id: ChunkId, request: Request
    ) -> SourceChunk:
        """A chunk cited by a turn of the caller's conversation, as it was when cited (title, section,
        page, text): ``text[start:end]`` of each of its citations is the quote. Percent-encode the chunk
        id as one path segment."""
        return await _chat(request).source(identity, conversation_id, chunk_id)

    @app.get(
        "/v1/conversations/{conversation_id}",
        response_model=ConversationOut,
        tags=["chat"],
        responses={**_CALLER_ERRORS, **error_responses(404, 503)},
        openapi_extra=_CALLER_ACL,
    )
    async def get_conversation(identity: Reader, conversation_id: ConversationId, request: Request) -> ConversationOut:
        return await _chat(request).conversation(identity, conversation_id)

    @app.delete(
        "/v1/conversations/{conversation_id}",
        status_code=204,
        tags=["chat"],
        responses={**_CALLER_ERRORS, **error_responses(404, 503)},
    )
    async def delete_conversation(identity: Reader, conversation_id: ConversationId, request: Request) -> Response:
        await _chat(request).delete_conversation(identity, conversation_id)
        return Response(status_code=204)

    @app.post(
        "/v1/conversations/{conversation_id}/turns/{turn_index}/feedback",
        response_model=FeedbackOut,
        tags=["chat"],
        responses={**_CALLER_ERRORS, **error_responses(404, 503)},
    )
    async def give_feedback(
        identity: Reader,
        conversation_id: ConversationId,
        turn_index: Annotated[int, Path(ge=0, le=MAX_TURN_INDEX, description="0-based, as GET /v1/conversations/{id} lists the turns")],
        body: FeedbackRequest,
        request: Request,
    ) -> FeedbackOut:
        """Thumbs up or down, with an optional comment, on one answer of the caller's conversation;
        stored with the turn (replacing earlier feedback) and written to the query log."""
        return await _chat(request).give_feedback(identity, conversation_id, turn_index, body)

    @app.post(
        "/v1/documents",
        response_model=None,
        tags=["documents"],
        responses={200: {"model": IngestResponse}, **_INGEST_ERRORS},
        openapi_extra={**_INGEST_BODY, **_DOCUMENT_ACCESS},
    )
    async def ingest_documents(identity: Ingester, request: Request) -> Response:
        """JSON ``{"documents": [...]}`` or ``multipart/form-data`` with one or more ``files``."""
        documents = _documents(request)
        # Before the body is read: an oversized upload is refused without receiving it.
        documents.check_length(int(request.headers.get("content-length") or 0))
        content_type = request.headers.get("content-type", "")
        relayed = await documents.ingest(identity, await request.body(), content_type)
        if relayed.status_code == 200:
            written = IngestResponse.model_validate_json(relayed.content)
            # The readers each written document now has: an ACL set or changed is in the entry.
            await request.app.state.runtime.audit.record(
                identity, "documents.ingest", content_type.split(";")[0],
                doc_ids=written.doc_ids, written=written.documents, readers=written.readers,
                admin_scope=identity.has_scope("admin"),
            )
        return _relayed(relayed)

    @app.get(
        "/v1/documents",
        response_model=None,
        tags=["documents"],
        responses={200: {"model": DocumentList}, **_CALLER_ERRORS, **error_responses(503, 504)},
        openapi_extra=_DOCUMENT_ACCESS,
    )
    async def list_documents(identity: Reader, request: Request) -> Response:
        """The documents of the caller's tenant that it may read; with the admin scope, all of them
        (that listing is written to the audit log)."""
        relayed = await _documents(request).list(identity)
        if relayed.status_code == 200 and identity.has_scope("admin"):
            listed = DocumentList.model_validate_json(relayed.content)
            await request.app.state.runtime.audit.record(
                identity, "documents.list", identity.tenant, admin_scope=True, documents=len(listed.documents)
            )
        return _relayed(relayed)

    @app.delete(
        "/v1/documents/{doc_id:path}",
        response_model=None,
        tags=["documents"],
        responses={200: {"model": DocumentDeleted}, **_CALLER_ERRORS, **error_responses(404, 503, 504)},
        openapi_extra=_DOCUMENT_ACCESS,
    )
    async def delete_document(identity: Ingester, doc_id: DocumentId, request: Request) -> Response:
        relayed = await _documents(request).delete(identity, doc_id)
        if relayed.status_code == 200:
            await request.app.state.runtime.audit.record(
                identity, "document.delete", doc_id, admin_scope=identity.has_scope("admin")
            )
        return _relayed(relayed)

    # The web chat (docs/web-ui.md): its page and files, outside the API's OpenAPI document, and how it signs in.
    sign_in = auth_config(settings)
    ui_headers = security_headers(sign_in)
    static_files = StaticFiles()

    @app.get("/", include_in_schema=False)
    async def web_chat() -> Response:
        return FileResponse(static_files.index, media_type="text/html; charset=utf-8", headers=ui_headers)

    @app.get("/static/{name:path}", include_in_schema=False)
    async def web_chat_file(name: str) -> Response:
        path, media_type = static_files.find(name)
        return FileResponse(path, media_type=media_type, headers=ui_headers)

    @app.get("/v1/auth/config", response_model=AuthConfig, tags=["web"])
    async def get_auth_config() -> AuthConfig:
        """How the web chat signs in: API keys, the configured OIDC provider, or nothing (auth off).
        Needs no credential."""
        return sign_in

    return app
