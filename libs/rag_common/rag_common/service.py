"""What every service's FastAPI app has in common: health, readiness, metrics, error bodies.

A service builds its app with :func:`create_service_app` and registers its own routes; the
probes and the error format are then the same across the five services.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from prometheus_fastapi_instrumentator import Instrumentator
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_common.schemas import ErrorBody

logger = logging.getLogger(__name__)

#: A readiness check returns ``{dependency: "ok" | reason}``; any non-"ok" value means not ready.
ReadinessCheck = Callable[[], Awaitable[dict[str, str]]]


class ServiceError(Exception):
    """An error a service reports to its caller with a specific status and message."""

    def __init__(self, status_code: int, error: str, detail: Any = None, stage: str | None = None):
        super().__init__(error)
        self.status_code = status_code
        self.error = error
        self.detail = detail
        self.stage = stage


def _error_response(status_code: int, body: ErrorBody) -> JSONResponse:
    return JSONResponse(status_code=status_code, content=body.model_dump(exclude_none=True))


def _validation_detail(exc: RequestValidationError) -> list[dict[str, Any]]:
    # Pydantic's raw errors may hold the offending input object; keep only what a client needs.
    return [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, exc: ServiceError) -> JSONResponse:
        return _error_response(exc.status_code, ErrorBody(error=exc.error, detail=exc.detail, stage=exc.stage))

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


def create_service_app(
    name: str,
    *,
    lifespan: Callable[[FastAPI], AbstractAsyncContextManager[None]] | None = None,
    readiness: ReadinessCheck | None = None,
    version: str = "0.1.0",
) -> FastAPI:
    """A FastAPI app with ``/healthz``, ``/readyz``, ``/metrics`` and uniform error bodies."""

    app = FastAPI(title=f"rag-{name}", version=version, lifespan=lifespan)
    install_error_handlers(app)

    @app.get("/healthz", tags=["ops"])
    async def healthz() -> dict[str, str]:
        return {"status": "ok", "service": name}

    @app.get("/readyz", tags=["ops"])
    async def readyz() -> JSONResponse:
        checks = await readiness() if readiness is not None else {}
        ready = all(value == "ok" for value in checks.values())
        return JSONResponse(
            status_code=200 if ready else 503,
            content={"status": "ready" if ready else "not_ready", "service": name, "checks": checks},
        )

    Instrumentator(excluded_handlers=["/metrics"]).instrument(app).expose(
        app, endpoint="/metrics", include_in_schema=False
    )
    return app
