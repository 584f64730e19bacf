"""The query log (issue 15, part 4) and the feedback route (part 1), through the real gateway app on
real Redis with the contract fakes of the four services: one record per chat turn on every chat
endpoint, one per feedback; feedback stored with its turn; a failing or full log never costs a turn
and is counted in /metrics; ``ragctl logs`` reads the file back."""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from rag_common.identity import Identity
from rag_common.telemetry import trace_id_of_current_span
from rag_gateway.app import create_app
from rag_gateway.chat_models import FeedbackRequest
from rag_gateway.chat_service import ConversationNotFound, TurnNotFound
from rag_gateway.query_log import (
    STAGES,
    JsonlFileSink,
    QueryLogWriter,
    RecordFilter,
    read_records,
    select,
    user_hash,
)
from ragctl.cli import app as ragctl_app

from .support import gateway_settings, sse_events

HEX16 = re.compile(r"^[0-9a-f]{16}$")
HEX32 = re.compile(r"^[0-9a-f]{32}$")
LOCAL = Identity(tenant="default", user="local")


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "query-logs" / "queries.jsonl"


@pytest.fixture
def logged(redis_url: str, fake_services, log_path: Path) -> Iterator[TestClient]:
    url, calls = fake_services
    calls.clear()
    with TestClient(create_app(gateway_settings(redis_url, url, query_log_path=str(log_path)))) as client:
        yield client


def records(client: TestClient, path: Path) -> list[dict[str, Any]]:
    """Everything written so far: waits for the background writer to hand the queue to the sink."""
    client.portal.call(client.app.state.runtime.query_log.flush)
    return list(read_records(path))


def test_a_chat_turn_writes_one_record_with_every_field(logged: TestClient, log_path: Path) -> None:
    response = logged.post("/v1/chat", json={"message": "What is Acme?"})
    assert response.status_code == 200, response.text
    body = response.json()
    [record] = records(logged, log_path)
    assert record["event"] == "turn" and record["endpoint"] == "chat"
    assert record["conversation_id"] == body["conversation_id"] and record["turn_index"] == 0
    assert record["tenant"] == "default" and HEX16.match(record["user_hash"])
    assert record["user_hash"] == user_hash(LOCAL, "") and "local" not in json.dumps(record)
    assert record["question"] == "What is Acme?"
    assert record["refined_query"] == body["refined_query"] and record["intent"] == "rag"
    assert record["answer"] == body["answer"] and record["answer_mode"] == body["answer_mode"]
    assert record["abstained"] is False and record["abstain_reason"] is None
    assert record["citation_count"] == len(body["citations"]) == 1
    assert record["degraded"] == [] and record["degraded_count"] == 0
    assert record["feedback"] is None
    # The turn's trace: the record leads from a thumbs-down to the trace (docs/operations.md).
    assert record["trace_id"] == response.headers["X-Trace-Id"] and HEX32.match(record["trace_id"])
    assert set(record["stage_ms"]) == {"history", "refine", "retrieve", "rerank", "generate", "save", "total"}
    assert record["stage_ms"]["total"] == body["timings_ms"]["total"]
    assert record["record_id"] == record["turn_id"]
    stored = logged.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"][0]
    assert stored["turn_id"] == record["turn_id"] and stored["feedback"] is None
    assert record["@timestamp"].endswith("Z") and record["@timestamp"][:4] == time.strftime("%Y", time.gmtime())


def test_every_chat_endpoint_and_branch_is_logged_once_per_turn(logged: TestClient, log_path: Path) -> None:
    first = logged.post("/v1/chat", json={"message": "Tell me a joke"}).json()  # out_of_scope: abstains
    events = sse_events(logged, "/v1/chat/stream", {"conversation_id": first["conversation_id"], "message": "hello there"})
    assert events[-1][0] == "final"
    completion = logged.post(
        "/v1/chat/completions", json={"model": "m", "messages": [{"role": "user", "content": "What is Acme?"}]}
    )
    assert completion.status_code == 200, completion.text
    declined, greeted, stateless = records(logged, log_path)
    assert (declined["endpoint"], declined["intent"], declined["abstained"]) == ("chat", "out_of_scope", True)
    assert declined["abstain_reason"] == "out_of_scope" and declined["answer_mode"] is None
    assert (greeted["endpoint"], greeted["intent"], greeted["turn_index"]) == ("chat_stream", "chitchat", 1)
    assert greeted["conversation_id"] == first["conversation_id"]
    assert (stateless["endpoint"], stateless["conversation_id"], stateless["turn_index"]) == ("completions", None, None)
    assert len({declined["turn_id"], greeted["turn_id"], stateless["turn_id"]}) == 3


