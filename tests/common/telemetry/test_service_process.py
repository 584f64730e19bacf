"""A service process as ``make run`` starts it: every line it writes is JSON (uvicorn's start-up
lines included), it continues the caller's W3C ``traceparent`` and ``baggage``, and
``OTEL_TRACES_EXPORTER`` picks its exporter (``console``: one JSON line per span on stdout)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from rag_common.internal_auth import SERVICE_TOKEN_HEADER
from rag_common.log_format import LOG_FIELDS
from ragctl.stack import ManagedProcess, free_port, start_service

TOKEN = secrets.token_urlsafe(16)


@pytest.fixture(scope="module")
def refiner(tmp_path_factory: pytest.TempPathFactory, llm_base_url: str) -> Iterator[ManagedProcess]:
    env = {
        "RAG_SERVICE_TOKEN": TOKEN,
        "LLM_BASE_URL": llm_base_url,
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # export within 0.1 s instead of 5 s
    }
    proc = start_service("refiner", free_port(), tmp_path_factory.mktemp("refiner-logs"), env)
    yield proc
    proc.stop()


def _lines(path: Path) -> list[dict]:
    # The launcher marks each start with a plain "----- <time> starting <name>" line; the rest is the process's.
    text = path.read_text()
    return [json.loads(line) for line in text.splitlines() if line.strip() and not line.startswith("----- ")]


def test_a_service_process_writes_json_lines_and_continues_the_callers_trace(refiner: ManagedProcess) -> None:
    trace_id, parent_id = secrets.token_hex(16), secrets.token_hex(8)
    response = httpx.post(
        f"{refiner.url}/v1/refine",
        json={"message": "Where is Zorblax Aerospace headquartered?", "history": []},
        headers={
            SERVICE_TOKEN_HEADER: TOKEN,
            "traceparent": f"00-{trace_id}-{parent_id}-01",
            "baggage": "rag.tenant=acme",
        },
        timeout=300,
    )
    assert response.status_code == 200, response.text
    assert response.headers["X-Trace-Id"] == trace_id

    deadline = time.monotonic() + 10
    while True:
        lines = _lines(refiner.log_path)  # every line parses: the whole file is JSON lines
        spans = [line for line in lines if "context" in line and line["context"].get("trace_id") == f"0x{trace_id}"]
        if spans or time.monotonic() > deadline:
            break
        time.sleep(0.1)

    records = [line for line in lines if "context" not in line]
    assert all(set(LOG_FIELDS) <= set(record) for record in records)
    assert any(r["logger"].startswith("uvicorn") and r["service"] == "refiner" for r in records)
    [request] = [r for r in records if r.get("path") == "/v1/refine"]
    assert (request["trace_id"], request["tenant"], request["stage"], request["status"]) == (trace_id, "acme", "refine", 200)
    assert request["duration_ms"] > 0 and request["level"] == "INFO"

    # The console exporter's span: the server span of the request, a child of the caller's span.
    [server] = [s for s in spans if s["kind"] == "SpanKind.SERVER"]
    assert server["parent_id"] == f"0x{parent_id}"
    assert server["resource"]["attributes"]["service.name"] == "rag-refiner"
    assert server["attributes"]["http.route"] == "/v1/refine"
