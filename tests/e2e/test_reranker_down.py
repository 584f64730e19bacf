"""A dead reranker costs ranking quality, never the answer: the gateway keeps the retriever's order.

The ``reranker_stopped`` fixture (module scope) stops the real reranker process for this module and
starts it again afterwards, so no other test sees it down whatever the order the tests run in.
"""

from __future__ import annotations

import httpx
import pytest

from .corpus import ZORBLAX_QUESTION, assert_citations_are_ingested_chunks, ingest_documents

pytestmark = pytest.mark.e2e


def test_chat_degrades_to_retriever_order_when_the_reranker_is_down(running_stack, reranker_stopped) -> None:
    ingest_documents(running_stack.gateway)
    assert not reranker_stopped.alive()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{reranker_stopped.url}/healthz", timeout=5)

    with httpx.Client(base_url=running_stack.gateway, timeout=600) as client:
        # The gateway itself notices: readiness names the reranker as the problem.
        ready = client.get("/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json()["checks"]["reranker"].startswith("unreachable"), ready.text

        response = client.post("/v1/chat", json={"message": ZORBLAX_QUESTION})
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["intent"] == "rag"
        assert body["degraded"] and all(entry.startswith("reranker") for entry in body["degraded"]), body["degraded"]
        assert "rerank" in body["timings_ms"] and "generate" in body["timings_ms"]
        assert body["answer"].strip()
        assert body["abstained"] == (not body["citations"])
        assert_citations_are_ingested_chunks(running_stack.urls["retriever"], body["citations"])

        turns = client.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"]
    assert [t["message"] for t in turns] == [ZORBLAX_QUESTION]
    assert turns[0]["answer"] == body["answer"]
    assert [c["chunk_id"] for c in turns[0]["citations"]] == [c["chunk_id"] for c in body["citations"]]
