"""The shared service client (rag_common/http.py) against a real HTTP server on a loopback port:
which answer becomes which ``DependencyFailed``, which failures are retried and how often, what every
call sends (JSON body, service token, W3C ``traceparent``), and streams of Server-Sent Events.

The server (Starlette under uvicorn, in a thread) is scripted by its paths: ``/status/{code}``
always answers ``code``, ``/flaky/{key}/{fails}/{code}`` answers ``code`` to its first ``fails``
calls and then succeeds, ``/slow/{ms}`` answers late. It records every request it receives, so a
test counts attempts on the wire rather than trusting the client's own account. Timeouts are a
few tenths of a second, so no test waits long.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id
from pydantic import BaseModel
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from rag_common.errors import DependencyFailed
from rag_common.http import RetryPolicy, ServiceClient, error_text, worth_retrying
from rag_common.internal_auth import SERVICE_TOKEN_HEADER
from ragctl.in_process import serve_in_thread

STAGE = "retriever"
#: Retries that wait milliseconds, so a test of three attempts takes no time.
FAST_RETRY = RetryPolicy(attempts=3, first_wait_s=0.01, max_wait_s=0.02)


class Query(BaseModel):
    text: str


class Echo(BaseModel):
    text: str


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]


@dataclass
class Stage:
    """What the scripted server has received, and how its /healthz answers."""

    requests: list[Seen] = field(default_factory=list)
    calls: Counter[str] = field(default_factory=Counter)
    health_status: int = 200

    def to(self, path: str) -> list[Seen]:
        return [seen for seen in self.requests if seen.path == path]


def build_stage(stage: Stage) -> Any:
    def error_body(request: Request, code: int) -> Response:
        headers = {"retry-after": request.query_params["retry_after"]} if "retry_after" in request.query_params else None
        if "plain" in request.query_params:
            return PlainTextResponse("x" * 1000, code, headers=headers)
        if "no_error_key" in request.query_params:
            return JSONResponse({"detail": "nope"}, code, headers=headers)
        return JSONResponse({"error": f"nope {code}"}, code, headers=headers)

    async def echo(request: Request) -> Response:
        return JSONResponse({"text": (await request.json())["text"]})

    async def status(request: Request) -> Response:
        return error_body(request, request.path_params["code"])

    async def flaky(request: Request) -> Response:
        key = request.path_params["key"]
        stage.calls[key] += 1
        if stage.calls[key] <= request.path_params["fails"]:
            return error_body(request, request.path_params["code"])
        return JSONResponse({"text": f"ok after {stage.calls[key]}"})

    async def slow(request: Request) -> Response:
        await asyncio.sleep(request.path_params["ms"] / 1000)
        return JSONResponse({"text": "late"})

    async def wrong_shape(request: Request) -> Response:
        return JSONResponse({"txt": 1})

    async def events(request: Request) -> Response:
        text = (await request.json())["text"]

        async def stream() -> AsyncIterator[str]:
            for n in range(request.path_params["n"]):
                yield f"event: token\ndata: {text} {n}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def silent_events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            yield "event: token\ndata: first\n\n"
            await asyncio.sleep(1.5)  # longer than any client timeout here; cancelled when it hangs up
            yield "event: token\ndata: too late\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"}, stage.health_status)

    methods = ["GET", "POST", "PUT", "DELETE"]
    app = Starlette(
        routes=[
            Route("/echo", echo, methods=["POST"]),
            Route("/status/{code:int}", status, methods=methods),
            Route("/flaky/{key}/{fails:int}/{code:int}", flaky, methods=methods),
            Route("/slow/{ms:int}", slow, methods=methods),
            Route("/wrong-shape", wrong_shape, methods=methods),
            Route("/events/{n:int}", events, methods=["POST"]),
            Route("/silent-events", silent_events, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
        ]
    )

    async def recording(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {name.decode("latin-1"): value.decode("latin-1") for name, value in scope["headers"]}
            stage.requests.append(Seen(scope["method"], scope["path"], headers))
        await app(scope, receive, send)

    return recording


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, Stage]]:
    stage = Stage()
    with serve_in_thread(build_stage(stage)) as url:
        yield url, stage


@pytest.fixture
def stage(served: tuple[str, Stage]) -> Stage:
    served[1].requests.clear()
    served[1].health_status = 200
    return served[1]


@pytest.fixture
def url(served: tuple[str, Stage], stage: Stage) -> str:
    return served[0]


@asynccontextmanager
async def client_of(base_url: str, timeout_s: float = 2.0, **options: Any) -> AsyncIterator[ServiceClient]:
    client = ServiceClient(STAGE, base_url, timeout_s, **options)
    try:
        yield client
    finally:
        await client.aclose()


async def failure_of(call: Any) -> DependencyFailed:
    with pytest.raises(DependencyFailed) as caught:
        await call
    assert caught.value.stage == STAGE
    return caught.value


# --- calls that succeed -------------------------------------------------------------------------


async def test_a_typed_call_sends_its_body_as_json_and_parses_the_answer(url: str, stage: Stage) -> None:
    async with client_of(url) as client:
        answer = await client.post("/echo", Query(text="héllo wörld"), Echo)
    assert answer == Echo(text="héllo wörld")
    [seen] = stage.to("/echo")
    assert seen.method == "POST" and seen.headers["content-type"] == "application/json"


async def test_a_trailing_slash_of_the_base_url_is_dropped(url: str, stage: Stage) -> None:
    async with client_of(url + "/") as client:
        assert client.base_url == url
        await client.post("/echo", Query(text="a"), Echo)
    assert len(stage.to("/echo")) == 1


async def test_the_service_token_goes_with_every_call_and_only_when_given(url: str, stage: Stage) -> None:
    async with client_of(url, service_token="s3cret") as client:
        await client.post("/echo", Query(text="a"), Echo)
        await client.raw("GET", "/status/404")
        assert await client.is_healthy() == "ok"
    async with client_of(url) as client:
        await client.post("/echo", Query(text="b"), Echo)
    with_token, without = stage.requests[:3], stage.requests[3]
    assert [seen.headers.get(SERVICE_TOKEN_HEADER.lower()) for seen in with_token] == ["s3cret"] * 3
    assert SERVICE_TOKEN_HEADER.lower() not in without.headers


async def test_raw_hands_back_an_error_answer_unparsed(url: str) -> None:
    async with client_of(url) as client:
        response = await client.raw("GET", "/status/404")
    assert response.status_code == 404 and response.json() == {"error": "nope 404"}


# --- which answer is which failure -----------------------------------------------------------------


@pytest.mark.parametrize(
    "code, kind",
    [(400, "rejected"), (404, "rejected"), (422, "rejected"), (429, "rejected"),
     (500, "unavailable"), (502, "unavailable"), (503, "unavailable"), (504, "timeout")],
)
async def test_an_error_status_is_the_failure_it_means(url: str, code: int, kind: str) -> None:
    async with client_of(url) as client:
        failure = await failure_of(client.post(f"/status/{code}", Query(text="a"), Echo))
    assert (failure.kind, failure.status_code, failure.retry_after_s) == (kind, code, None)
    assert f"nope {code}" in failure.reason


async def test_a_503_saying_when_to_come_back_is_overloaded(url: str) -> None:
    async with client_of(url) as client:
        failure = await failure_of(client.post("/status/503?retry_after=7", Query(text="a"), Echo))
        # Only the seconds form counts (the services never send an HTTP date).
        dated = await failure_of(
            client.post("/status/503?retry_after=Wed, 21 Oct 2015 07:28:00 GMT", Query(text="a"), Echo)
        )
    assert (failure.kind, failure.status_code, failure.retry_after_s) == ("overloaded", 503, 7.0)
    assert failure.reason == "nope 503"
    assert (dated.kind, dated.retry_after_s) == ("unavailable", None)


async def test_the_reason_is_the_error_field_else_the_body_cut_to_300_characters(url: str) -> None:
    async with client_of(url) as client:
        plain = await failure_of(client.post("/status/500?plain", Query(text="a"), Echo))
        other_json = await failure_of(client.post("/status/400?no_error_key", Query(text="a"), Echo))
    assert plain.reason == "HTTP 500: " + "x" * 300
    assert other_json.reason == "{'detail': 'nope'}"


def test_error_text_cuts_a_long_error_field() -> None:
    response = httpx.Response(500, json={"error": "y" * 400})
    assert error_text(response) == "y" * 300


async def test_a_200_with_an_unexpected_body_is_a_bad_response(url: str) -> None:
    async with client_of(url) as client:
        failure = await failure_of(client.post("/wrong-shape", Query(text="a"), Echo))
    assert failure.kind == "bad_response" and failure.status_code is None
    assert "unexpected response body" in failure.reason


async def test_an_unreachable_stage_is_unavailable(closed_port: int) -> None:
    async with client_of(f"http://127.0.0.1:{closed_port}") as client:
        failure = await failure_of(client.post("/echo", Query(text="a"), Echo))
        raw = await failure_of(client.raw("GET", "/echo"))
    for found in (failure, raw):
        assert found.kind == "unavailable" and found.status_code is None
        assert found.reason == f"cannot reach http://127.0.0.1:{closed_port}/echo: ConnectError"


async def test_a_stage_that_does_not_answer_in_time_is_a_timeout_within_the_budget(black_hole_port: int) -> None:
    started = time.monotonic()
    async with client_of(f"http://127.0.0.1:{black_hole_port}", timeout_s=0.3) as client:
        failure = await failure_of(client.post("/echo", Query(text="a"), Echo))
    assert failure.kind == "timeout" and "in time" in failure.reason
    assert 0.25 < time.monotonic() - started < 1.5


# --- retries ------------------------------------------------------------------------------------


@pytest.mark.parametrize("code", [502, 503])
async def test_an_idempotent_call_is_retried_through_a_restart(url: str, stage: Stage, code: int) -> None:
    path = f"/flaky/restart-{code}/2/{code}"
    async with client_of(url, retry=FAST_RETRY) as client:
        answer = await client.post(path, Query(text="a"), Echo, idempotent=True)
    assert answer.text == "ok after 3"
    assert len(stage.to(path)) == 3


async def test_retries_stop_after_the_policys_attempts(url: str, stage: Stage, caplog: pytest.LogCaptureFixture) -> None:
    path = "/flaky/down/100/503"
    with caplog.at_level(logging.WARNING, logger="rag_common.http"):
        async with client_of(url, retry=FAST_RETRY) as client:
            failure = await failure_of(client.post(path, Query(text="a"), Echo, idempotent=True))
    assert (failure.kind, failure.status_code) == ("unavailable", 503)
    assert len(stage.to(path)) == 3
    assert [record.getMessage() for record in caplog.records if "retrying" in record.getMessage()] == [
        f"{STAGE} {path}: attempt {n} failed ({STAGE} unavailable: HTTP 503: nope 503), retrying" for n in (1, 2)
    ]


@pytest.mark.parametrize(
    "query, code, idempotent, retry",
    [
        ("", 500, True, FAST_RETRY),  # a bug, not a restart
        ("", 504, True, FAST_RETRY),  # the budget is spent
        ("", 400, True, FAST_RETRY),  # the same input gets the same answer
        ("?retry_after=1", 503, True, FAST_RETRY),  # overloaded: more calls lengthen its queue
        ("", 503, False, FAST_RETRY),  # not safe to repeat
        ("", 503, True, None),  # no retry policy
    ],
    ids=["500", "504", "400", "overloaded", "not-idempotent", "no-policy"],
)
async def test_what_is_not_retried(
    url: str, stage: Stage, query: str, code: int, idempotent: bool, retry: RetryPolicy | None, request: pytest.FixtureRequest
) -> None:
    path = f"/flaky/{request.node.callspec.id}/1/{code}"
    async with client_of(url, retry=retry) as client:
        await failure_of(client.post(path + query, Query(text="a"), Echo, idempotent=idempotent))
    assert len(stage.to(path)) == 1


async def test_an_unreachable_stage_is_retried_then_unavailable(closed_port: int, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="rag_common.http"):
        async with client_of(f"http://127.0.0.1:{closed_port}", retry=FAST_RETRY) as client:
            failure = await failure_of(client.post("/echo", Query(text="a"), Echo, idempotent=True))
    assert failure.kind == "unavailable"
    assert sum("retrying" in record.getMessage() for record in caplog.records) == 2


async def test_a_timeout_is_not_retried(url: str, stage: Stage) -> None:
    started = time.monotonic()
    async with client_of(url, timeout_s=0.3, retry=FAST_RETRY) as client:
        failure = await failure_of(client.post("/slow/1500", Query(text="a"), Echo, idempotent=True))
    assert failure.kind == "timeout"
    assert len(stage.to("/slow/1500")) == 1
    assert time.monotonic() - started < 1.2


async def test_no_attempt_starts_after_the_stages_timeout(url: str, stage: Stage) -> None:
    path = "/flaky/budget/100000/503"
    many = RetryPolicy(attempts=200, first_wait_s=0.05, max_wait_s=0.05)
    started = time.monotonic()
    async with client_of(url, timeout_s=0.3, retry=many) as client:
        failure = await failure_of(client.post(path, Query(text="a"), Echo, idempotent=True))
    elapsed = time.monotonic() - started
    assert failure.kind == "unavailable"
    assert 2 <= len(stage.to(path)) < 50
    assert elapsed < 1.5


@pytest.mark.parametrize(
    "failure, retried",
    [
        (DependencyFailed(STAGE, "unavailable", "refused"), True),
        (DependencyFailed(STAGE, "unavailable", "HTTP 502", 502), True),
        (DependencyFailed(STAGE, "unavailable", "HTTP 503", 503), True),
        (DependencyFailed(STAGE, "unavailable", "HTTP 500", 500), False),
        (DependencyFailed(STAGE, "overloaded", "full", 503, retry_after_s=1.0), False),
        (DependencyFailed(STAGE, "timeout", "slow"), False),
        (DependencyFailed(STAGE, "bad_response", "garbled"), False),
        (ConnectionError("not a DependencyFailed"), False),
    ],
)
def test_worth_retrying(failure: BaseException, retried: bool) -> None:
    assert worth_retrying(failure) is retried


# --- traces ---------------------------------------------------------------------------------------


async def test_each_attempt_is_a_client_span_whose_traceparent_the_stage_receives(url: str, stage: Stage) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    path = "/flaky/traced/1/503"
    async with client_of(url, retry=FAST_RETRY, tracer_provider=provider) as client:
        await client.post(path, Query(text="a"), Echo, idempotent=True)
        assert await client.is_healthy() == "ok"
    spans = exporter.get_finished_spans()
    assert [span.kind for span in spans] == [SpanKind.CLIENT, SpanKind.CLIENT]
    # traceparent: version-trace id-parent span id-flags; the flags' low bit is "sampled".
    sent = [seen.headers["traceparent"].split("-") for seen in stage.to(path)]
    assert [(version, trace_id, span_id) for version, trace_id, span_id, _ in sent] == [
        ("00", format_trace_id(span.context.trace_id), format_span_id(span.context.span_id)) for span in spans
    ]
    assert all(int(flags, 16) & 1 for *_, flags in sent)
    # The probe of a probe makes no span and sends no trace context.
    assert "traceparent" not in stage.to("/healthz")[0].headers


# --- Server-Sent Event streams -------------------------------------------------------------------


async def test_a_stream_yields_the_events_as_sent(url: str, stage: Stage) -> None:
    async with client_of(url, service_token="s3cret") as client:
        events = [(event.event, event.data) async for event in client.stream_sse("/events/3", Query(text="hi"))]
    assert events == [("token", "hi 0"), ("token", "hi 1"), ("token", "hi 2")]
    [seen] = stage.to("/events/3")
    assert seen.method == "POST" and seen.headers[SERVICE_TOKEN_HEADER.lower()] == "s3cret"


@pytest.mark.parametrize(
    "path, kind, code",
    [("/status/422", "rejected", 422), ("/status/503", "unavailable", 503), ("/status/503?retry_after=2", "overloaded", 503),
     ("/status/504", "timeout", 504)],
)
async def test_a_stream_answered_with_an_error_status_fails_as_a_call_does(url: str, path: str, kind: str, code: int) -> None:
    async with client_of(url) as client:
        failure = await failure_of(_drain(client.stream_sse(path, Query(text="a"))))
    assert (failure.kind, failure.status_code) == (kind, code)


async def test_a_silent_stream_times_out_per_event(url: str) -> None:
    received: list[str] = []
    started = time.monotonic()
    async with client_of(url, timeout_s=0.3) as client:
        failure = await failure_of(_drain(client.stream_sse("/silent-events", Query(text="a")), received))
    assert failure.kind == "timeout"
    assert received == ["first"]
    assert time.monotonic() - started < 1.4


async def test_a_200_that_is_no_event_stream_is_a_bad_response(url: str) -> None:
    async with client_of(url) as client:
        failure = await failure_of(_drain(client.stream_sse("/echo", Query(text="a"))))
    assert failure.kind == "bad_response" and "text/event-stream" in failure.reason


async def test_an_unreachable_stream_is_unavailable(closed_port: int) -> None:
    async with client_of(f"http://127.0.0.1:{closed_port}") as client:
        failure = await failure_of(_drain(client.stream_sse("/events/1", Query(text="a"))))
    assert failure.kind == "unavailable" and "ConnectError" in failure.reason


async def _drain(events: AsyncIterator[Any], into: list[str] | None = None) -> None:
    async for event in events:
        if into is not None:
            into.append(event.data)


# --- health probe ---------------------------------------------------------------------------------


async def test_the_health_probe_says_ok_the_status_or_why_it_is_unreachable(url: str, stage: Stage, closed_port: int) -> None:
    async with client_of(url) as client:
        assert await client.is_healthy() == "ok"
        stage.health_status = 503
        assert await client.is_healthy() == "HTTP 503"
    async with client_of(f"http://127.0.0.1:{closed_port}") as client:
        assert await client.is_healthy() == "unreachable: ConnectError"
