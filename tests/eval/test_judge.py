"""The LLM judge against a scripted chat model: parsing, score arithmetic, negative control, repeats."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from rag_eval.judge import (
    ANSWER_PROMPT,
    CLAIMS_PROMPT,
    CONTEXT_PROMPTS,
    SUPPORT_PROMPT,
    JudgeItem,
    LLMJudge,
    derangement,
    judge_items,
    off_topic,
    parse_claims,
    parse_score,
    parse_yes_no,
)


def test_parsers() -> None:
    assert parse_score("Score: 2") == 2
    assert parse_score("I'd say 1.") == 1
    assert parse_score("7 out of 10") is None and parse_score("") is None
    assert parse_yes_no("Yes, it is.") is True and parse_yes_no("NO") is False and parse_yes_no("maybe") is None
    assert parse_claims("1. Paris is in France\n- It is big\n\nNONE") == ["Paris is in France", "It is big"]
    assert parse_claims("NONE") == []


def test_derangement_has_no_fixed_point() -> None:
    for n in (2, 3, 10):
        for seed in range(5):
            pairing = derangement(n, seed)
            assert sorted(pairing) == list(range(n)) and all(pairing[i] != i for i in range(n))
    with pytest.raises(ValueError):
        derangement(1)


@dataclass
class Reply:
    content: str


class ScriptedModel:
    """Relevant (2) when the passage/answer mentions the question's topic word, else 0; claims: the
    answer's sentences; a claim is supported when its first word is in the context."""

    async def ainvoke(self, messages: list) -> Reply:
        system, human = messages[0].content, messages[1].content
        if system in CONTEXT_PROMPTS:
            topic = human.split("QUESTION: ")[1].split()[0]
            passage = human.split("PASSAGE: ")[1]
            # The second wording is stricter: only 1 for a relevant passage.
            relevant = topic in passage
            return Reply(("2" if system == CONTEXT_PROMPTS[0] else "1") if relevant else "0")
        if system == CLAIMS_PROMPT:
            answer = human.removeprefix("ANSWER: ")
            return Reply("\n".join(s.strip() for s in answer.split(".") if s.strip()) or "NONE")
        if system == SUPPORT_PROMPT:
            context, claim = human.split("\n\nCLAIM: ")
            return Reply("yes" if claim.split()[0] in context else "no")
        if system == ANSWER_PROMPT:
            topic = human.split("QUESTION: ")[1].split()[0]
            answer = human.split("ANSWER: ")[1]
            return Reply("2" if topic in answer else "garbled")
        raise AssertionError(system)


ITEMS = [
    JudgeItem("q1", "bees dance?", ("bees dance to show flowers", "volcanoes erupt"), "bees dance. wasps sting."),
    JudgeItem("q2", "volcanoes erupt?", ("volcanoes erupt with magma",), "volcanoes erupt."),
]


async def test_judge_scores_by_hand() -> None:
    judge = LLMJudge(ScriptedModel())
    first = await judge.judge(ITEMS[0])
    # Chunk 1: (2 + 1) / 2 / 2 = 0.75; chunk 2: 0 → mean 0.375
    assert first["context_relevance"] == pytest.approx(0.375)
    # Claims "bees dance" (supported) and "wasps sting" (not) → 1/2
    assert first["faithfulness"] == pytest.approx(0.5)
    assert first["answer_relevance"] == 1.0
    assert judge.unparsed == 0


async def test_negative_control_and_repeats() -> None:
    judge = LLMJudge(ScriptedModel())
    result = await judge_items(judge, ITEMS, repeats=2)
    real, control = result["real"], result["control"]
    # Real: q1 0.375, q2 0.75 → 0.5625. Control: q1 with q2's contexts → 0; q2 with q1's contexts,
    # whose second chunk is about volcanoes → (0 + 0.75) / 2 = 0.375; mean 0.1875.
    assert real["context_relevance"]["mean"] == pytest.approx(0.5625)
    assert control["context_relevance"]["mean"] == pytest.approx(0.1875)
    # Off-topic answers do not mention the question's topic: the scripted judge replies "garbled" →
    # unparsed (missing), not 0.
    assert control["answer_relevance"]["mean"] is None and result["unparsed_replies"] > 0
    assert real["answer_relevance"] == {"mean": 1.0, "spread": 0.0, "n": 2}
    assert result["repeats"] == 2 and result["items"] == 2
    # Control keeps each question but swaps contexts and answers.
    assert [item.question for item in off_topic(ITEMS)] == ["bees dance?", "volcanoes erupt?"]
    assert off_topic(ITEMS)[0].contexts == ITEMS[1].contexts


async def test_llm_run_summaries_get_judged(monkeypatch: pytest.MonkeyPatch) -> None:
    """The evaluator judges an LLM run's logged answers (the contexts its generator read)."""
    import rag_common.llm
    from rag_common.settings import LLMSettings
    from rag_eval.datasets.types import Corpus, Dataset, Document, Query
    from rag_eval.evaluation import EvalOptions, Evaluator

    monkeypatch.setattr(rag_common.llm, "build_chat_model", lambda settings, **_: ScriptedModel())
    dataset = Dataset(
        "tiny", Corpus([Document("d", "x")]),
        [Query(id=item.query_id, text=item.question) for item in ITEMS], {},
    )
    records = {
        item.query_id: {"query_id": item.query_id, "contexts": list(item.contexts), "answer": item.answer, "abstained": False}
        for item in ITEMS
    }
    evaluator = Evaluator(EvalOptions(llm_settings=LLMSettings(), judge_repeats=1), embedder=object(), echo=lambda _: None)
    result = await evaluator._judge(dataset, records)
    assert result["items"] == 2 and result["judge_model"] == LLMSettings().model
    assert result["real"]["context_relevance"]["mean"] == pytest.approx(0.5625)
    assert "control" in result
