"""QueryRefiner against the real SmolLM2 server (and against a dead one)."""

from __future__ import annotations

import time

from langchain_openai import ChatOpenAI

from rag_common.llm import build_chat_model
from rag_common.llm_admission import LLMAdmission
from rag_common.schemas import HistoryTurn, RefineRequest
from rag_common.settings import LLMSettings
from rag_refiner.intent_router import IntentRouter
from rag_refiner.query_refiner import QueryRefiner
from rag_refiner.settings import RefinerSettings

from .llm_calls import counted_chat_model

ACME_TURN = HistoryTurn(
    question="Acme Robotics company history",
    answer="Acme Robotics began as a two-person workshop building warehouse robots and later moved into surgical arms.",
)


async def test_first_message_passes_through_without_calling_the_llm(dead_llm_settings: LLMSettings) -> None:
    # The model points at a closed port: any call would end in "fallback", so "passthrough" proves none was made.
    refiner = QueryRefiner.of(RefinerSettings(), build_chat_model(dead_llm_settings))
    response = await refiner.refine(RefineRequest(message="What does Acme Robotics build?"))
    assert response.method == "passthrough"
    assert response.query == "What does Acme Robotics build?"
    assert response.rewritten is False


async def test_follow_up_gets_the_subject_from_history(chat_model: ChatOpenAI) -> None:
    refiner = QueryRefiner.of(RefinerSettings(), chat_model)
    started = time.perf_counter()
    response = await refiner.refine(RefineRequest(message="What year was it founded?", history=[ACME_TURN]))
    elapsed = time.perf_counter() - started
    assert response.method in ("llm", "context_append"), response
    assert "Acme" in response.query
    assert response.query.startswith("What year was") or "founded" in response.query
    assert response.rewritten is True
    assert elapsed < 20


async def test_rejected_rewrite_falls_back_to_appending_the_last_question(chat_model: ChatOpenAI) -> None:
    # With a 10-character limit no real rewrite can pass the guard, whatever the model says.
    refiner = QueryRefiner.of(RefinerSettings(max_query_chars=10), chat_model)
    message = "Who runs it now?"
    response = await refiner.refine(RefineRequest(message=message, history=[ACME_TURN]))
    assert response.method == "context_append"
    assert response.query == f"{message} ({ACME_TURN.question})"
    assert response.rewritten is True
    assert response.detail


async def test_llm_down_falls_back_to_the_raw_message(dead_llm_settings: LLMSettings) -> None:
    refiner = QueryRefiner.of(RefinerSettings(), build_chat_model(dead_llm_settings))
    response = await refiner.refine(RefineRequest(message="What year was it founded?", history=[ACME_TURN]))
    assert response.method == "fallback"
    assert response.query == "What year was it founded?"
    assert response.rewritten is False
    assert "Connection" in response.detail


async def test_hung_llm_times_out_to_the_raw_message(hung_llm_settings: LLMSettings) -> None:
    refiner = QueryRefiner.of(RefinerSettings(llm_timeout_s=1.0), build_chat_model(hung_llm_settings))
    started = time.perf_counter()
    response = await refiner.refine(RefineRequest(message="What year was it founded?", history=[ACME_TURN]))
    assert time.perf_counter() - started < 5
    assert (response.method, response.query, response.rewritten) == ("fallback", "What year was it founded?", False)
    assert "timed out after 1s" in response.detail


async def test_a_busy_llm_gets_the_deterministic_rewrite_at_once_and_no_call(llm_settings: LLMSettings) -> None:
    """Issue 12: when the admission control expects no slot within the budget, the follow-up is
    rewritten by context-append at once, and the request's later model calls (HyDE) are skipped."""
    model, counter = counted_chat_model(llm_settings)
    admission = LLMAdmission(
        "refiner-test", slots=1, max_queue=4, expected_call_s=30.0, max_wait_s=llm_settings.max_queue_wait_s
    )
    refiner = QueryRefiner.of(
        RefinerSettings(llm_timeout_s=20.0), model, admission=admission,
        intent_router=IntentRouter.of(RefinerSettings(llm_timeout_s=20.0), model),  # the router outside the queue
    )
    async with admission.slot(1000):  # another request holds the only slot
        started = time.perf_counter()
        response = await refiner.refine(
            RefineRequest(message="What year was it founded?", history=[ACME_TURN], hyde=True)
        )
        elapsed = time.perf_counter() - started
    assert response.method == "context_append"
    assert response.query == "What year was it founded? (Acme Robotics company history)"
    assert "llm busy: expected wait 30s" in response.detail
    assert "hyde: skipped" in response.detail and response.hyde_query is None
    assert counter.calls == 0
    assert elapsed < 5
