"""The whole request path with real processes: Redis, llama.cpp + SmolLM2, five services."""

from __future__ import annotations

import httpx
import pytest

from .corpus import DOCUMENTS, RETRIEVER_HEADERS, chunk_ids_of as _chunk_ids_of

pytestmark = pytest.mark.e2e

MARKDOWN = b"""# Office handbook

## Parking
Visitors park in the north lot. Staff permits are issued by the front desk.

## Coffee
The espresso machine on floor three is cleaned every Friday.
"""


def test_question_and_follow_up_through_the_real_stack(running_stack) -> None:
    gateway = running_stack.gateway
    with httpx.Client(base_url=gateway, timeout=600) as client:
        ingested = client.post("/v1/documents", json={"documents": DOCUMENTS})
        assert ingested.status_code == 200, ingested.text
        assert ingested.json()["documents"] == len(DOCUMENTS) and not ingested.json()["failed"]
        uploaded = client.post(
            "/v1/documents",
            files=[("files", ("handbook.md", MARKDOWN, "text/markdown")), ("files", ("logo.png", b"\x89PNG", "image/png"))],
        )
        assert uploaded.status_code == 200, uploaded.text
        assert uploaded.json()["documents"] == 1
        assert [f["name"] for f in uploaded.json()["failed"]] == ["logo.png"]

        listed = {d["doc_id"] for d in client.get("/v1/documents").json()["documents"]}
        assert listed >= {"zorblax", "quillfeather", "basil", "tides", "handbook.md"}

        first = client.post("/v1/chat", json={"message": "Where is Zorblax Aerospace headquartered?"})
        assert first.status_code == 200, first.text
        first_body = first.json()
        cid = first_body["conversation_id"]
        assert first_body["refined_query"] == "Where is Zorblax Aerospace headquartered?"

        follow_up = client.post("/v1/chat", json={"conversation_id": cid, "message": "When was it founded?"})
        assert follow_up.status_code == 200, follow_up.text
        follow_body = follow_up.json()
        # The follow-up only makes sense with the first turn: the refined query must carry it.
        assert "zorblax" in follow_body["refined_query"].lower()
        assert set(follow_body["timings_ms"]) >= {"refine", "retrieve", "rerank", "generate", "total"}

        retriever = running_stack.urls["retriever"]
        cited = first_body["citations"] + follow_body["citations"]
        for citation in cited:
            doc_id = citation["chunk_id"].split(":")[0]
            assert citation["chunk_id"] in _chunk_ids_of(retriever, doc_id)
        for body in (first_body, follow_body):
            assert body["abstained"] == (not body["citations"])

        stored = client.get(f"/v1/conversations/{cid}").json()["turns"]
        assert [t["message"] for t in stored] == ["Where is Zorblax Aerospace headquartered?", "When was it founded?"]
        assert stored[1]["refined_query"] == follow_body["refined_query"]


def test_follow_up_retrieval_finds_the_document_of_the_first_turn(running_stack) -> None:
    """Retrieval on the refined follow-up ranks the Zorblax document first (it names no entity itself)."""
    gateway = running_stack.gateway
    with httpx.Client(base_url=gateway, timeout=600) as client:
        client.post("/v1/documents", json={"documents": DOCUMENTS}).raise_for_status()
        first = client.post("/v1/chat", json={"message": "Who founded Zorblax Aerospace?"})
        assert first.status_code == 200, first.text
        cid = first.json()["conversation_id"]
        follow = client.post("/v1/chat", json={"conversation_id": cid, "message": "What is its best-known rocket?"})
        assert follow.status_code == 200, follow.text
        refined = follow.json()["refined_query"]
    hits = httpx.post(
        f"{running_stack.urls['retriever']}/v1/search",
        json={"query": refined, "top_k": 3},
        timeout=30,
        headers=RETRIEVER_HEADERS,
    ).json()["passages"]
    assert hits[0]["doc_id"] == "zorblax"


def test_every_service_reports_health_readiness_and_metrics(running_stack) -> None:
    for name, url in running_stack.urls.items():
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200, name
        ready = httpx.get(f"{url}/readyz", timeout=10)
        assert ready.status_code == 200, (name, ready.text)
        metrics = httpx.get(f"{url}/metrics", timeout=5)
        assert metrics.status_code == 200 and "# TYPE" in metrics.text, name


def test_reingesting_unchanged_documents_changes_nothing(running_stack) -> None:
    with httpx.Client(base_url=running_stack.gateway, timeout=600) as client:
        client.post("/v1/documents", json={"documents": DOCUMENTS}).raise_for_status()
        again = client.post("/v1/documents", json={"documents": DOCUMENTS}).json()
        assert again["skipped"] == len(DOCUMENTS)
