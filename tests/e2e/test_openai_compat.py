"""The OpenAI-compatible endpoints, driven by the real ``openai`` SDK against the real stack."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from .corpus import ZORBLAX_QUESTION, assert_citations_are_ingested_chunks, ingest_documents

pytestmark = pytest.mark.e2e


@pytest.fixture
def client(running_stack) -> Iterator[openai.OpenAI]:
    ingest_documents(running_stack.gateway)
    with openai.OpenAI(base_url=running_stack.gateway + "/v1", api_key="x", timeout=600, max_retries=0) as sdk:
        yield sdk


def _model(client: openai.OpenAI) -> str:
    [model] = client.models.list().data
    assert model.id
    return model.id


def test_non_streaming_completion_has_content_and_citations(running_stack, client: openai.OpenAI) -> None:
    model = _model(client)
    completion = client.chat.completions.create(
        model=model,
        messages=[
            {"role": "system", "content": "You are a pirate."},  # ignored by design: the sources decide
            {"role": "user", "content": ZORBLAX_QUESTION},
        ],
    )
    assert completion.object == "chat.completion" and completion.model == model
    [choice] = completion.choices
    assert choice.message.role == "assistant" and choice.finish_reason == "stop"
    content = choice.message.content
    assert content and content.strip()
    extra = completion.model_extra or {}
    assert "citations" in extra, extra
    citations = extra["citations"]
    assert isinstance(citations, list)
    assert_citations_are_ingested_chunks(running_stack.urls["retriever"], citations)
    # The sources list in the content matches the structured citations.
    assert ("\n\nSources:\n" in content) == bool(citations)
    for citation in citations:
        label = citation["title"] or citation["source"] or citation["chunk_id"]
        assert f"[{citation['id']}] {label}" in content


def test_streaming_completion_yields_content_then_stop(running_stack, client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=_model(client), messages=[{"role": "user", "content": ZORBLAX_QUESTION}], stream=True
    )
    chunks = list(stream)  # an error event mid-stream raises openai.APIError here, failing the test
    assert chunks, "no chunks"
    assert all(c.object == "chat.completion.chunk" for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert content.strip()
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert all(c.choices[0].finish_reason is None for c in chunks[:-1])
    citations = (last.model_extra or {}).get("citations")
    assert isinstance(citations, list), last
    assert_citations_are_ingested_chunks(running_stack.urls["retriever"], citations)
    assert ("\n\nSources:\n" in content) == bool(citations)
