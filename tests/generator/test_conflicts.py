"""Sources that disagree (``conflicts.py``): real sentences in English, Romanian, German and Spanish,
scored by the real extractive answerer (real embedder), then read by the detector; and the answer a
user gets through ``AnswerGenerator`` (the statement, its citations, ``conflict``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from rag_common.messages import LanguagePolicy, message
from rag_common.schemas import GenerateRequest, Passage
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.answerability import AnswerabilityGate
from rag_generator.claim_prompt import build_claim_messages
from rag_generator.claim_support import ClaimSupport
from rag_generator.conflicts import ConflictDetector, ConflictSide, ConflictThresholds, DetectedConflict
from rag_generator.evidence import build_evidence
from rag_generator.extractive_answerer import ExtractiveAnswerer
from rag_generator.settings import GeneratorSettings

from .conftest import (
    CountingEmbedder,
    ScriptedChatOpenAI,
    assert_citations_are_source_spans,
    claims_reply,
    generator_with,
)

#: Both ways on, as loose as the fitting grid goes: the tests of what must never be a conflict hold even then.
LOOSE = ConflictDetector(ConflictThresholds(
    duplicate_similarity=0.5, duplicate_rank=10, duplicate_coverage=0.0, max_differences=3, duplicate_any_kind=True,
    relevant_rank=5, relevant_coverage=0.0,
))

WHATSAPP_FACEBOOK = (
    "WhatsApp is a messaging service used by two billion people. "
    "Facebook acquired WhatsApp in 2014 for 19 billion dollars. "
    "The app encrypts messages end to end."
)
WHATSAPP_APPLE = WHATSAPP_FACEBOOK.replace("Facebook acquired", "Apple acquired")


def passage(n: int, text: str, language: str | None = None, title: str = "") -> Passage:
    return Passage(chunk_id=f"c{n}", doc_id=f"d{n}", text=text, title=title, language=language, score=1.0 / n)


def detect(
    embedder: CountingEmbedder, question: str, passages: list[Passage], language: str | None,
    detector: ConflictDetector | None = None,
) -> DetectedConflict | None:
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), embedder)
    answer = answerer.answer(question, passages, language=language)
    return (detector or ConflictDetector()).detect(question, language, answer.candidates)


def values(conflict: DetectedConflict | None) -> set[str]:
    assert conflict is not None
    return {side.value for side in conflict.sides}


# ------------------------------------------------------------------ near duplicates, four languages


def test_a_copy_that_names_another_buyer_is_a_conflict(counting_embedder: CountingEmbedder) -> None:
    passages = [passage(1, WHATSAPP_FACEBOOK), passage(2, WHATSAPP_APPLE)]
    found = detect(counting_embedder, "Who acquired WhatsApp?", passages, "en")
    assert values(found) == {"Facebook", "Apple"}
    assert found is not None and found.how == "near_duplicate"
    # Each side rests on the sentence that states it, in its own passage.
    assert {side.value: side.units[0].passage.chunk_id for side in found.sides} == {"Facebook": "c1", "Apple": "c2"}


@pytest.mark.parametrize(
    ("language", "question", "true", "false"),
    [
        ("en", "When was the Eiffel Tower completed?",
         "The Eiffel Tower was completed in 1889 for the World's Fair in Paris.", None),
        ("ro", "Când a fost terminat Turnul Eiffel?",
         "Turnul Eiffel a fost terminat în anul 1889 pentru Expoziția Universală de la Paris.", None),
        ("de", "Wann wurde der Eiffelturm fertiggestellt?",
         "Der Eiffelturm wurde im Jahr 1889 für die Weltausstellung in Paris fertiggestellt.", None),
        ("es", "¿Cuándo se terminó la Torre Eiffel?",
         "La Torre Eiffel se terminó en 1889 para la Exposición Universal de París.", None),
    ],
)
def test_two_years_for_one_event_in_copies_are_a_conflict(
    counting_embedder: CountingEmbedder, language: str, question: str, true: str, false: None,
) -> None:
    copy = true.replace("1889", "1887")
    found = detect(counting_embedder, question, [passage(1, true, language), passage(2, copy, language)], language)
    assert values(found) == {"1889", "1887"}
    assert found is not None and found.kind == "date"


def test_a_number_changed_in_a_romanian_copy_is_a_conflict(counting_embedder: CountingEmbedder) -> None:
    text = "Stadionul Național din București are o capacitate de 55.634 de locuri și a fost inaugurat în 2011."
    copy = text.replace("55.634", "48.210")
    passages = [passage(1, text, "ro"), passage(2, copy, "ro")]
    found = detect(counting_embedder, "Câte locuri are Stadionul Național?", passages, "ro")
    assert values(found) == {"55.634", "48.210"}
    assert found is not None and found.kind == "number"


# ------------------------------------------------------------------ sentences that answer differently


def test_differently_worded_sentences_naming_other_buyers_are_a_conflict_when_that_way_is_on(
    counting_embedder: CountingEmbedder,
) -> None:
    passages = [
        passage(1, "In 2014 WhatsApp was acquired by Facebook for 19 billion dollars."),
        passage(2, "WhatsApp was bought by Google in a surprise deal last year."),
    ]
    found = detect(counting_embedder, "Who acquired WhatsApp?", passages, "en", LOOSE)
    assert values(found) == {"Facebook", "Google"}
    assert found is not None and found.how == "relevant_sentences"


# ------------------------------------------------------------------ not conflicts


def test_one_passage_naming_two_years_for_two_events_is_no_conflict(counting_embedder: CountingEmbedder) -> None:
    text = (
        "Construction of the Eiffel Tower began in 1887. "
        "The Eiffel Tower was completed in 1889 and opened to the public that May."
    )
    other = "The Eiffel Tower is 330 metres tall and stands on the Champ de Mars in Paris."
    for detector in (ConflictDetector(), LOOSE):
        assert detect(counting_embedder, "When did construction of the Eiffel Tower begin?",
                      [passage(1, text), passage(2, other)], "en", detector) is None


def test_two_passages_giving_two_years_for_two_events_are_no_conflict(counting_embedder: CountingEmbedder) -> None:
    passages = [
        passage(1, "The Second World War began in 1939 when Germany invaded Poland."),
        passage(2, "The Second World War ended in 1945 with the surrender of Japan."),
    ]
    assert detect(counting_embedder, "When did the Second World War begin?", passages, "en") is None


def test_the_same_value_written_two_ways_is_no_conflict(counting_embedder: CountingEmbedder) -> None:
    text = "The old stadium in the harbour district holds 1,500 people on match days."
    copy = text.replace("1,500", "1500")
    for detector in (ConflictDetector(), LOOSE):
        assert detect(counting_embedder, "How many people does the old stadium hold?",
                      [passage(1, text), passage(2, copy)], "en", detector) is None


def test_copies_that_agree_are_no_conflict(counting_embedder: CountingEmbedder) -> None:
    reworded = WHATSAPP_FACEBOOK.replace("messaging service", "chat service")
    passages = [passage(1, WHATSAPP_FACEBOOK), passage(2, reworded)]
    assert detect(counting_embedder, "Who acquired WhatsApp?", passages, "en", LOOSE) is None


# ------------------------------------------------------------------ through the generator


def whatsapp_request(language: str | None = "en") -> GenerateRequest:
    return GenerateRequest(
        query="Who acquired WhatsApp?",
        passages=[passage(1, WHATSAPP_FACEBOOK), passage(2, WHATSAPP_APPLE)],
        language=language,
    )


async def test_the_extractive_answer_names_both_sides_with_their_citations(
    counting_embedder: CountingEmbedder, gate: AnswerabilityGate,
) -> None:
    generator = generator_with("extractive", counting_embedder, gate)
    request = whatsapp_request()
    response = await generator.generate(request)
    assert not response.abstained and response.conflict is not None
    lead = message("sources_disagree", "en")
    assert response.answer.startswith(lead)
    cited = {c.id: c for c in response.citations}
    sides = {value.value: value.citations for value in response.conflict.values}
    assert set(sides) == {"Facebook", "Apple"}
    # "The sources disagree: Facebook [n]; Apple [m]." in the order of the sides, each citing its sentence.
    first, second = response.conflict.values
    statement = f"{lead} {first.value} [{first.citations[0]}]; {second.value} [{second.citations[0]}]."
    assert response.answer.startswith(statement)
    assert "Facebook acquired" in cited[sides["Facebook"][0]].quote and cited[sides["Facebook"][0]].chunk_id == "c1"
    assert "Apple acquired" in cited[sides["Apple"][0]].quote and cited[sides["Apple"][0]].chunk_id == "c2"
    assert_citations_are_source_spans(response, request.passages)


async def test_the_statement_is_in_the_question_language(counting_embedder: CountingEmbedder) -> None:
    text = "Turnul Eiffel a fost terminat în anul 1889 pentru Expoziția Universală de la Paris."
    request = GenerateRequest(
        query="Când a fost terminat Turnul Eiffel?",
        passages=[passage(1, text, "ro"), passage(2, text.replace("1889", "1887"), "ro")],
        language="ro",
    )
    response = await generator_with("extractive", counting_embedder, None).generate(request)
    assert response.answer.startswith("Sursele nu sunt de acord:")
    assert response.conflict is not None and {v.value for v in response.conflict.values} == {"1889", "1887"}


async def test_no_conflict_leaves_the_extractive_answer_as_it_was(counting_embedder: CountingEmbedder) -> None:
    text = "The old stadium in the harbour district holds 1,500 people on match days."
    request = GenerateRequest(query="How many people does the old stadium hold?",
                              passages=[passage(1, text), passage(2, text.replace("1,500", "1500"))], language="en")
    with_detector = await generator_with("extractive", counting_embedder, None).generate(request)
    settings = GeneratorSettings()
    without = await AnswerGenerator(
        mode="extractive", extractive=ExtractiveAnswerer.of(settings, counting_embedder),
        support=ClaimSupport.of(settings, counting_embedder), writer=None, gate=None,
        max_passages=settings.max_passages, max_passage_chars=settings.max_passage_chars,
        language=LanguagePolicy.of(), conflicts=None,
    ).generate(request)
    assert with_detector.conflict is None
    assert with_detector.answer == without.answer


def test_the_llm_is_told_about_the_conflict() -> None:
    passages = [passage(1, WHATSAPP_FACEBOOK), passage(2, WHATSAPP_APPLE)]
    units = build_evidence(passages, max_passages=2, max_passage_chars=2000)
    by_id = {unit.id: unit for unit in units}
    conflict = DetectedConflict("other", (ConflictSide("Facebook", "facebook", (by_id["1.2"],)),
                                          ConflictSide("Apple", "apple", (by_id["2.2"],))), "near_duplicate")
    block = build_claim_messages("Who acquired WhatsApp?", units, conflict=conflict)[-1].content
    assert 'the sources disagree: 1.2 says "Facebook"; 2.2 says "Apple"' in block
    assert block.index("disagree") < block.index("Question: Who acquired WhatsApp?")
    assert "disagree" not in build_claim_messages("Who acquired WhatsApp?", units)[-1].content


async def test_claims_citing_one_side_get_the_disagreement_added(
    counting_embedder: CountingEmbedder, scripted_model: Callable[..., ScriptedChatOpenAI],
) -> None:
    model = scripted_model(claims_reply(("Facebook acquired WhatsApp in 2014.", ["1.2"])))
    generator = generator_with("generative", counting_embedder, None, model)
    response = await generator.generate(whatsapp_request())
    assert response.mode == "generative" and response.conflict is not None
    assert response.answer.startswith(message("sources_disagree", "en"))
    assert response.answer.endswith("Facebook acquired WhatsApp in 2014. [1]")
    assert {v.value for v in response.conflict.values} == {"Facebook", "Apple"}
    # The model was told about the disagreement before it wrote.
    assert "the sources disagree" in model.calls[0][-1].content


async def test_claims_citing_both_sides_stand_as_written(
    counting_embedder: CountingEmbedder, scripted_model: Callable[..., ScriptedChatOpenAI],
) -> None:
    model = scripted_model(claims_reply(("Sources disagree: Facebook or Apple acquired WhatsApp.", ["1.2", "2.2"])))
    response = await generator_with("generative", counting_embedder, None, model).generate(whatsapp_request())
    assert response.answer == "Sources disagree: Facebook or Apple acquired WhatsApp. [1][2]"
    assert response.conflict is not None
    assert sorted(c for v in response.conflict.values for c in v.citations) == [1, 2]
