"""OpenTelemetry traces for the five services: tracer providers, exporters, httpx clients, tenant.

The app side is ``rag_common.service.setup_telemetry``, which ``create_service_app`` calls for every
service's app (this module stays FastAPI-free, so ``rag_common.http`` can use it), so every service
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

import os
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from rag_common import log_format

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
