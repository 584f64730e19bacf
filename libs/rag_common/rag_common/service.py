"""What every service's FastAPI app has in common: health, readiness, metrics, error bodies.

A service builds its app with :func:`create_service_app` from its runtime opener and registers its
own routes; the lifespan, the probes and the error format are then the same across the five
services. Domain errors (``rag_common.errors``) become status codes here, in ``STATUS_BY_ERROR``.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any, Protocol

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_common.errors import (
    DependencyFailed,
    InvalidInput,
    InvalidQuery,
    NotFound,
    PayloadTooLarge,
    RagError,
    UnsupportedMediaType,
)
from rag_common.schemas import ErrorBody

logger = logging.getLogger(__name__)

#: The one place a domain error becomes a status code. Checked in order, so a subclass listed
#: before its base wins; a RagError not listed is a 500.
STATUS_BY_ERROR: tuple[tuple[type[RagError], int], ...] = (
    (InvalidQuery, 400),
    (NotFound, 404),
    (PayloadTooLarge, 413),
    (UnsupportedMediaType, 415),
    (InvalidInput, 422),
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


def error_body(error: RagError) -> ErrorBody:
    return ErrorBody(error=error.message, detail=error.detail, stage=error.stage)


def _error_response(status_code: int, body: ErrorBody) -> JSONResponse:
    return JSONResponse(status_code=status_code, content=body.model_dump(exclude_none=True))


def _validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Pydantic's raw errors may hold the offending input object; keep only what a client needs.
    return [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(RagError)
    async def _rag_error(_: Request, exc: RagError) -> JSONResponse:
        return _error_response(status_for(exc), error_body(exc))

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = _validation_detail(exc)
        summary = "; ".join(f"{'.'.join(str(p) for p in d['loc'])}: {d['msg']}" for d in detail)
        return _error_response(422, ErrorBody(error=f"invalid request: {summary}", detail=detail))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error_response(exc.status_code, ErrorBody(error=str(exc.detail)))

    @app.exception_handler(Exception)
    async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
        logger.exception("unhandled error")
        return _error_response(500, ErrorBody(error=f"internal error: {type(exc).__name__}"))


class ServiceRuntime(Protocol):
    """What a service's ``runtime.py`` opens: its assembled parts, and whether their dependencies are up."""

    async def readiness(self) -> dict[str, str]:
        """``{dependency: "ok" | reason}``; any value other than ``"ok"`` means not ready."""


def create_service_app(
    name: str,
    open_runtime: Callable[[], AbstractAsyncContextManager[ServiceRuntime]],
    *,
    version: str = "0.1.0",
) -> FastAPI:
    """A FastAPI app with ``/healthz``, ``/readyz``, ``/metrics`` and uniform error bodies.

    The app's lifespan is ``async with open_runtime() as runtime``: the runtime (every model,
    client and index the service uses, assembled by its ``runtime.py``) is ``app.state.runtime``
    while the app serves, and ``/readyz`` asks it. The same runtime is what the eval harness and the
    benchmarks open, without HTTP.
    """

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with open_runtime() as runtime:
            app.state.runtime = runtime
            yield

    app = FastAPI(title=f"rag-{name}", version=version, lifespan=lifespan)
    install_error_handlers(app)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": name}

    @app.get("/readyz", tags=["ops"])
    async def readyz(request: Request) -> JSONResponse:
        runtime: ServiceRuntime | None = getattr(request.app.state, "runtime", None)
        checks = await runtime.readiness() if runtime is not None else {"runtime": "not started"}
        ready = all(value == "ok" for value in checks.values())
        return JSONResponse(
            status_code=200 if ready else 503,
            content={"status": "ready" if ready else "not_ready", "service": name, "checks": checks},
        )

    Instrumentator(excluded_handlers=["/metrics"]).instrument(app).expose(
        app, endpoint="/metrics", include_in_schema=False
    )
    return app
