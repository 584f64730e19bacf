"""AnswerGenerator against the real SmolLM2 server (and against a dead or hung one)."""

from __future__ import annotations

import re
import time

import pytest

from rag_common.llm import build_chat_model
from rag_common.schemas import GenerateRequest, HistoryTurn, Passage
from rag_common.errors import DependencyFailed
from rag_common.service import status_for
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import ABSTAIN_MESSAGE, AnswerGenerator
from rag_generator.runtime import build_answer_generator
from rag_generator.settings import GeneratorSettings

QUESTIONS = [
    "When was Zorblax Aerospace founded?",
    "How many charts does the Quillfeather Library hold?",
    "How much sun does basil need?",
    "What is the capital of Peru?",
]
ABSTAIN_REASONS = {"model_abstained", "no_valid_citation", "invalid_output"}


async def test_no_passages_abstains_without_calling_the_llm(dead_llm_settings: LLMSettings) -> None:
    # A call to the closed port would raise a 503; a clean abstention proves no call was made.
    generator = AnswerGenerator(build_chat_model(dead_llm_settings))
    response = await generator.generate(GenerateRequest(query="Who founded Zorblax?", passages=[]))
    assert response.model_dump() == {
        "answer": ABSTAIN_MESSAGE, "citations": [], "abstained": True, "abstain_reason": "no_passages",
        "citation_precision": None, "repaired": False,
    }


@pytest.mark.parametrize("question", QUESTIONS)
async def test_citations_point_at_given_passages_or_the_answer_abstains(
    generator: AnswerGenerator, passages: list[Passage], question: str
) -> None:
    started = time.perf_counter()
    response = await generator.generate(GenerateRequest(query=question, passages=passages))
    assert time.perf_counter() - started < 60
    if response.abstained:
        assert response.abstain_reason in ABSTAIN_REASONS
        assert (response.answer, response.citations) == (ABSTAIN_MESSAGE, [])
        if response.abstain_reason == "no_valid_citation":
            assert response.citation_precision in (None, 0.0)
        return
    assert response.answer.strip() and response.abstain_reason == ""
    assert 1 <= len(response.citations) <= 3
    assert response.citation_precision is not None and 0.0 < response.citation_precision <= 1.0
    ids = [citation.id for citation in response.citations]
    assert len(set(ids)) == len(ids)
    for citation in response.citations:
        assert citation.id in (1, 2, 3)
        cited = passages[citation.id - 1]
        assert (citation.chunk_id, citation.title, citation.source, citation.page, citation.score) == (
            cited.chunk_id, cited.title, cited.source, cited.page, cited.score,
        )
        # Verified: the quote is the cited passage's own words, never the model's paraphrase.
        assert citation.quote.strip() and citation.quote in " ".join(cited.text.split())
    # Every [n] left in the answer resolves to a returned citation.
    assert {int(n) for n in re.findall(r"\[(\d+)\]", response.answer)} <= set(ids)


async def test_follow_up_with_history_keeps_the_invariant(generator: AnswerGenerator, passages: list[Passage]) -> None:
    history = [HistoryTurn(question="Where is Zorblax Aerospace based?", answer="In Tromsø, Norway [1].")]
    response = await generator.generate(
        GenerateRequest(query="Who founded Zorblax Aerospace?", passages=passages, history=history)
    )
    assert response.abstained or {c.chunk_id for c in response.citations} <= {p.chunk_id for p in passages}


async def test_truncated_reply_abstains_as_invalid_output(llm_settings: LLMSettings, passages: list[Passage]) -> None:
    # Eight tokens cannot hold the JSON object: the endpoint stops on "length" mid-reply.
    generator = build_answer_generator(GeneratorSettings(max_tokens=8), llm_settings)
    response = await generator.generate(GenerateRequest(query=QUESTIONS[0], passages=passages))
    assert (response.abstained, response.abstain_reason, response.answer) == (True, "invalid_output", ABSTAIN_MESSAGE)


async def test_llm_down_is_a_503(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    generator = AnswerGenerator(build_chat_model(dead_llm_settings))
    with pytest.raises(DependencyFailed) as raised:
        await generator.generate(GenerateRequest(query=QUESTIONS[0], passages=passages))
    assert (raised.value.stage, raised.value.kind, status_for(raised.value)) == ("llm", "unavailable", 503)
    assert raised.value.message.startswith("llm unavailable:")
    assert "ConnectionError" in raised.value.message


async def test_hung_llm_is_a_504_after_the_budget(hung_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    generator = AnswerGenerator(build_chat_model(hung_llm_settings), llm_timeout_s=1.0)
    started = time.perf_counter()
    with pytest.raises(DependencyFailed) as raised:
        await generator.generate(GenerateRequest(query=QUESTIONS[0], passages=passages))
    assert time.perf_counter() - started < 5
    assert (status_for(raised.value), raised.value.message) == (504, "llm timed out: no answer within 1s")
