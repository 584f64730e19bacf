"""The generator when its LLM queue cannot serve a call in time (issue 12's 504 storm).

The app runs with its real runtime and the real SmolLM2 endpoint; the test itself occupies the one
LLM slot through the runtime's admission control, so the busy state is exact rather than timed.
``auto`` answers at once with the extractive answer and says why in ``degraded``; ``generative``
answers 503 with ``Retry-After`` at once, never a 504 after its whole LLM budget.
"""

from __future__ import annotations

import time

import pytest
from httpx_sse import aconnect_sse

import rag_generator.runtime as runtime_module
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import GenerateResponse, Passage
from rag_common.settings import LLMSettings
from rag_generator.app import create_app
from rag_generator.settings import GeneratorSettings
from ragctl.in_process import asgi_client

from .conftest import FOUNDER_QUESTION, FOUNDER_SENTENCE


@pytest.fixture(autouse=True)
def loaded_embedder(monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder) -> None:
    monkeypatch.setattr(runtime_module, "build_embedder", lambda settings: embedder)


def one_slot(llm_settings: LLMSettings) -> LLMSettings:
    # A measured mean of 30 s per call: one call ahead means 30 s of wait, over a 20 s budget.
    return llm_settings.model_copy(update={"slots": 1, "max_queue": 4, "expected_call_s": 30.0, "max_queue_wait_s": 60.0})


def payload(passages: list[Passage]) -> dict:
    return {"query": FOUNDER_QUESTION, "passages": [p.model_dump() for p in passages]}


async def test_auto_mode_answers_extractively_at_once_when_the_llm_is_busy(
    llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    app = create_app(GeneratorSettings(mode="auto", llm_timeout_s=20), one_slot(llm_settings))
    async with asgi_client(app, "http://generator") as client:
        admission = app.state.runtime.admission
        async with admission.slot(1000):  # another request's call holds the only slot
            started = time.monotonic()
            response = await client.post("/v1/generate", json=payload(passages))
            elapsed = time.monotonic() - started
    assert response.status_code == 200, response.text
    answer = GenerateResponse.model_validate_json(response.content)
    assert answer.mode == "extractive" and not answer.abstained
    assert answer.answer.startswith(FOUNDER_SENTENCE)
    [why] = answer.degraded
    assert "the LLM is busy" in why and "exceeds the 20s budget" in why
    assert elapsed < 10  # no LLM call was waited for (the budget is 20 s)


async def test_generative_mode_answers_503_with_retry_after_when_the_llm_is_busy(
    llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    app = create_app(GeneratorSettings(mode="generative", llm_timeout_s=20), one_slot(llm_settings))
    async with asgi_client(app, "http://generator") as client:
        async with app.state.runtime.admission.slot(1000):
            response = await client.post("/v1/generate", json=payload(passages))
            async with aconnect_sse(client, "POST", "/v1/generate/stream", json=payload(passages)) as source:
                events = [(event.event, event.json()) async for event in source.aiter_sse()]
        metrics = (await client.get("/metrics")).text
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "30"
    assert response.json()["stage"] == "llm"
    assert response.json()["error"].startswith("llm busy: expected wait 30s")
    [(name, data)] = events
    assert name == "error" and data["status"] == 503
    assert 'rag_llm_rejected_total{service="generator"}' in metrics
    assert "rag_llm_queue_length" in metrics
