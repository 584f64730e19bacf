"""Across the five real service processes (`make run`'s launcher, real Redis and LLM): the trace id
a chat turn answers with in ``X-Trace-Id`` is on the JSON log lines of every service, so W3C
``traceparent`` crossed every process boundary, and nothing the services wrote meanwhile is not JSON."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from rag_common.log_format import LOG_FIELDS

from .corpus import DOCUMENTS

pytestmark = pytest.mark.e2e

SERVICES = ("gateway", "refiner", "retriever", "reranker", "generator")


def test_a_chat_turns_trace_id_is_in_every_services_log(running_stack) -> None:
    with httpx.Client(base_url=running_stack.gateway, timeout=600) as client:
        assert client.post("/v1/documents", json={"documents": DOCUMENTS}).status_code == 200
        logs = {name: running_stack.process(name).log_path for name in SERVICES}
        offsets = {name: path.stat().st_size for name, path in logs.items()}
        response = client.post("/v1/chat", json={"message": "Where is Zorblax Aerospace headquartered?"})
    assert response.status_code == 200, response.text
    trace_id = response.headers["X-Trace-Id"]

    def turn_records(name: str) -> list[dict]:
        text = logs[name].read_bytes()[offsets[name]:].decode()
        # Only whole lines: a service may be mid-write when we read.
        lines = text.split("\n")[:-1]
        return [json.loads(line) for line in lines if line.strip()]  # every line is JSON

    deadline = time.monotonic() + 10
    while True:
        written = {name: turn_records(name) for name in logs}
        # A service writes its request line once its response is sent, after the lines it logged
        # while handling it: wait for every service's request line, not just any line of the turn.
        if all(
            any(r.get("trace_id") == trace_id and r.get("path") for r in records)
            for records in written.values()
        ) or time.monotonic() > deadline:
            break
        time.sleep(0.1)

    for name, records in written.items():
        assert all(set(LOG_FIELDS) <= set(r) for r in records), name
        of_turn = [r for r in records if r["trace_id"] == trace_id]
        assert of_turn, f"{name} logged nothing with the turn's trace id"
        assert all(r["service"] == name and r["tenant"] == "default" for r in of_turn), of_turn
        [request] = [r for r in of_turn if r.get("path")]
        assert request["status"] == 200 and request["duration_ms"] > 0, request
