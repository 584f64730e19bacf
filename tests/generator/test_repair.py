"""One repair call after an invalid reply. The invalid first reply is scripted (the grammar-constrained
test server never writes one); every other call goes to the real SmolLM2 server."""

from __future__ import annotations

import json
from collections.abc import Callable

from langchain_core.messages import AIMessage, HumanMessage

from rag_common.schemas import GenerateRequest, Passage
from rag_generator.answer_generator import ABSTAIN_MESSAGE, AnswerGenerator
from rag_generator.stream_events import FinalEvent, TokenEvent

from .conftest import ScriptedChatOpenAI

QUESTION = "Who founded Zorblax Aerospace?"
NOT_JSON = '{"answer": "Ingrid Halvorsen founded it [1], "citations": [1]'
WRONG_SHAPE = json.dumps({"answer": "Ingrid Halvorsen founded it [1].", "citations": [{"source_id": 1}], "confidence": 0.9})
ANSWER_REASONS = {"", "no_valid_citation", "model_abstained"}


def generator_for(model: ScriptedChatOpenAI) -> AnswerGenerator:
    # Tight schema bounds keep the real model's replies (and so the test) short.
    return AnswerGenerator(model, answer_max_chars=200, max_citations=2, llm_timeout_s=170.0)


def assert_verified(response, passages: list[Passage]) -> None:
    for citation in response.citations:
        assert citation.quote in " ".join(passages[citation.id - 1].text.split())


async def test_invalid_json_gets_exactly_one_repair_call(
    scripted_model: Callable[..., ScriptedChatOpenAI], passages: list[Passage]
) -> None:
    model = scripted_model(AIMessage(NOT_JSON))
    response = await generator_for(model).generate(GenerateRequest(query=QUESTION, passages=passages))
    assert len(model.calls) == 2
    first, repair = model.calls
    # The repair call replays the conversation, then shows the invalid reply and the error.
    assert repair[: len(first)] == first
    assert repair[len(first)] == AIMessage(NOT_JSON)
    assert isinstance(repair[-1], HumanMessage) and "not JSON" in repair[-1].content
    # The real model, constrained by the schema, returns a valid object: the repair succeeded.
    assert response.repaired is True
    assert response.abstain_reason in ANSWER_REASONS
    assert_verified(response, passages)


async def test_schema_violation_is_repaired_and_the_error_names_the_fields(
    scripted_model: Callable[..., ScriptedChatOpenAI], passages: list[Passage]
) -> None:
    model = scripted_model(AIMessage(WRONG_SHAPE))
    response = await generator_for(model).generate(GenerateRequest(query=QUESTION, passages=passages))
    assert len(model.calls) == 2
    error = model.calls[1][-1].content
    assert "citations.0.quote" in error and "abstained" in error and "confidence" in error
    assert response.repaired is True and response.abstain_reason in ANSWER_REASONS


async def test_invalid_repair_abstains_after_exactly_two_calls(
    scripted_model: Callable[..., ScriptedChatOpenAI], passages: list[Passage]
) -> None:
    model = scripted_model(AIMessage(NOT_JSON), AIMessage("Sorry, here it is: Ingrid Halvorsen [1]"))
    response = await generator_for(model).generate(GenerateRequest(query=QUESTION, passages=passages))
    assert len(model.calls) == 2
    assert response.model_dump() == {
        "answer": ABSTAIN_MESSAGE, "citations": [], "abstained": True, "abstain_reason": "invalid_output",
        "citation_precision": None, "repaired": False,
    }


async def test_cut_off_reply_is_not_repaired(
    scripted_model: Callable[..., ScriptedChatOpenAI], passages: list[Passage]
) -> None:
    cut = AIMessage('{"answer": "Ingrid Halvorsen founded', response_metadata={"finish_reason": "length"})
    model = scripted_model(cut)
    response = await generator_for(model).generate(GenerateRequest(query=QUESTION, passages=passages))
    assert len(model.calls) == 1
    assert (response.abstain_reason, response.repaired) == ("invalid_output", False)


async def test_valid_reply_makes_one_call(
    scripted_model: Callable[..., ScriptedChatOpenAI], passages: list[Passage]
) -> None:
    model = scripted_model()  # nothing scripted: the real model answers
    response = await generator_for(model).generate(GenerateRequest(query=QUESTION, passages=passages))
    assert len(model.calls) == 1
    assert response.repaired is False and response.abstain_reason in ANSWER_REASONS
    assert_verified(response, passages)


async def test_streamed_invalid_reply_is_repaired_and_the_final_event_wins(
    scripted_model: Callable[..., ScriptedChatOpenAI], passages: list[Passage]
) -> None:
    streamed = '{"answer": "Streamed draft [1]", "citations": 7}'
    model = scripted_model(AIMessage(streamed))
    events = [event async for event in generator_for(model).stream(GenerateRequest(query=QUESTION, passages=passages))]
    tokens = [event.text for event in events if isinstance(event, TokenEvent)]
    assert "".join(tokens) == "Streamed draft [1]"
    assert isinstance(events[-1], FinalEvent) and sum(isinstance(e, FinalEvent) for e in events) == 1
    assert len(model.calls) == 2
    final = events[-1].response
    assert final.repaired is True and final.abstain_reason in ANSWER_REASONS
    assert_verified(final, passages)