def test_a_degraded_turn_lists_why(logged: TestClient, log_path: Path) -> None:
    response = logged.post("/v1/chat", json={"message": "bad gateway please"})  # the generator answers 502
    assert response.status_code == 200, response.text
    [record] = records(logged, log_path)
    assert record["degraded"] == response.json()["degraded"] and record["degraded_count"] == 1
    assert record["degraded"][0].startswith("generator")
    assert record["answer_mode"] == "extractive"


def test_a_failed_turn_is_not_logged(logged: TestClient, log_path: Path) -> None:
    assert logged.post("/v1/chat", json={"message": "search down"}).status_code == 503
    assert logged.post("/v1/chat", json={"message": "What is Acme?"}).status_code == 200
    assert [r["question"] for r in records(logged, log_path)] == ["What is Acme?"]


def test_feedback_is_stored_with_its_turn_and_logged(logged: TestClient, log_path: Path) -> None:
    first = logged.post("/v1/chat", json={"message": "What is Acme?"}).json()
    cid = first["conversation_id"]
    logged.post("/v1/chat", json={"conversation_id": cid, "message": "When was it founded?"})
    path = f"/v1/conversations/{cid}/turns/1/feedback"

    given = logged.post(path, json={"rating": "down", "comment": "wrong year"})
    assert given.status_code == 200, given.text
    out = given.json()
    assert (out["conversation_id"], out["turn_index"]) == (cid, 1)
    assert out["feedback"]["rating"] == "down" and out["feedback"]["comment"] == "wrong year"
    turns = logged.get(f"/v1/conversations/{cid}").json()["turns"]
    assert turns[0]["feedback"] is None
    assert turns[1]["feedback"] == out["feedback"] and turns[1]["turn_id"] == out["turn_id"]

    # A second verdict replaces the first; a null comment is allowed.
    again = logged.post(path, json={"rating": "up", "comment": None})
    assert again.status_code == 200 and again.json()["feedback"]["comment"] is None
    assert logged.get(f"/v1/conversations/{cid}").json()["turns"][1]["feedback"]["rating"] == "up"

    turn_a, turn_b, down, up = records(logged, log_path)
    assert [r["event"] for r in (turn_a, turn_b, down, up)] == ["turn", "turn", "feedback", "feedback"]
    assert down["turn_id"] == turn_b["turn_id"] == out["turn_id"] and down["turn_index"] == 1
    assert down["record_id"] != up["record_id"] != turn_b["record_id"]
    assert down["feedback"]["rating"] == "down" and down["feedback"]["comment"] == "wrong year"
    assert down["question"] == "When was it founded?" and down["answer"] == turn_b["answer"]
    assert down["refined_query"] == turn_b["refined_query"] and down["endpoint"] == "feedback"
    assert down["user_hash"] == turn_b["user_hash"] and down["tenant"] == "default"
    assert up["feedback"]["rating"] == "up"


@pytest.mark.parametrize(
    "body",
    [{}, {"rating": "sideways"}, {"rating": "UP"}, {"rating": 1}, {"rating": "up", "comment": 5},
     {"rating": "up", "extra": True}, {"rating": "down", "comment": "x" * 2001}],
)
def test_a_bad_feedback_body_is_a_422(logged: TestClient, body: dict) -> None:
    cid = logged.post("/v1/chat", json={"message": "What is Acme?"}).json()["conversation_id"]
    response = logged.post(f"/v1/conversations/{cid}/turns/0/feedback", json=body)
    assert response.status_code == 422, response.text


def test_feedback_on_an_unknown_turn_or_conversation_is_a_404(logged: TestClient, log_path: Path) -> None:
    cid = logged.post("/v1/chat", json={"message": "What is Acme?"}).json()["conversation_id"]
    unknown_turn = logged.post(f"/v1/conversations/{cid}/turns/1/feedback", json={"rating": "up"})
    assert unknown_turn.status_code == 404 and "no turn 1" in unknown_turn.json()["error"]
    unknown = logged.post("/v1/conversations/c0ffee/turns/0/feedback", json={"rating": "up"})
    assert unknown.status_code == 404 and "not found" in unknown.json()["error"]
    assert logged.post(f"/v1/conversations/{cid}/turns/-1/feedback", json={"rating": "up"}).status_code == 422
    assert logged.post(f"/v1/conversations/{cid}/turns/x/feedback", json={"rating": "up"}).status_code == 422
    assert [r["event"] for r in records(logged, log_path)] == ["turn"]


