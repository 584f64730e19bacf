"""One chat turn is one trace across the five services, and every log line is JSON carrying it.

The five real services (real models, real Redis, the real llama.cpp LLM) run in this process, each
served by uvicorn on its own loopback port, so every internal call crosses real HTTP: the W3C
``traceparent`` the gateway's httpx client sends is what the called service's FastAPI
instrumentation continues. Running them in one process is what lets one in-memory exporter see the
spans of all five (``rag_common.telemetry.add_span_processor`` adds it to every service's tracer
provider); each provider keeps its own resource, so a span still says which service made it.
"""

from __future__ import annotations

import io
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id

from rag_common import telemetry
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.log_format import LOG_FIELDS, json_handler
from rag_common.settings import LLMSettings
from rag_gateway.app import create_app as create_gateway
from rag_gateway.settings import GatewaySettings
from rag_generator.app import create_app as create_generator
from rag_generator.settings import GeneratorSettings
from rag_refiner.app import create_app as create_refiner
from rag_refiner.settings import RefinerSettings
from rag_reranker.app import create_app as create_reranker
from rag_reranker.settings import RerankerSettings
from rag_retriever.app import create_app as create_retriever
from rag_retriever.settings import RetrieverSettings
from ragctl.in_process import serve_in_thread

TOKEN = "trace-test-service-token"
DOCUMENTS = [
    {
        "id": "zorblax",
        "title": "Zorblax Aerospace",
        "text": "Zorblax Aerospace is a maker of small satellite launchers headquartered in Tromsø, Norway. "
        "The company was founded in 1987 by the engineer Ingrid Halvorsen.",
    },
    {
        "id": "basil",
        "title": "Growing basil",
        "text": "Basil needs six hours of sun a day and soil that drains well. Pinch the flowers off early.",
    },
]
QUESTION = "Where is Zorblax Aerospace headquartered?"
#: Each graph node that calls a service: (the service, the route its server span serves).
SERVICE_CALLS = {
    "chat.refine": ("refiner", "/v1/refine"),
    "chat.retrieve": ("retriever", "/v1/search"),
    "chat.rerank": ("reranker", "/v1/rerank"),
    "chat.generate": ("generator", "/v1/generate"),
}
NODES = ("chat.load_history", "chat.identify_language", *SERVICE_CALLS, "chat.save_turn")
SERVICES = ("gateway", "refiner", "retriever", "reranker", "generator")


@dataclass
class Stack:
    gateway: str
    spans: InMemorySpanExporter
    logs: io.StringIO


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory, redis_url: str, llm_base_url: str) -> Iterator[Stack]:
    exporter = InMemorySpanExporter()
    processor = SimpleSpanProcessor(exporter)
    telemetry.add_span_processor(processor)
    # The services' log lines, formatted by the same handler a service process writes with.
    logs = io.StringIO()
    handler = json_handler(logs)
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    llm = LLMSettings(base_url=llm_base_url, timeout_s=180.0, max_retries=0)
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    try:
        retriever = RetrieverSettings(index_dir=str(tmp_path_factory.mktemp("trace") / "index"), service_token=TOKEN)
        with (
            serve_in_thread(create_retriever(retriever, embedder=embedder)) as retriever_url,
            serve_in_thread(create_refiner(RefinerSettings(service_token=TOKEN), llm)) as refiner_url,
            serve_in_thread(create_reranker(RerankerSettings(device="cpu", service_token=TOKEN), llm)) as reranker_url,
            serve_in_thread(create_generator(GeneratorSettings(mode="extractive", service_token=TOKEN), llm)) as generator_url,
        ):
            gateway = GatewaySettings(
                redis_url=redis_url,
                refiner_url=refiner_url,
                retriever_url=retriever_url,
                reranker_url=reranker_url,
                generator_url=generator_url,
                service_token=TOKEN,
                auth="off",
                refiner_timeout_s=200,
                retriever_timeout_s=60,
                reranker_timeout_s=60,
                generator_timeout_s=200,
            )
            with serve_in_thread(create_gateway(gateway)) as gateway_url:
                ingested = httpx.post(f"{gateway_url}/v1/documents", json={"documents": DOCUMENTS}, timeout=120)
                assert ingested.status_code == 200, ingested.text
                # Its server spans end just after the response is sent: let them, or the first chat
                # turn's "every span is of this turn" would see them.
                _finished_spans(exporter, ingested.headers["X-Trace-Id"], {"gateway", "retriever"})
                yield Stack(gateway_url, exporter, logs)
    finally:
        telemetry.remove_span_processor(processor)
        exporter.shutdown()
        root.removeHandler(handler)
        root.setLevel(level)


def _chat_turn(stack: Stack, path: str = "/v1/chat") -> tuple[httpx.Response, list[ReadableSpan]]:
    """Ask the question; return the response and the spans of its trace once all five services'
    server spans have ended (a server span ends just after its response's last byte is sent)."""
    stack.spans.clear()
    response = httpx.post(f"{stack.gateway}{path}", json={"message": QUESTION}, timeout=600)
    assert response.status_code == 200, response.text
    return response, _finished_spans(stack.spans, response.headers["X-Trace-Id"], set(SERVICES))


