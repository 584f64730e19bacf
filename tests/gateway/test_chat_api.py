from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from redis import Redis

from rag_gateway.app import create_app
from rag_gateway.conversation_store import KEY_PREFIX

from .support import gateway_settings as _settings


def test_two_turns_flow_through_every_stage_and_are_stored(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    first = client.post("/v1/chat", json={"message": "What is Acme?"})
    assert first.status_code == 200, first.text
    body = first.json()
    cid = body["conversation_id"]
    assert body["refined_query"] == "What is Acme?"
    assert set(body["timings_ms"]) >= {"history", "refine", "retrieve", "rerank", "generate", "save", "total"}
    assert [name for name, _ in calls] == ["refine", "search", "rerank", "generate"]
    assert calls[1][1]["top_k"] == 8  # candidates for the reranker, not the final top_k
    assert len(calls[2][1]["passages"]) == 8 and calls[2][1]["top_k"] == 3
    assert len(calls[3][1]["passages"]) == 3
    # Stored vectors travel retriever → reranker, and (the gateway's own copies, in the reranked order) on to the generator.
    assert calls[1][1]["include_embeddings"] is True
    assert calls[2][1]["query_embedding"] == [1.0, 0.0]
    assert all(p["embedding"] is not None for p in calls[2][1]["passages"])
    assert all(p["embedding"] is not None for p in calls[3][1]["passages"])
    assert calls[3][1]["query_embedding"] == [1.0, 0.0]
    # Sentence vectors go retriever → generator, around the reranker (which has no use for them).
    assert calls[1][1]["include_sentence_vectors"] is True
    assert all(p["sentence_vectors"] is None for p in calls[2][1]["passages"])
    assert all(p["sentence_vectors"]["context"] == f"{p['title']}: " for p in calls[3][1]["passages"])
    assert body["degraded"] == []

    calls.clear()
    second = client.post("/v1/chat", json={"conversation_id": cid, "message": "When was it founded?", "top_k": 2})
    assert second.status_code == 200, second.text
    # The history is shown to the models only as the caller may read it now: asked of the retriever.
    assert [name for name, _ in calls] == ["readable", "refine", "search", "rerank", "generate"]
    sources = [client.get(f"/v1/conversations/{cid}/sources/{c['chunk_id']}").json() for c in body["citations"]]
    assert calls[0][1] == {"doc_ids": sorted({source["doc_id"] for source in sources})}
    refine_body = calls[1][1]
    assert refine_body["history"] == [{"question": "What is Acme?", "answer": body["answer"]}]
    assert second.json()["refined_query"] == "When was it founded? (What is Acme?)"
    assert len(calls[4][1]["passages"]) == 2

    stored = client.get(f"/v1/conversations/{cid}").json()
    assert [t["message"] for t in stored["turns"]] == ["What is Acme?", "When was it founded?"]
    assert stored["turns"][1]["citations"][0]["chunk_id"] == second.json()["citations"][0]["chunk_id"]

    assert client.delete(f"/v1/conversations/{cid}").status_code == 204
    assert client.get(f"/v1/conversations/{cid}").status_code == 404


@pytest.mark.parametrize(
    "payload, fragment",
    [
        ({"message": ""}, "message"),
        ({"message": "   "}, "blank"),
        ({"message": "x" * 8001}, "message"),
        ({"message": "hi", "top_k": 0}, "top_k"),
        ({"message": "hi", "unexpected": 1}, "unexpected"),
        ({}, "message"),
    ],
)
def test_bad_chat_input_is_a_clear_422(client: TestClient, payload: dict, fragment: str) -> None:
    response = client.post("/v1/chat", json=payload)
    assert response.status_code == 422
    assert fragment in response.json()["error"]


def test_malformed_json_is_422(client: TestClient) -> None:
    response = client.post("/v1/chat", content=b"{not json", headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert "invalid request" in response.json()["error"]


def test_unknown_conversation_is_404(client: TestClient) -> None:
    response = client.post("/v1/chat", json={"conversation_id": "nope", "message": "hello"})
    assert response.status_code == 404
    assert "nope" in response.json()["error"]
    assert client.get("/v1/conversations/nope").status_code == 404
    assert client.delete("/v1/conversations/nope").status_code == 404


@pytest.mark.parametrize("reranker", ["hung", "down"])
def test_reranker_failure_keeps_the_retriever_order_and_marks_the_answer_degraded(
    redis_url, fake_services, black_hole_port, closed_port, reranker
) -> None:
    url, calls = fake_services
    port = black_hole_port if reranker == "hung" else closed_port
    settings = _settings(redis_url, url, reranker_url=f"http://127.0.0.1:{port}", reranker_timeout_s=1.0)
    calls.clear()
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/chat", json={"message": "What is Acme?"})
        assert response.status_code == 200, response.text
        body = response.json()
        assert len(body["degraded"]) == 1 and body["degraded"][0].startswith(
            "reranker timeout" if reranker == "hung" else "reranker unavailable"
        )
        # The generator got the retriever's top 3 in the retriever's order, with their stored vectors.
        generated = [p for name, payload in calls if name == "generate" for p in payload["passages"]]
        assert [p["chunk_id"] for p in generated] == ["doc0:0:abc", "doc1:0:abc", "doc2:0:abc"]
        assert all(p["embedding"] is not None for p in generated)
        # The turn is stored like any other.
        turns = client.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"]
        assert [t["message"] for t in turns] == ["What is Acme?"]


def test_a_failed_rerank_stage_is_reported_as_degraded(client: TestClient) -> None:
    response = client.post("/v1/chat", json={"message": "break a stage"})
    assert response.status_code == 200, response.text
    assert response.json()["degraded"] == ["reranker stage diffusion failed: ValueError: broken graph"]


def test_the_reranked_order_and_scores_reach_the_generator_on_the_gateways_own_passages(
    client: TestClient, fake_services
) -> None:
    _, calls = fake_services
    calls.clear()
    response = client.post("/v1/chat", json={"message": "What is Acme?"})
    assert response.status_code == 200, response.text
    [(_, search)] = [(n, p) for n, p in calls if n == "search"]
    [(_, generated)] = [(n, p) for n, p in calls if n == "generate"]
    # The fake reranker reverses the 8 candidates and keeps their scores; the reranker sent only ids
    # and scores, so text, vectors and sentence vectors are the gateway's own copies.
    assert [p["chunk_id"] for p in generated["passages"]] == ["doc7:0:abc", "doc6:0:abc", "doc5:0:abc"]
    assert [p["score"] for p in generated["passages"]] == pytest.approx([0.3, 0.4, 0.5])
    assert all(p["embedding"] is not None and p["sentence_vectors"] is not None for p in generated["passages"])
    assert search["top_k"] == 8 and response.json()["degraded"] == []


@pytest.mark.parametrize(
    ("message", "fault"),
    [
        ("rank a stranger", "the ranking names chunk 'never-sent', which was not sent"),
        ("rank one twice", "the ranking names chunk 'doc7:0:abc' twice"),
    ],
)
def test_a_ranking_naming_an_unsent_or_repeated_chunk_is_a_failed_rerank(
    client: TestClient, fake_services, caplog, message, fault
) -> None:
    _, calls = fake_services
    calls.clear()
    with caplog.at_level("WARNING", logger="rag_gateway.chat_graph"):
        response = client.post("/v1/chat", json={"message": message})
    assert response.status_code == 200, response.text
    assert response.json()["degraded"] == [f"reranker bad_response: {fault}; kept the retriever's order"]
    # As for a reranker that is down: the retriever's top 3 in its order, with their stored vectors.
    generated = [p for name, payload in calls if name == "generate" for p in payload["passages"]]
    assert [p["chunk_id"] for p in generated] == ["doc0:0:abc", "doc1:0:abc", "doc2:0:abc"]
    assert [p["score"] for p in generated] == pytest.approx([1.0, 0.9, 0.8])
    assert all(p["embedding"] is not None for p in generated)
    assert any("rerank bypassed" in r.getMessage() and fault in r.getMessage() for r in caplog.records)


def test_redis_down_is_503_conversation_store(fake_services, closed_port) -> None:
    url, _ = fake_services
    settings = _settings(f"redis://127.0.0.1:{closed_port}/0", url)
    with TestClient(create_app(settings)) as client:
        response = client.post("/v1/chat", json={"message": "What is Acme?"})
        assert response.status_code == 503
        assert response.json()["stage"] == "conversation_store"
        assert client.get("/readyz").json()["checks"]["redis"] != "ok"


def test_documents_endpoint_rejects_unknown_content_type(client: TestClient) -> None:
    response = client.post("/v1/documents", content=b"hello", headers={"content-type": "text/plain"})
    assert response.status_code == 415
    bad = client.post("/v1/documents", json={"documents": []})
    assert bad.status_code == 422


def test_metrics_exposes_stage_latency(client: TestClient) -> None:
    client.post("/v1/chat", json={"message": "What is Acme?"})
    metrics = client.get("/metrics").text
    assert 'rag_gateway_stage_seconds_count{stage="generate"}' in metrics
    assert "http_requests_total" in metrics or "http_request_duration" in metrics


def test_a_busy_generator_is_503_with_its_retry_after_and_nothing_is_written(client: TestClient, redis_url) -> None:
    """Issue 12: the generator's LLM queue is full (503 + Retry-After): the caller gets the same at
    once, with the stage named, and no turn is stored."""
    redis = Redis.from_url(redis_url)
    keys_before = set(redis.scan_iter(f"{KEY_PREFIX}*"))
    response = client.post("/v1/chat", json={"message": "Tell me, llm busy?"})
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "7"
    body = response.json()
    assert body["stage"] == "generator" and body["error"].startswith("generator busy: llm busy: expected wait 7s")
    assert set(redis.scan_iter(f"{KEY_PREFIX}*")) == keys_before