def test_feedback_is_for_the_conversations_owner_only(logged: TestClient) -> None:
    cid = logged.post("/v1/chat", json={"message": "What is Acme?"}).json()["conversation_id"]
    chat = logged.app.state.runtime.chat
    stranger = Identity(tenant="default", user="mallory", scopes=["chat"])
    other_tenant = Identity(tenant="globex", user="local", scopes=["chat"])
    for identity in (stranger, other_tenant):
        with pytest.raises(ConversationNotFound):
            logged.portal.call(chat.give_feedback, identity, cid, 0, FeedbackRequest(rating="down"))
    with pytest.raises(TurnNotFound):
        logged.portal.call(chat.give_feedback, LOCAL.model_copy(update={"scopes": ["chat"]}), cid, 3, FeedbackRequest(rating="up"))


def _metric(text: str, name: str, **labels: str) -> float:
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    pattern = re.compile(rf"^{re.escape(name)}(?:\{{{re.escape(wanted)}\}})? (\S+)$" if wanted else rf"^{re.escape(name)} (\S+)$", re.M)
    match = pattern.search(text)
    return float(match.group(1)) if match else 0.0


def test_a_log_that_cannot_be_written_costs_no_turn_and_is_counted(
    redis_url: str, fake_services, tmp_path: Path
) -> None:
    url, _ = fake_services
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the log directory should be")
    settings = gateway_settings(redis_url, url, query_log_path=str(blocker / "queries.jsonl"))
    with TestClient(create_app(settings)) as client:
        before = _metric(client.get("/metrics").text, "rag_gateway_query_log_dropped_total", reason="sink_failed")
        for _ in range(3):
            assert client.post("/v1/chat", json={"message": "What is Acme?"}).status_code == 200
        client.portal.call(client.app.state.runtime.query_log.flush)
        metrics = client.get("/metrics").text
    assert _metric(metrics, "rag_gateway_query_log_dropped_total", reason="sink_failed") - before == 3
    assert "rag_gateway_query_log_queue_length" in metrics and "rag_gateway_query_log_written_total" in metrics


# --------------------------------------------------------------------------- the writer on its own