def _finished_spans(exporter: InMemorySpanExporter, trace_id: str, services: set[str]) -> list[ReadableSpan]:
    """The finished spans once each of ``services`` has ended its server span of ``trace_id`` (or 10 s
    have passed)."""
    deadline = time.monotonic() + 10
    while True:
        spans = list(exporter.get_finished_spans())
        servers = {_service(s) for s in spans if s.kind is SpanKind.SERVER and _trace_id(s) == trace_id}
        if servers >= services or time.monotonic() > deadline:
            return spans
        time.sleep(0.05)


def _service(span: ReadableSpan) -> str:
    return str(span.resource.attributes["service.name"]).removeprefix("rag-")


def _trace_id(span: ReadableSpan) -> str:
    return format_trace_id(span.context.trace_id)


def _parent_id(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


def _one(spans: list[ReadableSpan], **where: object) -> ReadableSpan:
    found = [s for s in spans if all(getattr(s, k) == v for k, v in where.items())]
    assert len(found) == 1, (where, [(s.name, s.kind) for s in found])
    return found[0]


def _assert_one_trace(response: httpx.Response, spans: list[ReadableSpan], route: str, generate_route: str) -> None:
    trace_id = response.headers["X-Trace-Id"]
    assert len(trace_id) == 32 and int(trace_id, 16) != 0
    # One turn, one trace: every span made while it ran belongs to it.
    assert {_trace_id(s) for s in spans} == {trace_id}
    [root] = [s for s in spans if s.parent is None]
    assert (_service(root), root.kind, root.attributes.get("http.route")) == ("gateway", SpanKind.SERVER, route)
    assert {_service(s) for s in spans} == set(SERVICES)

    nodes = {name: _one(spans, name=name) for name in NODES}
    for node in nodes.values():
        assert _service(node) == "gateway" and _parent_id(node) == root.context.span_id, node.name

    calls = {**SERVICE_CALLS, "chat.generate": ("generator", generate_route)}
    for node_name, (service, service_route) in calls.items():
        node = nodes[node_name]
        [client] = [s for s in spans if s.kind is SpanKind.CLIENT and _parent_id(s) == node.context.span_id]
        assert _service(client) == "gateway"
        [server] = [s for s in spans if s.kind is SpanKind.SERVER and _parent_id(s) == client.context.span_id]
        assert _service(server) == service, node_name
        assert server.attributes.get("http.route") == service_route
        assert server.parent is not None and server.parent.is_remote  # continued from the traceparent header
    # Nothing else was called: no server span hangs anywhere but under a node's client span.
    servers = [s for s in spans if s.kind is SpanKind.SERVER]
    assert len(servers) == 1 + len(calls)


def _log_lines(stack: Stack) -> list[dict]:
    lines = [line for line in stack.logs.getvalue().splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line is one JSON object
    for record in records:
        assert set(LOG_FIELDS) <= set(record), record
    return records


def test_a_chat_turn_is_one_trace_across_the_five_services(stack: Stack) -> None:
    response, spans = _chat_turn(stack)
    _assert_one_trace(response, spans, "/v1/chat", "/v1/generate")


def test_a_streamed_chat_turn_is_one_trace_too(stack: Stack) -> None:
    response, spans = _chat_turn(stack, "/v1/chat/stream")
    assert "event: final" in response.text
    _assert_one_trace(response, spans, "/v1/chat/stream", "/v1/generate/stream")


def _wait_until_quiet(stack: Stack, quiet_s: float = 1.0, limit_s: float = 20.0) -> None:
    """Wait until no service has written a line for ``quiet_s``: a request's own line is written after
    its response is sent, so an earlier test's lines can land late, inside this test's window (CI saw
    a foreign request line there). Bounded: after ``limit_s`` the window opens anyway."""
    deadline = time.monotonic() + limit_s
    size = -1
    while time.monotonic() < deadline and len(stack.logs.getvalue()) != size:
        size = len(stack.logs.getvalue())
        time.sleep(quiet_s)


def test_log_lines_are_json_with_the_trace_id_of_the_response(stack: Stack) -> None:
    _wait_until_quiet(stack)
    stack.logs.seek(0)
    stack.logs.truncate()
    response, spans = _chat_turn(stack)
    trace_id = response.headers["X-Trace-Id"]
    records = _log_lines(stack)
    of_turn = [r for r in records if r["trace_id"] == trace_id]
    # Every service wrote lines of this turn, each with its name, the tenant (the gateway's caller,
    # passed on as baggage) and a span of the trace.
    assert {r["service"] for r in of_turn} == set(SERVICES)
    span_ids = {format_span_id(s.context.span_id) for s in spans}
    for record in of_turn:
        assert record["tenant"] == "default", record
        assert record["span_id"] in span_ids, record
    # One request line per service, with its duration; one line per graph node, with its stage.
    requests = [r for r in of_turn if r.get("path") is not None]
    assert sorted(r["service"] for r in requests) == sorted(SERVICES)
    assert all(r["status"] == 200 and r["duration_ms"] > 0 for r in requests)
    assert {r["stage"] for r in requests if r["service"] != "gateway"} == {"refine", "retrieve", "rerank", "generate"}
    stage_lines = {r["stage"]: r for r in of_turn if r["service"] == "gateway" and r["message"].startswith("stage ")}
    assert set(stage_lines) == {name.removeprefix("chat.") for name in NODES}
    assert all(r["duration_ms"] >= 0 for r in stage_lines.values())
    # The only requests in this window were the turn's: every request line carries its trace.
    assert all(r["trace_id"] == trace_id for r in records if r["service"] in SERVICES and r.get("path")), records
