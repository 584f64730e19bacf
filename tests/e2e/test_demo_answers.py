"""The README's demo, as a new user runs it: the repository's docs/ ingested by `ragctl ingest` (as
`make run` does), then the printed question and its follow-up. Asserts on content, not only shape."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from ragctl.ingest_client import IngestOptions, ingest

from .corpus import RETRIEVER_HEADERS

pytestmark = pytest.mark.e2e

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _chunk_text(retriever: str, chunk_id: str, query: str) -> str:
    """The cited chunk's text as the retriever stores it (found by searching for its quote)."""
    found = httpx.post(
        f"{retriever}/v1/search",
        json={"query": query, "top_k": 50, "mode": "bm25"},
        timeout=60,
        headers=RETRIEVER_HEADERS,
    )
    found.raise_for_status()
    [text] = [p["text"] for p in found.json()["passages"] if p["chunk_id"] == chunk_id]
    return text


def test_the_readme_demo_question_and_follow_up_are_answered_with_checkable_citations(running_stack) -> None:
    summary = ingest([DOCS], running_stack.gateway, IngestOptions(timeout_s=600))
    assert summary.documents >= 5 and not summary.failed

    with httpx.Client(base_url=running_stack.gateway, timeout=600) as client:
        first = client.post("/v1/chat", json={"message": "Where are conversations stored?"})
        assert first.status_code == 200, first.text
        body = first.json()
        assert not body["abstained"], body
        assert "Redis" in body["answer"]
        assert body["answer_mode"] in ("extractive", "generative")
        assert body["answerability"] is not None and 0.0 <= body["answerability"] <= 1.0
        redis_citations = [c for c in body["citations"] if "Redis" in c["quote"]]
        assert redis_citations, body["citations"]
        # The highlight offsets point at exactly the quoted sentence of the stored chunk.
        for citation in body["citations"]:
            text = _chunk_text(running_stack.urls["retriever"], citation["chunk_id"], citation["quote"])
            assert text[citation["start"] : citation["end"]] == citation["quote"]

        follow_up = client.post(
            "/v1/chat", json={"conversation_id": body["conversation_id"], "message": "And how is it scaled?"}
        )
        assert follow_up.status_code == 200, follow_up.text
        follow = follow_up.json()
        assert "conversation" in follow["refined_query"].lower()
        assert not follow["abstained"], follow
        assert "Redis" in follow["answer"] or any("Redis" in c["quote"] for c in follow["citations"])

        off_topic = client.post("/v1/chat", json={"message": "What is the boiling point of tungsten?"})
        assert off_topic.status_code == 200 and off_topic.json()["abstained"]
