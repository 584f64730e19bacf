"""POST /v1/chat/stream: SSE over the real generator stream contract (fakes over HTTP) and real Redis."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi.testclient import TestClient
from httpx_sse import aconnect_sse
from redis import Redis

from rag_gateway.app import create_app
from rag_gateway.chat_state import ChatResult
from rag_gateway.conversation_store import KEY_PREFIX
from ragctl.in_process import serve_in_thread

from .support import gateway_settings, sse_events


def _turns(client: TestClient, cid: str) -> list[dict]:
    response = client.get(f"/v1/conversations/{cid}")
    return response.json()["turns"] if response.status_code == 200 else []


def test_events_come_in_order_and_the_turn_is_saved(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    events = sse_events(client, "/v1/chat/stream", {"message": "What is Acme?"})
    names = [name for name, _ in events]
    assert names[0] == "meta" and names[-1] == "final"
    assert set(names[1:-1]) == {"token"} and len(names) > 3
    meta, final = events[0][1], events[-1][1]
    cid = meta["conversation_id"]
    assert meta == {"conversation_id": cid, "refined_query": "What is Acme?", "intent": "rag", "language": "en"}
    assert "".join(data["text"] for name, data in events if name == "token") == final["answer"]
    assert final["conversation_id"] == cid and final["intent"] == "rag"
    assert final["answer"] == "answer to What is Acme? [1]" and final["citations"][0]["chunk_id"]
    assert {"refine", "retrieve", "rerank", "generate", "first_token", "save", "total"} <= set(final["timings_ms"])
    # The stream endpoint of the generator, not the one-shot one.
    assert [name for name, _ in calls] == ["refine", "search", "rerank", "generate_stream"]
    turns = _turns(client, cid)
    assert [(t["message"], t["answer"], t["intent"]) for t in turns] == [("What is Acme?", final["answer"], "rag")]

    # A follow-up on the same conversation carries the history and appends one turn.
    calls.clear()
    events = sse_events(client, "/v1/chat/stream", {"conversation_id": cid, "message": "Who founded it?"})
    assert events[0][1]["refined_query"] == "Who founded it? (What is Acme?)"
    assert [name for name, _ in calls][:2] == ["readable", "refine"]  # the history as the caller may read it
    assert calls[1][1]["history"] == [{"question": "What is Acme?", "answer": final["answer"]}]
    assert len(_turns(client, cid)) == 2


def test_the_final_event_is_authoritative_when_verification_changed_the_answer(client: TestClient) -> None:
    events = sse_events(client, "/v1/chat/stream", {"message": "please revise this"})
    streamed = "".join(data["text"] for name, data in events if name == "token")
    final = events[-1][1]
    assert streamed == "a draft answer that cites [7]"
    assert final["answer"] == "the verified answer [1]" and final["citation_precision"] == 0.5
    assert _turns(client, final["conversation_id"])[0]["answer"] == "the verified answer [1]"


def test_non_rag_intent_streams_the_reply_as_one_token(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    events = sse_events(client, "/v1/chat/stream", {"message": "hello"})
    assert [name for name, _ in events] == ["meta", "token", "final"]
    assert events[0][1]["intent"] == "chitchat"
    assert events[1][1]["text"] == events[2][1]["answer"]
    assert [name for name, _ in calls] == ["refine"]
    assert _turns(client, events[0][1]["conversation_id"])[0]["intent"] == "chitchat"


def test_generator_error_mid_stream_is_an_error_event_and_nothing_is_saved(client: TestClient, redis_url: str) -> None:
    """Tokens already sent cannot be taken back: a generator failing after them fails the request
    (the stand-in answer is only for a generator that failed before its first token)."""
    message = "fail mid-stream please"
    first = client.post("/v1/chat", json={"message": "What is Acme?"}).json()
    cid = first["conversation_id"]
    redis = Redis.from_url(redis_url)
    keys_before = set(redis.scan_iter(f"{KEY_PREFIX}*"))

    # An existing conversation keeps exactly its one turn...
    events = sse_events(client, "/v1/chat/stream", {"conversation_id": cid, "message": message})
    name, error = events[-1]
    assert name == "error"
    assert error["status"] == 503 and error["stage"] == "generator"
    assert "LLM unavailable" in error["error"]
    assert [n for n, _ in events] == ["meta", "token", "token", "error"]
    assert len(_turns(client, cid)) == 1

    # ...and a new conversation is never created.
    events = sse_events(client, "/v1/chat/stream", {"message": message})
    assert events[-1][0] == "error"
    assert set(redis.scan_iter(f"{KEY_PREFIX}*")) == keys_before


def test_a_stream_that_ends_without_final_is_an_error(client: TestClient) -> None:
    events = sse_events(client, "/v1/chat/stream", {"message": "no final here"})
    name, error = events[-1]
    assert name == "error" and error["status"] == 503 and "without a final event" in error["error"]
    assert _turns(client, events[0][1]["conversation_id"]) == []


def test_a_failure_after_the_graph_ran_is_an_error_event_not_a_cut_stream(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 12, defect 5: the final event was built outside the stream's error handling, so a
    # failure there ended the response mid-stream with neither `final` nor `error`.
    def broken_response(result, timings_ms):
        raise KeyError("timings_ms")

    monkeypatch.setattr(ChatResult, "to_response", broken_response)
    events = sse_events(client, "/v1/chat/stream", {"message": "What is the capital?"})
    assert [name for name, _ in events][0] == "meta" and "token" in [name for name, _ in events]
    name, error = events[-1]
    assert name == "error" and error["status"] == 500 and "KeyError" in error["error"]


def test_a_cancellation_from_inside_the_graph_is_an_error_event(client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    class GraphCancelledMidAnswer:
        async def astream(self, state_in, stream_mode):
            yield "custom", {"token": "The capital"}
            raise asyncio.CancelledError  # a node's task cancelled; the client is still listening

    monkeypatch.setattr(client.app.state.runtime.chat, "_graph", GraphCancelledMidAnswer())
    events = sse_events(client, "/v1/chat/stream", {"message": "What is the capital?"})
    assert events[0] == ("token", {"text": "The capital"})
    name, error = events[-1]
    assert name == "error" and "cancelled" in error["error"]


@pytest.mark.parametrize("generator", ["down", "timed out before its first token"])
def test_a_generator_failing_before_its_first_token_streams_the_stand_in_answer(
    redis_url, fake_services, closed_port, generator
) -> None:
    url, _ = fake_services
    message = "What is Acme?" if generator == "down" else "What is Acme, llm timeout?"
    generator_url = f"http://127.0.0.1:{closed_port}" if generator == "down" else url
    settings = gateway_settings(redis_url, url, generator_url=generator_url)
    with TestClient(create_app(settings)) as client:
        events = sse_events(client, "/v1/chat/stream", {"message": message})
        assert [n for n, _ in events] == ["meta", "token", "final"]
        final = events[-1][1]
        assert events[1][1]["text"] == final["answer"] and final["answer_mode"] == "extractive"
        assert len(final["degraded"]) == 1
        assert final["degraded"][0].startswith("generator unavailable" if generator == "down" else "generator timeout")
        assert [t["answer"] for t in _turns(client, final["conversation_id"])] == [final["answer"]]


def test_a_stream_goes_on_without_the_refiner(redis_url, fake_services, closed_port) -> None:
    url, _ = fake_services
    settings = gateway_settings(redis_url, url, refiner_url=f"http://127.0.0.1:{closed_port}")
    with TestClient(create_app(settings)) as client:
        events = sse_events(client, "/v1/chat/stream", {"message": "What is Acme?"})
        assert [n for n, _ in events][0] == "meta" and events[-1][0] == "final"
        assert events[-1][1]["degraded"][0].startswith("refiner unavailable")


@pytest.mark.parametrize(
    "payload, fragment",
    [({"message": "   "}, "blank"), ({"message": "hi", "top_k": 0}, "top_k"), ({}, "message")],
)
def test_bad_input_is_a_plain_422_before_the_stream(client: TestClient, payload: dict, fragment: str) -> None:
    response = client.post("/v1/chat/stream", json=payload)
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("application/json")
    assert fragment in response.json()["error"]


def test_unknown_conversation_is_a_plain_404(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    response = client.post("/v1/chat/stream", json={"conversation_id": "nope", "message": "hello"})
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")
    assert "nope" in response.json()["error"]
    assert calls == []


async def test_client_disconnect_mid_stream_saves_nothing(redis_url, fake_services) -> None:
    url, _ = fake_services
    redis = Redis.from_url(redis_url)
    with serve_in_thread(create_app(gateway_settings(redis_url, url))) as gateway:
        keys_before = set(redis.scan_iter(f"{KEY_PREFIX}*"))
        async with httpx.AsyncClient(base_url=gateway, timeout=30) as http:
            async with aconnect_sse(http, "POST", "/v1/chat/stream", json={"message": "a slow stream"}) as source:
                async for sse in source.aiter_sse():
                    if sse.event == "token":
                        break  # hang up after the first token
        await asyncio.sleep(2.0)  # longer than the rest of the generation would take
        assert set(redis.scan_iter(f"{KEY_PREFIX}*")) == keys_before
