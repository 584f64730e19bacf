"""The refiner's intent decides the gateway's branch: only ``rag`` reaches retrieval and generation."""

from __future__ import annotations

import httpx
import pytest

from .corpus import ZORBLAX_QUESTION, assert_citations_are_ingested_chunks, ingest_documents

pytestmark = pytest.mark.e2e

RAG_STAGES = {"retrieve", "rerank", "generate"}


def _chat(client: httpx.Client, message: str, conversation_id: str | None = None) -> dict:
    payload = {"message": message} if conversation_id is None else {"message": message, "conversation_id": conversation_id}
    response = client.post("/v1/chat", json=payload)
    assert response.status_code == 200, response.text
    return response.json()


def test_greeting_document_question_and_meta_question_take_their_own_branches(running_stack) -> None:
    ingest_documents(running_stack.gateway)
    with httpx.Client(base_url=running_stack.gateway, timeout=600) as client:
        hello = _chat(client, "Hello!")
        cid = hello["conversation_id"]
        assert hello["intent"] == "chitchat"
        assert hello["citations"] == [] and hello["answer"].strip() and not hello["abstained"]
        assert not RAG_STAGES & set(hello["timings_ms"]), "a greeting must not reach retrieval or the LLM"

        question = _chat(client, ZORBLAX_QUESTION, cid)
        assert question["conversation_id"] == cid
        assert question["intent"] == "rag"
        assert RAG_STAGES <= set(question["timings_ms"])
        assert_citations_are_ingested_chunks(running_stack.urls["retriever"], question["citations"])

        meta = _chat(client, "What did I ask before?", cid)
        assert meta["intent"] == "meta"
        assert meta["citations"] == []
        assert not RAG_STAGES & set(meta["timings_ms"])
        # The earlier document question is listed; the greeting is not a question about the documents.
        assert ZORBLAX_QUESTION in meta["answer"]
        assert "Hello!" not in meta["answer"]

        turns = client.get(f"/v1/conversations/{cid}").json()["turns"]
    assert [(t["message"], t["intent"]) for t in turns] == [
        ("Hello!", "chitchat"),
        (ZORBLAX_QUESTION, "rag"),
        ("What did I ask before?", "meta"),
    ]
    assert turns[0]["citations"] == [] and turns[0]["answer"] == hello["answer"]
    assert turns[2]["answer"] == meta["answer"]

