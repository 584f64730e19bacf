"""What every service's FastAPI app has in common: health, readiness, metrics, error bodies.

A service builds its app with :func:`create_service_app` from its runtime opener and registers its
own routes; the lifespan, the probes and the error format are then the same across the five
services. Domain errors (``rag_common.errors``) become status codes here, in ``STATUS_BY_ERROR``.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import re
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Literal, Protocol

from fastapi import FastAPI, Request, Response, params
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from pydantic import BaseModel
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_common import log_format
from rag_common.errors import (
    DependencyFailed,
    Forbidden,
    InvalidInput,
    InvalidQuery,
    MalformedBody,
    NotFound,
    PayloadTooLarge,
    RagError,
    RateLimited,
    Unauthenticated,
    UnsupportedMediaType,
)
from rag_common.internal_auth import OPEN_PATHS, SERVICE_TOKEN_HEADER, document_service_token
from rag_common.request_bodies import (
    parse_json_body,
    problems_summary,
    require_json_media_type,
    validation_problems,
    without_reprs,
)
from rag_common.schemas import ErrorBody, Readiness
from rag_common.telemetry import STAGE_BY_PATH, TRACE_ID_HEADER, UNTRACED_PATHS, trace_id_of_current_span, tracer_provider

logger = logging.getLogger(__name__)

#: The one place a domain error becomes a status code. Checked in order, so a subclass listed
#: before its base wins; a RagError not listed is a 500.
STATUS_BY_ERROR: tuple[tuple[type[RagError], int], ...] = (
    (InvalidQuery, 400),
    (MalformedBody, 400),
    (Unauthenticated, 401),
    (Forbidden, 403),
    (NotFound, 404),
    (PayloadTooLarge, 413),
    (UnsupportedMediaType, 415),
    (InvalidInput, 422),
    (RateLimited, 429),
    (DependencyFailed, 503),
)


def status_for(error: RagError) -> int:
    """The HTTP status of ``error``: a dependency that timed out is 504, any other failure of one 503."""
    if isinstance(error, DependencyFailed) and error.kind == "timeout":
        return 504
    for error_type, status in STATUS_BY_ERROR:
        if isinstance(error, error_type):
            return status
    return 500


def retry_after_header(error: RagError) -> str | None:
    """``Retry-After`` (whole seconds): of a rate limit, or of an overloaded dependency that said when
    it expects room."""
    retry_after_s = getattr(error, "retry_after_s", None)
    return str(max(1, math.ceil(retry_after_s))) if retry_after_s is not None else None


def error_headers(error: RagError) -> dict[str, str]:
    headers = {}
    if (retry_after := retry_after_header(error)) is not None:
        headers["Retry-After"] = retry_after
    if isinstance(error, Unauthenticated):
        headers["WWW-Authenticate"] = 'Bearer realm="rag"'
    return headers


def error_body(error: RagError) -> ErrorBody:
    return ErrorBody(error=error.message, detail=error.detail, stage=error.stage)


def _error_response(status_code: int, body: ErrorBody) -> JSONResponse:
    return JSONResponse(status_code=status_code, content=body.model_dump(exclude_none=True))


def _validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Pydantic's raw errors may hold the offending input object, and its locations the reprs of
    # validator functions; keep only what a client needs (rag_common.request_bodies).
    return validation_problems(exc.errors())


#: What each error status means on every service; a route lists the ones it can answer with
#: :func:`error_responses`, and :func:`document_errors` gives them all the ErrorBody schema.
ERROR_STATUS_DESCRIPTIONS: dict[int, str] = {
    400: "The body is not parseable as the declared content type (a JSON object names a key twice), or the query is invalid",
    401: "No valid credential",
    403: "The credential lacks the scope this route needs",
    404: "No such resource (or not yours)",
    405: "Method not allowed; the `Allow` header lists the allowed ones",
    413: "The body is larger than the configured limit",
    415: "The content type is not one this route reads (a JSON body needs `application/json`)",
    422: "The request does not match the schema; `detail` lists each problem",
    429: "Too many requests; retry after `Retry-After` seconds",
    503: "A dependency is down or full (`stage` names it; `Retry-After` when it said when it expects room)",
    504: "A dependency did not answer within its budget (`stage` names it)",
}


#: The OpenAPI extension in which every route that returns or changes document data declares its access
#: check (issue 29; tests/test_document_routes_access.py fails a route that carries document data
#: without one): ``caller-acl``, only what the caller's own principals may read (searches, answers and
#: what a conversation shows again); ``document-access``, the document routes' rule (the caller's
#: readable documents, its whole tenant with the admin scope; writes only to readable documents).
DOCUMENT_ACCESS_EXTENSION = "x-rag-document-access"
DocumentAccessCheck = Literal["caller-acl", "document-access"]


def declares_document_access(check: DocumentAccessCheck) -> dict[str, str]:
    """``openapi_extra`` of a route that returns or changes document data under ``check``."""
    return {DOCUMENT_ACCESS_EXTENSION: check}


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for the error statuses a route can answer (besides 400 and 422, which
    every route with a body or parameters gets)."""
    return {code: {"description": ERROR_STATUS_DESCRIPTIONS[code]} for code in codes}


