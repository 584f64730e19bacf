"""Golden tests of the OpenSearch query-log sink, as tests/retriever/test_retriever_opensearch_requests.py
does for the retriever's backend: the real ``OpenSearchQueryLogSink`` and the real opensearch-py
client and bulk helper, with only the HTTP connection replaced by a recorder
(tests/retriever/opensearch_fake.py). Every request is spelled out literally.

Checked against the OpenSearch 2.x bulk API documentation (``index`` action, ``_index``/``_id`` in
the action line, NDJSON body); a run against a live cluster is not part of these tests.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from rag_common.identity import Identity
from rag_gateway.chat_models import Feedback, Turn
from rag_gateway.query_log import QueryLogWriter, feedback_record
from rag_gateway.query_log_opensearch import OpenSearchQueryLogSink, QueryLogWriteError, index_for
from rag_gateway.settings import GatewaySettings


def _load_fake():
    path = Path(__file__).resolve().parents[1] / "retriever" / "opensearch_fake.py"
    spec = importlib.util.spec_from_file_location("query_log_opensearch_fake", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their annotations through sys.modules
    spec.loader.exec_module(module)
    return module


FakeCluster = _load_fake().FakeCluster

#: The sink's index prefix and bulk size by default (``GatewaySettings``, the one source).
SETTINGS = GatewaySettings()
TURN = {
    "@timestamp": "2025-01-02T23:59:59.999Z",
    "event": "turn",
    "record_id": "a" * 32,
    "turn_id": "a" * 32,
    "conversation_id": "c0ffee",
    "turn_index": 0,
    "endpoint": "chat",
    "tenant": "acme",
    "user_hash": "0123456789abcdef",
    "trace_id": "0af7651916cd43dd8448eb211c80319c",
    "question": "What is Acme?",
    "refined_query": "What is Acme?",
    "intent": "rag",
                "language": None,
    "answer": "Acme makes anvils [1].",
    "answer_mode": "extractive",
    "abstained": False,
    "abstain_reason": None,
    "answerability": 0.91,
    "citation_count": 1,
    "citation_precision": None,
    "degraded": [],
    "degraded_count": 0,
    "stage_ms": {"refine": 12.5, "retrieve": 30.0, "total": 80.25},
    "feedback": None,
}
NEXT_DAY = {**TURN, "@timestamp": "2025-01-03T00:00:00.000Z", "record_id": "b" * 32, "turn_id": "b" * 32}


async def test_a_batch_is_one_bulk_request_into_each_records_day() -> None:
    cluster = FakeCluster()
    sink = OpenSearchQueryLogSink(cluster.client(), prefix=SETTINGS.query_log_index_prefix, chunk_size=SETTINGS.query_log_batch_size)
    await sink.write([TURN, NEXT_DAY])
    [call] = cluster.calls
    assert (call.method, call.path, call.params) == ("POST", "/_bulk", {})
    assert call.body == [
        {"index": {"_index": "rag-query-logs-2025.01.02", "_id": "a" * 32}},
        TURN,
        {"index": {"_index": "rag-query-logs-2025.01.03", "_id": "b" * 32}},
        NEXT_DAY,
    ]
    await sink.close()


async def test_the_prefix_is_a_setting_and_an_empty_batch_sends_nothing() -> None:
    cluster = FakeCluster()
    sink = OpenSearchQueryLogSink(cluster.client(), prefix="staging-query-logs", chunk_size=1)
    await sink.write([])
    assert cluster.calls == []
    await sink.write([TURN, NEXT_DAY])
    assert [call.body[0] for call in cluster.calls] == [  # chunk_size 1: one request per record
        {"index": {"_index": "staging-query-logs-2025.01.02", "_id": "a" * 32}},
        {"index": {"_index": "staging-query-logs-2025.01.03", "_id": "b" * 32}},
    ]
    assert index_for(TURN, SETTINGS.query_log_index_prefix) == "rag-query-logs-2025.01.02"


async def test_a_feedback_record_goes_in_as_sent() -> None:
    turn = Turn(message="When?", refined_query="When was Acme founded?", answer="In 1920 [1].", created_at=0.0, turn_id="c" * 32)
    feedback = Feedback(rating="down", comment="it was 1921", created_at=1735862400.0)  # 2025-01-03T00:00:00Z
    record = feedback_record(Identity(tenant="acme", user="ann"), "c0ffee", 3, turn, feedback, salt="pepper").as_json()
    cluster = FakeCluster()
    await OpenSearchQueryLogSink(
        cluster.client(), prefix=SETTINGS.query_log_index_prefix, chunk_size=SETTINGS.query_log_batch_size
    ).write([record])
    [call] = cluster.calls
    assert call.body == [
        {"index": {"_index": "rag-query-logs-2025.01.03", "_id": record["record_id"]}},
        {
            "@timestamp": "2025-01-03T00:00:00.000Z",
            "event": "feedback",
            "record_id": record["record_id"],
            "turn_id": "c" * 32,
            "conversation_id": "c0ffee",
            "turn_index": 3,
            "endpoint": "feedback",
            "tenant": "acme",
            "user_hash": record["user_hash"],
            "trace_id": None,
            "question": "When?",
            "refined_query": "When was Acme founded?",
            "intent": "rag",
                "language": None,
            "answer": "In 1920 [1].",
            "answer_mode": None,
            "abstained": False,
            "abstain_reason": None,
            "answerability": None,
            "citation_count": 0,
            "citation_precision": None,
            "has_answer_span": False,
            "conflict": False,
            "conflict_kind": None,
            "conflict_values": 0,
            "degraded": [],
            "degraded_count": 0,
            "stage_ms": {},
            "feedback": {"rating": "down", "comment": "it was 1921", "created_at": "2025-01-03T00:00:00.000Z"},
        },
    ]
    assert len(record["user_hash"]) == 16 and record["user_hash"] != "ann"


async def test_refused_items_raise_and_the_writer_counts_them_dropped() -> None:
    cluster = FakeCluster(bulk_errors={"b" * 32: (400, {"type": "mapper_parsing_exception", "reason": "bad"})})
    sink = OpenSearchQueryLogSink(cluster.client(), prefix=SETTINGS.query_log_index_prefix, chunk_size=SETTINGS.query_log_batch_size)
    with pytest.raises(QueryLogWriteError, match="1 of 2"):
        await sink.write([TURN, NEXT_DAY])
    writer = QueryLogWriter(sink, queue_size=10, batch_size=10, salt="")
    writer.start()
    writer.submit(TURN)
    writer.submit(NEXT_DAY)
    await writer.flush()
    assert writer.dropped == 1  # the refused record; the other one was written
    await writer.close()
