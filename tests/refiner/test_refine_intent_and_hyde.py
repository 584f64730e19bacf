"""QueryRefiner end to end: intent routing, HyDE, and how one failed model call shapes the rest.

Real SmolLM2 server, a refused port (dead) and a silent one (hung); model calls are counted.
"""

from __future__ import annotations

from rag_common.schemas import HistoryTurn, RefineRequest
from rag_common.settings import LLMSettings
from rag_refiner.query_refiner import QueryRefiner
from rag_refiner.runtime import build_query_refiner
from rag_refiner.settings import RefinerSettings

from .llm_calls import counted_chat_model

ACME_TURN = HistoryTurn(
    question="Acme Robotics company history",
    answer="Acme Robotics began as a two-person workshop building warehouse robots and later moved into surgical arms.",
)
AMBIGUOUS = "book me a hotel in Rome"


async def test_hyde_passage_follows_the_query(llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(llm_settings)
    message = "What does Acme Robotics build?"
    response = await QueryRefiner.of(RefinerSettings(), model).refine(RefineRequest(message=message, hyde=True))
    assert (response.intent, response.intent_method, response.method) == ("rag", "embedding", "passthrough")
    assert response.query == message
    assert response.hyde_query is not None
    query, _, passage = response.hyde_query.partition("\n")
    assert query == message
    assert len(passage.split()) >= 5
    assert counter.calls == 1  # the HyDE call; no intent call, no rewrite for a first message
    assert "hyde" not in response.detail


async def test_hyde_starts_from_the_refined_query(llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(llm_settings)
    response = await QueryRefiner.of(RefinerSettings(), model).refine(
        RefineRequest(message="What year was it founded?", history=[ACME_TURN], hyde=True)
    )
    assert response.method in ("llm", "context_append")
    assert response.hyde_query is not None and response.hyde_query.startswith(response.query + "\n")
    assert "Acme" in response.hyde_query
    assert counter.calls == 2  # rewrite + HyDE


async def test_without_hyde_a_first_message_makes_no_call(llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(llm_settings)
    response = await QueryRefiner.of(RefinerSettings(), model).refine(RefineRequest(message="What does Acme Robotics build?"))
    assert response.hyde_query is None
    assert counter.calls == 0


async def test_dead_llm_hyde_is_none_and_says_why(dead_llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(dead_llm_settings)
    message = "What does Acme Robotics build?"
    response = await QueryRefiner.of(RefinerSettings(), model).refine(RefineRequest(message=message, hyde=True))
    assert (response.query, response.intent, response.method, response.hyde_query) == (message, "rag", "passthrough", None)
    assert "hyde: llm error" in response.detail and "Connection" in response.detail
    assert counter.calls == 1


async def test_hung_llm_hyde_times_out(hung_llm_settings: LLMSettings) -> None:
    model, _ = counted_chat_model(hung_llm_settings)
    refiner = QueryRefiner.of(RefinerSettings(llm_timeout_s=1.0), model)
    response = await refiner.refine(RefineRequest(message="What does Acme Robotics build?", hyde=True))
    assert response.hyde_query is None
    assert "hyde: llm timed out after 1s" in response.detail


async def test_after_a_failed_call_the_request_makes_no_more_calls(dead_llm_settings: LLMSettings) -> None:
    # Intent (unsure → LLM) fails; the rewrite and HyDE would only wait on the same dead endpoint.
    model, counter = counted_chat_model(dead_llm_settings)
    response = await QueryRefiner.of(RefinerSettings(), model).refine(RefineRequest(message=AMBIGUOUS, history=[ACME_TURN], hyde=True))
    assert (response.intent, response.intent_method) == ("rag", "fallback")
    assert (response.query, response.rewritten, response.method) == (AMBIGUOUS, False, "fallback")
    assert response.hyde_query is None
    assert "rewrite skipped" in response.detail and "hyde: skipped" in response.detail
    assert counter.calls == 1


async def test_hung_llm_costs_one_timeout_not_three(hung_llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(hung_llm_settings)
    refiner = QueryRefiner.of(RefinerSettings(llm_timeout_s=1.0), model)
    response = await refiner.refine(RefineRequest(message="Who runs it now?", history=[ACME_TURN], hyde=True))
    assert (response.method, response.query, response.intent) == ("fallback", "Who runs it now?", "rag")
    assert response.detail.startswith("llm timed out after 1s")
    assert "hyde: skipped" in response.detail
    assert counter.calls == 1


async def test_non_rag_intents_are_neither_rewritten_nor_hyded(dead_llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(dead_llm_settings)
    refiner = QueryRefiner.of(RefinerSettings(), model)
    for message, intent in (("thanks!", "chitchat"), ("What did I ask before?", "meta")):
        response = await refiner.refine(RefineRequest(message=message, history=[ACME_TURN], hyde=True))
        assert (response.intent, response.intent_method) == (intent, "rules")
        assert (response.query, response.rewritten, response.method) == (message, False, "passthrough")
        assert response.hyde_query is None
        assert f"not rewritten: intent {intent}" in response.detail
    assert counter.calls == 0


async def test_settings_switch_off_the_intent_llm(dead_llm_settings: LLMSettings, monkeypatch) -> None:
    monkeypatch.setenv("REFINER_INTENT_LLM", "false")
    monkeypatch.setenv("REFINER_HYDE_MAX_TOKENS", "40")
    settings = RefinerSettings()
    assert (settings.intent_llm, settings.hyde_max_tokens) == (False, 40)
    model, counter = counted_chat_model(dead_llm_settings)
    response = await build_query_refiner(settings, model).refine(RefineRequest(message=AMBIGUOUS))
    assert (response.intent, response.intent_method) == ("rag", "embedding")
    assert "llm stage off" in response.detail
    assert counter.calls == 0


def test_every_setting_states_its_default() -> None:
    for name, field in RefinerSettings.model_fields.items():
        assert field.description and field.description.rstrip().endswith(".") and "Default " in field.description, name