class HeldSink:
    """A sink that takes a batch and holds it until released: a cluster that has stopped answering."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.batches: list[list[Mapping[str, Any]]] = []

    async def write(self, records: Sequence[Mapping[str, Any]]) -> None:
        await self.release.wait()
        self.batches.append(list(records))

    async def close(self) -> None:
        pass


async def test_a_stuck_sink_never_blocks_submit_and_a_full_queue_drops_and_counts() -> None:
    sink = HeldSink()
    writer = QueryLogWriter(sink, queue_size=2, batch_size=10, salt="")
    writer.start()
    assert writer.submit({"n": 0})
    await asyncio.sleep(0.05)  # the writer took record 0 and waits on the sink
    started = time.perf_counter()
    accepted = [writer.submit({"n": n}) for n in range(1, 6)]
    assert time.perf_counter() - started < 0.05  # submit never waits
    assert accepted == [True, True, False, False, False] and writer.dropped == 3
    sink.release.set()
    await writer.flush()
    assert [[r["n"] for r in batch] for batch in sink.batches] == [[0], [1, 2]]
    await writer.close()


async def test_close_drains_what_is_queued(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    writer = QueryLogWriter(JsonlFileSink(path, max_bytes=1 << 20, backups=1), queue_size=100, batch_size=7, salt="")
    writer.start()
    for n in range(20):
        writer.submit({"n": n})
    await writer.close()
    assert [r["n"] for r in read_records(path)] == list(range(20))


async def test_the_file_is_rotated_and_read_back_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    sink = JsonlFileSink(path, max_bytes=400, backups=2)
    for n in range(30):
        await sink.write([{"n": n, "pad": "x" * 40}])
    await sink.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.jsonl", "q.jsonl.1", "q.jsonl.2"]
    kept = [r["n"] for r in read_records(path)]
    assert kept == list(range(30 - len(kept), 30)) and 10 < len(kept) < 30  # the oldest rotated away


def test_the_trace_id_comes_from_the_current_opentelemetry_span() -> None:
    trace = pytest.importorskip("opentelemetry.trace")
    assert trace_id_of_current_span() is None
    context = trace.SpanContext(trace_id=0x0AF7651916CD43DD8448EB211C80319C, span_id=0xB7AD6B7169203331, is_remote=False)
    with trace.use_span(trace.NonRecordingSpan(context)):
        assert trace_id_of_current_span() == "0af7651916cd43dd8448eb211c80319c"


# --------------------------------------------------------------------------- ragctl logs


def test_ragctl_logs_filters_the_local_file(logged: TestClient, log_path: Path) -> None:
    cid = logged.post("/v1/chat", json={"message": "What is Acme?"}).json()["conversation_id"]
    logged.post("/v1/chat", json={"conversation_id": cid, "message": "Tell me a joke"})
    logged.post(f"/v1/conversations/{cid}/turns/0/feedback", json={"rating": "down", "comment": "too vague"})
    records(logged, log_path)
    runner = CliRunner()

    def logs(*args: str) -> list[dict[str, Any]]:
        result = runner.invoke(ragctl_app, ["logs", "--path", str(log_path), "--json", *args])
        assert result.exit_code == 0, result.output
        return [json.loads(line) for line in result.output.splitlines() if line.strip()]

    assert len(logs()) == 3
    assert [r["question"] for r in logs("--abstained")] == ["Tell me a joke"]
    [down] = logs("--feedback", "down")
    assert down["event"] == "feedback" and down["question"] == "What is Acme?" and down["feedback"]["comment"] == "too vague"
    assert logs("--feedback", "up") == []
    assert len(logs("--tenant", "default")) == 3 and logs("--tenant", "globex") == []
    assert len(logs("--tenant", "default", "--user", "local")) == 3
    assert logs("--tenant", "default", "--user", "someone-else") == []
    assert [r["event"] for r in logs("--turn-id", down["turn_id"])] == ["turn", "feedback"]
    assert [r["question"] for r in logs("--event", "turn", "--last", "1")] == ["Tell me a joke"]
    table = runner.invoke(ragctl_app, ["logs", "--path", str(log_path), "--feedback", "down"], env={"COLUMNS": "300"})
    assert table.exit_code == 0 and "too vague" in table.output
    assert runner.invoke(ragctl_app, ["logs", "--path", str(log_path.parent / "nothing.jsonl")]).exit_code == 1
    assert runner.invoke(ragctl_app, ["logs", "--path", str(log_path), "--feedback", "meh"]).exit_code == 2


def test_record_filter_matches_degraded_and_since() -> None:
    rows = [
        {"@timestamp": "2025-01-02T10:00:00.000Z", "degraded_count": 0},
        {"@timestamp": "2025-01-02T11:00:00.000Z", "degraded_count": 2},
    ]
    assert select(rows, RecordFilter(degraded=True)) == rows[1:]
    assert select(rows, RecordFilter(degraded=False)) == rows[:1]
    assert select(rows, RecordFilter(since="2025-01-02T10:30")) == rows[1:]
    assert set(STAGES) >= {"refine", "retrieve", "rerank", "generate", "total"}


def test_opensearch_down_costs_no_turn_and_is_counted(redis_url: str, fake_services, closed_port: int) -> None:
    url, _ = fake_services
    settings = gateway_settings(
        redis_url, url, query_log_sink="opensearch", query_log_opensearch_url=f"http://127.0.0.1:{closed_port}",
        query_log_opensearch_timeout_s=2.0,
    )
    with TestClient(create_app(settings)) as client:
        before = _metric(client.get("/metrics").text, "rag_gateway_query_log_dropped_total", reason="sink_failed")
        started = time.perf_counter()
        for _ in range(2):
            assert client.post("/v1/chat", json={"message": "What is Acme?"}).status_code == 200
        assert time.perf_counter() - started < 5  # the turns did not wait on the cluster
        client.portal.call(client.app.state.runtime.query_log.flush)
        after = _metric(client.get("/metrics").text, "rag_gateway_query_log_dropped_total", reason="sink_failed")
    assert after - before == 2