def document_errors(openapi: dict[str, Any]) -> dict[str, Any]:
    """Make the OpenAPI document say what the error handlers do: every operation with a body can
    answer 400 (an unparseable body is refused before validation), one with a JSON body 415 (another
    content type, :class:`ServiceRoute`), and every 4xx/5xx body is an ``ErrorBody`` in JSON, also
    on streaming routes, whose errors come before the stream starts."""
    schemas = openapi.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorBody", ErrorBody.model_json_schema(ref_template="#/components/schemas/{model}"))
    error_content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}
    for path_item in openapi.get("paths", {}).values():
        for operation in path_item.values():
            responses = operation.setdefault("responses", {})
            if "requestBody" in operation:
                responses.setdefault("400", {"description": ERROR_STATUS_DESCRIPTIONS[400]})
                if "application/json" in operation["requestBody"].get("content", {}):
                    responses.setdefault("415", {"description": ERROR_STATUS_DESCRIPTIONS[415]})
            for code, response in responses.items():
                if code.isdigit() and int(code) >= 400 and _is_default_error_content(response.get("content")):
                    response["content"] = error_content
    return openapi


class ServiceTokenMiddleware:
    """Refuses (401, JSON ``ErrorBody``) every request outside ``OPEN_PATHS`` without the secret."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._token = token.encode("utf-8")
        self._header = SERVICE_TOKEN_HEADER.lower().encode("latin-1")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] not in OPEN_PATHS:
            presented = next((value for name, value in scope["headers"] if name == self._header), b"")
            if not hmac.compare_digest(presented, self._token):
                await _refuse_without_service_token(send)
                return
        await self._app(scope, receive, send)


async def _refuse_without_service_token(send: Send) -> None:
    body = json.dumps({"error": f"internal service: send the service credential in {SERVICE_TOKEN_HEADER}"}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def _is_default_error_content(content: dict[str, Any] | None) -> bool:
    """No body declared, FastAPI's validation body (ours is an ErrorBody), or the route's streaming
    media type that FastAPI gives every response of an SSE route."""
    if not content:
        return True
    if "text/event-stream" in content:
        return True
    schema = content.get("application/json", {}).get("schema", {})
    return schema.get("$ref", "").endswith("/HTTPValidationError") or schema == {}


def allowed_methods(app: FastAPI, scope: dict[str, Any]) -> list[str]:
    """The methods of the resource the request's path names, as the OpenAPI document describes it:
    every route matching the path (``Match.PARTIAL``: path, not method), or only the literal ones
    when there are any (``/v1/documents/upload`` is its own resource, not a ``{doc_id:path}``)."""
    matching = [route for route in app.router.routes if route.matches(scope)[0] is not Match.NONE]
    literal = [route for route in matching if "{" not in getattr(route, "path", "{")]
    methods: set[str] = set()
    for route in literal or matching:
        methods.update(getattr(route, "methods", None) or ())
    return sorted(methods)


class _JsonBodyRequest(Request):
    """A request whose ``json()`` refuses duplicate keys (FastAPI reads a JSON body through it)."""

    async def json(self) -> Any:
        if not hasattr(self, "_checked_json"):
            self._checked_json = parse_json_body(await self.body())
        return self._checked_json


class ServiceRoute(APIRoute):
    """The route class of every service app (``create_service_app`` gives it to the router).

    - The path matches the whole request path, a newline like any other character. Starlette's
      ``^…$`` let ``$`` match before a final newline and the ``.*`` of ``{x:path}`` stop at one:
      ``DELETE /v1/documents/abc%0A`` deleted ``abc``, and ``/v1/documents/%0A`` was a 404 where
      every other control character was the 422 of an invalid id.
    - A JSON body is read only under a JSON media type (``UnsupportedMediaType``, 415, otherwise;
      also without a ``Content-Type``) and only without duplicate keys (``MalformedBody``, 400),
      parsed once (:mod:`rag_common.request_bodies`). Form and multipart routes are left as they are.
    """

    def __init__(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        super().__init__(path, endpoint, **kwargs)
        pattern = self.path_regex.pattern
        if pattern.endswith("$"):  # compile_path's end anchor (a literal "$" before it is "\$")
            self.path_regex = re.compile(pattern[:-1] + r"\Z", self.path_regex.flags | re.DOTALL)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        body_field = self.body_field
        if body_field is None or isinstance(body_field.field_info, params.Form):
            return handler
        body_required = body_field.field_info.is_required()

        async def json_body_handler(request: Request) -> Response:
            request = _JsonBodyRequest(request.scope, request.receive)
            body = await request.body()
            if body or body_required:
                require_json_media_type(request.headers.get("content-type"))
            if body:
                try:
                    await request.json()  # parsed here, once: FastAPI's handler gets the result
                except json.JSONDecodeError as exc:
                    # As FastAPI words it (a 422 naming the position).
                    raise RequestValidationError(
                        [{"type": "json_invalid", "loc": ("body", exc.pos), "msg": "JSON decode error", "input": {}}]
                    ) from exc
            return await handler(request)

        return json_body_handler


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RagError)
    async def _rag_error(_: Request, exc: RagError) -> JSONResponse:
        response = _error_response(status_for(exc), error_body(exc))
        response.headers.update(error_headers(exc))
        return response

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = _validation_detail(exc)
        return _error_response(422, ErrorBody(error=f"invalid request: {problems_summary(detail)}", detail=detail))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        response = _error_response(exc.status_code, ErrorBody(error=without_reprs(str(exc.detail))))
        # Starlette's own errors carry headers that are part of their meaning (405's Allow).
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            # Starlette names the methods of the first route on the path; a path served by several
            # routes (GET and POST /v1/documents) allows all of theirs.
            response.headers["Allow"] = ", ".join(allowed_methods(request.app, request.scope))
        return response

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error")
        return _error_response(500, ErrorBody(error=f"internal error: {type(exc).__name__}"))


class RequestTelemetryMiddleware:
    """Inside the request's server span: binds the service (and the internal services' stage) for
    the log lines of the request, adds ``X-Trace-Id`` to the response and logs one line per request
    with its status and ``duration_ms``."""

    def __init__(self, app: ASGIApp, service: str) -> None:
        self._app = app
        self._service = service

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in UNTRACED_PATHS:
            await self._app(scope, receive, send)
            return
        with log_format.request(self._service, STAGE_BY_PATH.get(scope["path"])):
            await self._traced(scope, receive, send)

    async def _traced(self, scope: Scope, receive: Receive, send: Send) -> None:
        trace_id = trace_id_of_current_span()
        status: dict[str, int] = {}

        async def send_with_trace_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                if trace_id is not None:
                    header = (TRACE_ID_HEADER.lower().encode(), trace_id.encode())
                    message = {**message, "headers": [*message.get("headers", []), header]}
            await send(message)

        started = time.perf_counter()
        try:
            await self._app(scope, receive, send_with_trace_id)
        finally:
            logger.info(
                "%s %s %s",
                scope["method"],
                scope["path"],
                status.get("code", "failed"),
                extra={
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status.get("code"),
                },
            )


def setup_telemetry(service: str, app: FastAPI) -> TracerProvider:
    """Trace ``app`` as ``service`` (the one setup every service's app gets, from
    ``create_service_app``): server spans continuing W3C ``traceparent``, ``X-Trace-Id`` on every
    response, one JSON log line per request. Returns the service's tracer provider."""
    log_format.set_process_service(service)
    provider = tracer_provider(service)
    # Added last, so it wraps the other middlewares (a 401 of the service credential is logged too);
    # the instrumentation wraps the whole stack, so the server span is current in here.
    app.add_middleware(RequestTelemetryMiddleware, service=service)
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=provider,
        excluded_urls=",".join(UNTRACED_PATHS),
        # The per-message ASGI send/receive spans say nothing the server span does not.
        exclude_spans=["receive", "send"],
    )
    return provider


