"""``POST /v1/chat/stream`` through the real stack: meta → token… → final, and the turn is stored."""

from __future__ import annotations

import json

import httpx
import pytest
from httpx_sse import connect_sse

from rag_gateway.chat_models import ChatResponse

from .corpus import ZORBLAX_QUESTION, assert_citations_are_ingested_chunks, ingest_documents

pytestmark = pytest.mark.e2e


def _events(client: httpx.Client, payload: dict) -> list[tuple[str, dict]]:
    events: list[tuple[str, dict]] = []
    with connect_sse(client, "POST", "/v1/chat/stream", json=payload) as source:
        assert source.response.status_code == 200, source.response.read()
        assert source.response.headers["content-type"].startswith("text/event-stream")
        for sse in source.iter_sse():
            events.append((sse.event, json.loads(sse.data)))
    return events


def test_streamed_answer_arrives_in_order_and_is_stored(running_stack) -> None:
    ingest_documents(running_stack.gateway)
    with httpx.Client(base_url=running_stack.gateway, timeout=600) as client:
        events = _events(client, {"message": ZORBLAX_QUESTION})
        names = [name for name, _ in events]
        errors = [data for name, data in events if name == "error"]
        if errors:
            pytest.fail(f"the stream ended with an error event (the LLM failed?): {errors[0]}")

        assert names[0] == "meta", names
        assert names[-1] == "final", names
        assert names.count("final") == 1 and names.count("meta") == 1
        tokens = names[1:-1]
        assert tokens and set(tokens) == {"token"}, names
        streamed = "".join(data["text"] for name, data in events if name == "token")
        assert streamed.strip()
        # Nothing streamed is taken back: the tokens are exactly the final answer.
        assert streamed == events[-1][1]["answer"]

        meta = events[0][1]
        final = ChatResponse.model_validate(events[-1][1])
        cid = final.conversation_id
        assert cid and meta["conversation_id"] == cid
        assert meta["intent"] == final.intent == "rag"
        assert meta["refined_query"] == final.refined_query == ZORBLAX_QUESTION
        assert final.answer.strip()
        assert final.abstained == (not final.citations)
        assert_citations_are_ingested_chunks(
            running_stack.urls["retriever"], [c.model_dump() for c in final.citations]
        )

        stored = client.get(f"/v1/conversations/{cid}")
        assert stored.status_code == 200, stored.text
        [turn] = stored.json()["turns"]
        assert turn["message"] == ZORBLAX_QUESTION
        assert turn["answer"] == final.answer
        assert [c["chunk_id"] for c in turn["citations"]] == [c.chunk_id for c in final.citations]

        # A streamed follow-up goes into the same conversation.
        more = _events(client, {"message": "Hello!", "conversation_id": cid})
        assert [name for name, _ in more][0] == "meta" and more[-1][0] == "final", more
        assert more[0][1]["intent"] == "chitchat"
        assert "".join(d["text"] for n, d in more if n == "token") == more[-1][1]["answer"]
        turns = client.get(f"/v1/conversations/{cid}").json()["turns"]
        assert [t["message"] for t in turns] == [ZORBLAX_QUESTION, "Hello!"]


def test_streaming_into_an_unknown_conversation_is_a_plain_404(running_stack) -> None:
    with httpx.Client(base_url=running_stack.gateway, timeout=60) as client:
        response = client.post("/v1/chat/stream", json={"message": "Hello!", "conversation_id": "no-such-conversation"})
    assert response.status_code == 404, response.text
    assert "no-such-conversation" in response.json()["error"]
