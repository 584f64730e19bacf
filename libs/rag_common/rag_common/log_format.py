"""One log format for every service: JSON lines (python-json-logger), each with the same fields.

Every line a service writes (its own loggers, uvicorn's, and any library's that propagates to the
root logger) is one JSON object with at least these keys, ``null`` when not known:

    time, level, logger, message,
    service      the service that wrote it (``gateway``, ``refiner``...)
    trace_id     the W3C trace id of the request it belongs to (32 hex digits), as in ``X-Trace-Id``
    span_id      the span that was current (16 hex digits)
    tenant       the caller's tenant (the gateway's identity; passed on to the services as W3C baggage)
    stage        the chat stage: the graph node in the gateway, the service's own stage elsewhere
    duration_ms  how long what the line reports took (request lines, stage lines)

Anything passed as ``extra={...}`` is added as further keys. The trace and span ids come from the
OpenTelemetry context that is current when the line is logged; service, tenant and stage from
:data:`contextvars` that the request middleware (``rag_common.service``) and the chat graph set.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import IO

from opentelemetry import baggage, trace
from pythonjsonlogger.json import JsonFormatter

#: The fields of every line, in order (besides ``extra`` keys).
LOG_FIELDS = ("time", "level", "logger", "service", "trace_id", "span_id", "tenant", "stage", "duration_ms", "message")

#: The baggage entry that carries the tenant from the gateway to the services it calls.
TENANT_BAGGAGE = "rag.tenant"

_service: ContextVar[str | None] = ContextVar("rag_log_service", default=None)
_tenant: ContextVar[str | None] = ContextVar("rag_log_tenant", default=None)
_stage: ContextVar[str | None] = ContextVar("rag_log_stage", default=None)
#: The service of this process, for lines written outside any request (start-up, shutdown).
_process_service: str | None = None


def set_process_service(name: str) -> None:
    """The service a line written outside a request belongs to (the first one set in a process)."""
    global _process_service
    if _process_service is None:
        _process_service = name


def bind_tenant(tenant: str | None) -> None:
    """The tenant of the lines logged from here on in this request (set once the caller is known)."""
    _tenant.set(tenant)


@contextmanager
def request(service: str, stage: str | None) -> Iterator[None]:
    """Lines logged inside carry ``service`` and ``stage``; a tenant bound inside ends with it."""
    tokens = (_service.set(service), _stage.set(stage), _tenant.set(None))
    try:
        yield
    finally:
        for var, token in zip((_service, _stage, _tenant), tokens, strict=True):
            var.reset(token)


@contextmanager
def stage(name: str) -> Iterator[None]:
    """Lines logged inside carry ``stage: name``."""
    token = _stage.set(name)
    try:
        yield
    finally:
        _stage.reset(token)


def current_tenant() -> str | None:
    tenant = _tenant.get()
    if tenant is None:
        value = baggage.get_baggage(TENANT_BAGGAGE)
        tenant = str(value) if value is not None else None
    return tenant


class ContextFields(logging.Filter):
    """Adds service, trace_id, span_id, tenant and stage to every record (and ``duration_ms`` when
    the call did not pass one), so that every line has the same keys."""

    def filter(self, record: logging.LogRecord) -> bool:
        span_context = trace.get_current_span().get_span_context()
        if span_context.is_valid:
            record.trace_id = trace.format_trace_id(span_context.trace_id)
            record.span_id = trace.format_span_id(span_context.span_id)
        else:
            record.trace_id = record.span_id = None
        record.service = _service.get() or _process_service
        record.tenant = current_tenant()
        if getattr(record, "stage", None) is None:
            record.stage = _stage.get()
        if not hasattr(record, "duration_ms"):
            record.duration_ms = None
        record.__dict__.pop("color_message", None)  # uvicorn's ANSI-coloured copy of the message
        return True


def json_formatter() -> JsonFormatter:
    return JsonFormatter(
        "%(levelname)s %(name)s %(service)s %(trace_id)s %(span_id)s %(tenant)s %(stage)s %(duration_ms)s %(message)s",
        rename_fields={"levelname": "level", "name": "logger"},
        timestamp="time",  # ISO 8601 in UTC, microseconds
        json_ensure_ascii=False,
    )


def json_handler(stream: IO[str]) -> logging.Handler:
    """A handler writing the JSON lines to ``stream`` (what :func:`configure_logging` installs)."""
    handler = logging.StreamHandler(stream)
    handler.setFormatter(json_formatter())
    handler.addFilter(ContextFields())
    return handler


def configure_logging(level: str, *, stream: IO[str] | None = None) -> logging.Handler:
    """Make the root logger write JSON lines to ``stream`` (stderr), replacing its handlers.

    Called once by a service process before uvicorn starts (``rag_common.runner.serve``), so that
    uvicorn's own lines (run with ``log_config=None``, they propagate to the root) are JSON too.
    Python warnings are routed through logging as well."""
    handler = json_handler(stream or sys.stderr)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)
    return handler

