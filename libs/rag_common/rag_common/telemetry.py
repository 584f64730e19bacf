"""OpenTelemetry traces for the five services, set up in one place: :func:`setup_telemetry`.

``rag_common.service.create_service_app`` calls it for every service's app, so every service
  * has a tracer provider whose resource names it (``service.name = rag-<name>``);
  * answers every request under a server span (the FastAPI instrumentation), continuing the trace of
    the caller's W3C ``traceparent`` header (and its ``baggage``, which carries the tenant);
  * sends the trace id back in ``X-Trace-Id`` and writes one JSON log line per request
    (``rag_common.log_format``) with its status and ``duration_ms``.

The gateway's internal calls (``rag_common.http.ServiceClient``) go through an instrumented httpx
client, so each call is a client span whose ``traceparent`` the called service continues; its chat
graph opens one span per node (``rag_gateway.chat_graph``). One chat turn is therefore one trace:
gateway server span → node spans → httpx client spans → the services' server spans.

Export follows the standard variables, read here once per provider:
  * ``OTEL_TRACES_EXPORTER``: ``none`` (the default here: spans are made, so ids reach the logs and
    the header, but not sent anywhere), ``otlp`` (OTLP over HTTP/protobuf, the only OTLP protocol
    installed; ``OTEL_EXPORTER_OTLP_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, default
    ``http://localhost:4318``), ``console`` (each span as one JSON line on stdout), or a comma-separated list;
  * ``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG`` (default parentbased_always_on),
    ``OTEL_BSP_*`` (batching), ``OTEL_RESOURCE_ATTRIBUTES`` (more resource attributes) and the other
    ``OTEL_EXPORTER_OTLP_*`` settings (headers, timeout, compression), read by the SDK itself.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from fastapi import FastAPI
from opentelemetry import trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_common import log_format

logger = logging.getLogger(__name__)

#: The response header that carries the request's trace id (32 lowercase hex digits).
TRACE_ID_HEADER = "X-Trace-Id"
#: Requests that get no span and no log line: probes and scrapes, many a minute.
UNTRACED_PATHS = ("/healthz", "/readyz", "/metrics")
#: The stage a request of an internal service belongs to, by path (the gateway's stages are its
#: graph nodes, set by the graph); other paths have none.
STAGE_BY_PATH = {
    "/v1/refine": "refine",
    "/v1/search": "retrieve",
    "/v1/rerank": "rerank",
    "/v1/generate": "generate",
    "/v1/generate/stream": "generate",
}

_providers: dict[str, TracerProvider] = {}
#: Processors added to every provider, present and future (the tests' in-memory exporter).
_extra_processors: list[SpanProcessor] = []


def exporters_from_env() -> list[SpanExporter]:
    """The span exporters ``OTEL_TRACES_EXPORTER`` names (default ``none``)."""
    names = [name.strip().lower() for name in os.environ.get("OTEL_TRACES_EXPORTER", "none").split(",")]
    exporters: list[SpanExporter] = []
    for name in names:
        if name in ("", "none"):
            continue
        if name == "console":
            # One span per line, so the console stays JSON lines like the logs.
            exporters.append(ConsoleSpanExporter(formatter=lambda span: span.to_json(indent=None) + os.linesep))
        elif name in ("otlp", "otlp_proto_http"):
            protocol = os.environ.get(
                "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", os.environ.get("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
            )
            if protocol != "http/protobuf":
                raise ValueError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol}: only http/protobuf is installed")
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporters.append(OTLPSpanExporter())
        else:
            raise ValueError(f"OTEL_TRACES_EXPORTER={name}: expected none, otlp or console")
    return exporters


def tracer_provider(service: str) -> TracerProvider:
    """The tracer provider of ``service`` in this process, made on first use.

    One per service, so that five services run in one process (the tests) still name themselves in
    their spans' resource. The first one made in a process is also the global provider."""
    provider = _providers.get(service)
    if provider is None:
        resource = Resource.create({SERVICE_NAME: f"rag-{service}"})
        provider = TracerProvider(resource=resource)
        for exporter in exporters_from_env():
            provider.add_span_processor(BatchSpanProcessor(exporter))
        for processor in _extra_processors:
            provider.add_span_processor(processor)
        _providers[service] = provider
        if len(_providers) == 1:
            trace.set_tracer_provider(provider)
    return provider


def add_span_processor(processor: SpanProcessor) -> None:
    """Add ``processor`` to every service's provider, including those made later."""
    _extra_processors.append(processor)
    for provider in _providers.values():
        provider.add_span_processor(processor)


def remove_span_processor(processor: SpanProcessor) -> None:
    """Stop adding ``processor`` to new providers (the SDK cannot detach it from existing ones;
    a test's exporter is cleared or shut down instead)."""
    if processor in _extra_processors:
        _extra_processors.remove(processor)


def trace_id_of_current_span() -> str | None:
    span_context = trace.get_current_span().get_span_context()
    return trace.format_trace_id(span_context.trace_id) if span_context.is_valid else None


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
        log_format.bind_service(self._service)
        log_format.bind_stage(STAGE_BY_PATH.get(scope["path"]))
        trace_id = trace_id_of_current_span()
        status: dict[str, int] = {}

        async def send_with_trace_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
                if trace_id is not None:
                    message = {**message, "headers": [*message.get("headers", []), (TRACE_ID_HEADER.lower().encode(), trace_id.encode())]}
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


def instrument_httpx_client(client: Any, provider: TracerProvider | None = None) -> None:
    """Make every request of ``client`` (an ``httpx.AsyncClient``) a client span that sends
    ``traceparent`` (and ``baggage``) to the service it calls."""
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    HTTPXClientInstrumentor.instrument_client(client, tracer_provider=provider or trace.get_tracer_provider())


def bind_tenant(tenant: str) -> None:
    """The caller's tenant, for the rest of this request: on its log lines, on the server span
    (``rag.tenant``) and, as W3C baggage (``rag.tenant``), on every internal call it makes, so the
    called services' lines carry it too."""
    from opentelemetry import baggage, context

    log_format.bind_tenant(tenant)
    trace.get_current_span().set_attribute("rag.tenant", tenant)
    # Not detached: the context belongs to this request's task, which ends with the request.
    context.attach(baggage.set_baggage(log_format.TENANT_BAGGAGE, tenant))