class ServiceRuntime(Protocol):
    """What a service's ``runtime.py`` opens: its assembled parts, and whether their dependencies are up."""

    async def readiness(self) -> dict[str, str]:
        """``{dependency: "ok" | reason}``; any value other than ``"ok"`` means not ready."""


def create_service_app(
    name: str,
    open_runtime: Callable[[], AbstractAsyncContextManager[ServiceRuntime]],
    *,
    version: str = "0.1.0",
    extra_schemas: tuple[type[BaseModel], ...] = (),
    service_token: str | None = None,
    internal: bool = True,
) -> FastAPI:
    """A FastAPI app with ``/healthz``, ``/readyz``, ``/metrics`` and uniform error bodies.

    The app's lifespan is ``async with open_runtime() as runtime``: the runtime (every model,
    client and index the service uses, assembled by its ``runtime.py``) is ``app.state.runtime``
    while the app serves, and ``/readyz`` asks it. The same runtime is what the eval harness and the
    benchmarks open, without HTTP.

    ``extra_schemas`` are wire models that a route's ``openapi_extra`` refers to by
    ``#/components/schemas/<name>`` (a body FastAPI cannot infer), added to the document's components.

    An ``internal`` service (all but the gateway) given ``service_token`` accepts only calls that
    carry it (``rag_common.internal_auth``); without one it warns at start that anyone who reaches
    its port can call it.

    Every app is traced and logged the same way (:func:`setup_telemetry`): a server
    span per request continuing the caller's W3C ``traceparent``, ``X-Trace-Id`` on the response and
    one JSON log line per request.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime() as runtime:
            app.state.runtime = runtime
            yield

    app = FastAPI(title=f"rag-{name}", version=version, lifespan=lifespan)
    # Before any route is added: every route of the app is a ServiceRoute (JSON bodies, paths).
    app.router.route_class = ServiceRoute
    install_error_handlers(app)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = FastAPI.openapi(app)
            components = document.setdefault("components", {}).setdefault("schemas", {})
            for model in extra_schemas:
                schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
                for name, definition in schema.pop("$defs", {}).items():
                    components.setdefault(name, definition)
                components.setdefault(model.__name__, schema)
            if internal and service_token:
                document = document_service_token(document)
            app.openapi_schema = document_errors(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": name}

    @app.get(
        "/readyz",
        tags=["ops"],
        response_model=Readiness,
        responses={503: {"model": Readiness, "description": "Some dependency is not ready (see `checks`)"}},
    )
    async def readyz(request: Request) -> JSONResponse:
        runtime: ServiceRuntime | None = getattr(request.app.state, "runtime", None)
        checks = await runtime.readiness() if runtime is not None else {"runtime": "not started"}
        ready = all(value == "ok" for value in checks.values())
        readiness = Readiness(status="ready" if ready else "not_ready", service=name, checks=checks)
        return JSONResponse(status_code=200 if ready else 503, content=readiness.model_dump())

    if internal:
        if service_token:
            app.add_middleware(ServiceTokenMiddleware, token=service_token)
        else:
            logger.warning("%s: RAG_SERVICE_TOKEN is unset, so any caller that reaches this port is served", name)

    Instrumentator(excluded_handlers=["/metrics"]).instrument(app).expose(
        app, endpoint="/metrics", include_in_schema=False
    )
    # Last: traces, X-Trace-Id and the per-request log line wrap everything above.
    setup_telemetry(name, app)
    return app
