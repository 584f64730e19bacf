"""IntentRouter against the real SmolLM2 server: when the LLM is (and is not) asked, and its failures.

Calls are counted with a langchain callback on the refiner's real ``ChatOpenAI``; a refused or
hung call still starts, so it counts too.
"""

from __future__ import annotations

import pytest

from rag_common.settings import LLMSettings
from rag_refiner.intent_classifier import IntentScores
from rag_refiner.intent_router import IntentDecision, IntentRouter
from rag_refiner.settings import RefinerSettings
from .llm_calls import counted_chat_model

#: Messages stages 1-2 settle: rules (chitchat, meta) or a confident classifier.
CONFIDENT = {
    "hi there!": ("chitchat", "rules"),
    "thank you so much": ("chitchat", "rules"),
    "What did I ask before?": ("meta", "rules"),
    "What is the warranty period of the X200 printer?": ("rag", "embedding"),
    "How do I configure SSO for the admin console?": ("rag", "embedding"),
    "tell me a joke about programmers": ("out_of_scope", "embedding"),
}
#: Stage 2 leans away from rag in the LLM band [0.5, 0.6) (asserted as a precondition).
AMBIGUOUS = "book me a hotel in Rome"
#: Stage 2 leans away from rag below 0.5: more likely wrong than right, so rag without a call.
WEAK_LEANING = "compose a limerick about coffee"


def unsure_scores(router: IntentRouter, message: str, low: float = 0.5, high: float = 0.6) -> IntentScores:
    scores = router.classify_cheap(message)
    assert isinstance(scores, IntentScores), f"precondition: {message!r} should be ambiguous, got {scores}"
    assert scores.intent != "rag" and low <= scores.confidence < high, f"precondition: {scores}"
    return scores


async def test_confident_messages_never_call_the_llm(llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(llm_settings)
    router = IntentRouter.of(RefinerSettings(), model)
    for message, expected in CONFIDENT.items():
        decision = await router.route(message)
        assert (decision.intent, decision.method) == expected, message
    assert counter.calls == 0


async def test_an_ambiguous_message_asks_the_llm_once(llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(llm_settings)
    router = IntentRouter.of(RefinerSettings(), model)
    scores = unsure_scores(router, AMBIGUOUS)
    decision = await router.route(AMBIGUOUS)
    assert counter.calls == 1
    assert AMBIGUOUS in counter.prompts[0]
    assert decision.method == "llm"
    # The LLM may confirm the classifier's leaning or pull back to rag, nothing else.
    assert decision.intent in (scores.intent, "rag")
    assert "llm answered" in decision.detail
    assert decision.llm_failure is None


async def test_a_weak_leaning_goes_to_rag_without_a_call(llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(llm_settings)
    router = IntentRouter.of(RefinerSettings(), model)
    unsure_scores(router, WEAK_LEANING, low=0.0, high=0.5)
    decision = await router.route(WEAK_LEANING)
    assert (decision.intent, decision.method) == ("rag", "embedding")
    assert "below 0.5" in decision.detail
    assert counter.calls == 0
    # With the floor at 0 the same message is worth a call.
    assert (await IntentRouter.of(RefinerSettings(intent_llm_min_confidence=0.0), model).route(WEAK_LEANING)).method == "llm"
    assert counter.calls == 1


async def test_the_llm_decides_within_the_threshold_band_only(llm_settings: LLMSettings) -> None:
    # Threshold 0: the classifier is always sure, so even the ambiguous message needs no call.
    model, counter = counted_chat_model(llm_settings)
    decision = await IntentRouter.of(RefinerSettings(intent_confidence_threshold=0.0), model).route(AMBIGUOUS)
    assert decision.method == "embedding"
    assert counter.calls == 0
    # Threshold 1: every non-rag leaning is unsure, but a rag leaning still needs no call.
    strict = IntentRouter.of(RefinerSettings(intent_confidence_threshold=1.0), model)
    assert (await strict.route("How do I reset my password?")).method == "embedding"
    assert counter.calls == 0
    assert (await strict.route("tell me a joke about programmers")).method == "llm"
    assert counter.calls == 1


async def test_dead_llm_routes_an_ambiguous_message_to_rag(dead_llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(dead_llm_settings)
    router = IntentRouter.of(RefinerSettings(), model)
    unsure_scores(router, AMBIGUOUS)
    decision = await router.route(AMBIGUOUS)
    assert counter.calls == 1
    assert (decision.intent, decision.method) == ("rag", "fallback")
    assert decision.llm_failure is not None and "Connection" in decision.llm_failure
    assert "kept rag" in decision.detail


async def test_hung_llm_times_out_to_rag(hung_llm_settings: LLMSettings) -> None:
    model, _ = counted_chat_model(hung_llm_settings)
    decision = await IntentRouter.of(RefinerSettings(llm_timeout_s=1.0), model).route(AMBIGUOUS)
    assert (decision.intent, decision.method) == ("rag", "fallback")
    assert decision.llm_failure == "llm timed out after 1s"


@pytest.mark.parametrize("message", ["hello!", "What is the refund policy?"])
async def test_dead_llm_does_not_matter_when_the_cheap_stages_are_sure(dead_llm_settings: LLMSettings, message: str) -> None:
    model, counter = counted_chat_model(dead_llm_settings)
    decision = await IntentRouter.of(RefinerSettings(), model).route(message)
    assert isinstance(decision, IntentDecision) and decision.method in ("rules", "embedding")
    assert counter.calls == 0
