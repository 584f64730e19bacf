"""The answer span and the sources' conflict (issue 32, items 2-3) reach everyone who looks: the chat
response, the stream's final event, the stored turn (``GET /v1/conversations/{id}``), the
OpenAI-compatible reply, and the query log; and they are withheld with the answer when the cited
document is no longer readable. The fake generator disagrees for "Who acquired WhatsApp?"
(tests/gateway/fake_services.py); the conversation store is a real Redis."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient

from rag_common.messages import message

from .fake_services import DISAGREEING_QUOTES, UNREADABLE_DOCUMENTS
from .support import sse_events
# The gateway with its query log in a file of the test's own, and what it wrote.
from .test_query_log import log_path, logged, records  # noqa: F401 - fixtures

QUESTION = "Who acquired WhatsApp?"
SPAN = {"citation": 1, "start": 25, "end": 33, "text": "Facebook", "kind": "organisation"}
CONFLICT = {
    "kind": "organisation",
    "values": [{"value": "Facebook", "citations": [1]}, {"value": "Apple", "citations": [2]}],
}
NO_EVIDENCE = {"has_answer_span": False, "conflict": False, "conflict_kind": None, "conflict_values": 0}
DISAGREED = {"has_answer_span": True, "conflict": True, "conflict_kind": "organisation", "conflict_values": 2}


def _evidence(record: dict[str, Any]) -> dict[str, Any]:
    return {key: record[key] for key in NO_EVIDENCE}


def test_the_span_and_the_conflict_reach_the_response_the_stored_turn_and_the_log(logged: TestClient, log_path: Path) -> None:
    response = logged.post("/v1/chat", json={"message": QUESTION})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["answer"] == "The sources disagree: Facebook [1]; Apple [2]."
    assert body["answer_span"] == SPAN and body["conflict"] == CONFLICT
    # The span is inside the quote of the citation it names.
    [cited] = [c for c in body["citations"] if c["id"] == SPAN["citation"]]
    assert cited["quote"] == DISAGREEING_QUOTES[0] and cited["quote"][SPAN["start"] : SPAN["end"]] == SPAN["text"]

    [turn] = logged.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"]
    assert turn["answer_span"] == SPAN and turn["conflict"] == CONFLICT and turn["citations"] == body["citations"]

    feedback = logged.post(f"/v1/conversations/{body['conversation_id']}/turns/0/feedback", json={"rating": "down"})
    assert feedback.status_code == 200, feedback.text
    turned, rated = records(logged, log_path)
    assert (turned["event"], rated["event"]) == ("turn", "feedback")
    # The feedback record reads on its own: a thumbs-down on a conflict says so.
    assert _evidence(turned) == _evidence(rated) == DISAGREED


def test_an_answer_without_either_says_so_everywhere(logged: TestClient, log_path: Path) -> None:
    body = logged.post("/v1/chat", json={"message": "What is Acme?"}).json()
    assert body["answer_span"] is None and body["conflict"] is None
    [turn] = logged.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"]
    assert turn["answer_span"] is None and turn["conflict"] is None
    [record] = records(logged, log_path)
    assert _evidence(record) == NO_EVIDENCE


def test_the_streams_final_event_carries_them_and_the_turn_is_stored_with_them(logged: TestClient, log_path: Path) -> None:
    events = sse_events(logged, "/v1/chat/stream", {"message": QUESTION})
    tokens = "".join(data["text"] for name, data in events if name == "token")
    name, final = events[-1]
    assert name == "final" and final["answer"] == tokens
    assert final["answer_span"] == SPAN and final["conflict"] == CONFLICT
    [turn] = logged.get(f"/v1/conversations/{final['conversation_id']}").json()["turns"]
    assert turn["answer_span"] == SPAN and turn["conflict"] == CONFLICT
    [record] = records(logged, log_path)
    assert record["endpoint"] == "chat_stream" and _evidence(record) == DISAGREED


def _completion_chunks(client: TestClient, question: str) -> list[dict[str, Any]]:
    body = {"model": "rag", "stream": True, "messages": [{"role": "user", "content": question}]}
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200, response.text
    data = [line.removeprefix("data: ") for line in response.text.splitlines() if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    return [json.loads(item) for item in data[:-1]]


def test_the_openai_compatible_reply_carries_the_conflict_only_when_there_is_one(logged: TestClient) -> None:
    def completion(question: str) -> dict[str, Any]:
        response = logged.post("/v1/chat/completions", json={"model": "rag", "messages": [{"role": "user", "content": question}]})
        assert response.status_code == 200, response.text
        return response.json()

    disagreeing = completion(QUESTION)
    assert disagreeing["conflict"] == CONFLICT
    assert disagreeing["choices"][0]["message"]["content"].startswith("The sources disagree: Facebook [1]; Apple [2].")
    assert "conflict" not in completion("What is Acme?")

    *_, last = _completion_chunks(logged, QUESTION)
    assert last["choices"][0]["finish_reason"] == "stop" and last["conflict"] == CONFLICT
    *_, last = _completion_chunks(logged, "What is Acme?")
    assert last["choices"][0]["finish_reason"] == "stop" and "conflict" not in last


def test_they_are_withheld_with_the_answer_when_a_cited_document_is_no_longer_readable(logged: TestClient) -> None:
    body = logged.post("/v1/chat", json={"message": QUESTION}).json()
    cid = body["conversation_id"]
    apple = body["citations"][1]
    doc_id = logged.get(f"/v1/conversations/{cid}/sources/{quote(apple['chunk_id'], safe='')}").json()["doc_id"]
    UNREADABLE_DOCUMENTS.add(doc_id)
    try:
        shown = logged.get(f"/v1/conversations/{cid}")
        [turn] = shown.json()["turns"]
        assert turn["answer"] == message("withheld_answer", "en") and turn["citations"] == []
        assert turn["answer_span"] is None and turn["conflict"] is None
        assert "Apple" not in shown.text and "Facebook" not in shown.text
    finally:
        UNREADABLE_DOCUMENTS.discard(doc_id)
    [turn] = logged.get(f"/v1/conversations/{cid}").json()["turns"]
    assert turn["conflict"] == CONFLICT
