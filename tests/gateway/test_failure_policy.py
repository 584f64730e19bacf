"""The failure policy of docs/ARCHITECTURE.md, one row at a time, over real HTTP and real Redis.

A stage is "down" when its URL is a closed port (connection refused, as after a crash), "slow" when
it accepts connections and never answers; the fakes (``fake_services``) play a stage that is
restarting or refusing. What each row promises: the request still answers (and says what stood in,
under ``degraded``) or fails naming the stage, and a failed request writes nothing.
"""

from __future__ import annotations

from fastapi.testclient import TestClient
from redis import Redis

from rag_gateway.app import create_app
from rag_gateway.conversation_store import KEY_PREFIX

from .support import gateway_settings


def _conversation_keys(redis_url: str) -> set[bytes]:
    return set(Redis.from_url(redis_url).scan_iter(f"{KEY_PREFIX}*"))


def test_without_the_refiner_a_follow_up_is_searched_with_the_previous_question_appended(
    redis_url, fake_services, closed_port
) -> None:
    url, calls = fake_services
    calls.clear()
    with TestClient(create_app(gateway_settings(redis_url, url))) as client:
        first = client.post("/v1/chat", json={"message": "What is Acme?"}).json()
    calls.clear()
    settings = gateway_settings(redis_url, url, refiner_url=f"http://127.0.0.1:{closed_port}")
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/chat", json={"conversation_id": first["conversation_id"], "message": "Who founded it?"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["refined_query"] == "Who founded it? (What is Acme?)" and body["intent"] == "rag"
        assert [entry.split(":")[0] for entry in body["degraded"]] == ["refiner unavailable"]
        assert "searched with the message and the previous question" in body["degraded"][0]
        assert [payload["query"] for name, payload in calls if name == "search"] == ["Who founded it? (What is Acme?)"]
        turns = client.get(f"/v1/conversations/{first['conversation_id']}").json()["turns"]
        assert [t["refined_query"] for t in turns] == ["What is Acme?", "Who founded it? (What is Acme?)"]


def test_a_hung_refiner_is_bypassed_after_its_timeout(redis_url, fake_services, black_hole_port) -> None:
    url, _ = fake_services
    settings = gateway_settings(redis_url, url, refiner_url=f"http://127.0.0.1:{black_hole_port}", refiner_timeout_s=1.0)
    with TestClient(create_app(settings)) as client:
        body = client.post("/v1/chat", json={"message": "What is Acme?"}).json()
    assert body["refined_query"] == "What is Acme?" and body["degraded"][0].startswith("refiner timeout")


def test_a_retriever_restarting_is_retried_and_the_answer_is_not_degraded(redis_url, fake_services) -> None:
    url, calls = fake_services
    calls.clear()
    with TestClient(create_app(gateway_settings(redis_url, url))) as client:
        response = client.post("/v1/chat", json={"message": "What does the flaky index hold?"})
    assert response.status_code == 200, response.text
    assert response.json()["degraded"] == []
    assert [name for name, _ in calls].count("search") == 2


def test_retries_are_bounded_and_a_retriever_that_stays_down_is_a_503_naming_it(redis_url, fake_services) -> None:
    url, calls = fake_services
    calls.clear()
    keys_before = _conversation_keys(redis_url)
    settings = gateway_settings(redis_url, url, retry_attempts=3, retry_max_wait_s=0.05)
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/chat", json={"message": "Is the search down?"})
    assert response.status_code == 503, response.text
    assert response.json()["stage"] == "retriever" and "index is opening" in response.json()["error"]
    assert [name for name, _ in calls].count("search") == 3
    assert _conversation_keys(redis_url) == keys_before


def test_an_unreachable_retriever_is_a_503_naming_it_and_nothing_is_written(redis_url, fake_services, closed_port) -> None:
    url, calls = fake_services
    calls.clear()
    keys_before = _conversation_keys(redis_url)
    settings = gateway_settings(redis_url, url, retriever_url=f"http://127.0.0.1:{closed_port}", retry_max_wait_s=0.05)
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/chat", json={"message": "What is Acme?"})
    assert response.status_code == 503 and response.json()["stage"] == "retriever", response.text
    assert "cannot reach" in response.json()["error"]
    assert "generate" not in [name for name, _ in calls]
    assert _conversation_keys(redis_url) == keys_before


def test_without_the_generator_the_answer_quotes_the_top_passage_with_a_checkable_citation(
    redis_url, fake_services, closed_port
) -> None:
    url, calls = fake_services
    calls.clear()
    settings = gateway_settings(redis_url, url, generator_url=f"http://127.0.0.1:{closed_port}")
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/chat", json={"message": "What is Acme?"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert not body["abstained"] and body["answer_mode"] == "extractive"
        assert body["degraded"][0].startswith("generator unavailable: cannot reach")
        # The fake reranker reverses the retriever's order: its top passage is the last candidate.
        [reranked] = [payload for name, payload in calls if name == "rerank"]
        top = reranked["passages"][-1]
        [citation] = body["citations"]
        assert citation["chunk_id"] == top["chunk_id"]
        assert top["text"][citation["start"] : citation["end"]] == citation["quote"]
        assert body["answer"] == f"{citation['quote']} [1]"
        ready = client.get("/readyz")
        assert ready.status_code == 503 and ready.json()["checks"]["generator"] != "ok"
        turns = client.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"]
        assert [t["answer"] for t in turns] == [body["answer"]]


def test_generation_is_never_retried(redis_url, fake_services) -> None:
    """A 502 from the generator is retried for no idempotent call: one generate call, and the stand-in."""
    url, calls = fake_services
    calls.clear()
    with TestClient(create_app(gateway_settings(redis_url, url))) as client:
        response = client.post("/v1/chat", json={"message": "What is a bad gateway?"})
    assert response.status_code == 200, response.text
    assert [name for name, _ in calls].count("generate") == 1
    assert response.json()["degraded"][0].startswith("generator unavailable: HTTP 502")
