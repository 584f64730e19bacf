"""AnswerGenerator: gate, extractive answer, checked claims, the auto fallback, and the stream.

The embedder, the gate and the LLM endpoint are real; the model's replies are scripted where a test
needs a reply the real (grammar-constrained) SmolLM2 does not write on demand.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.errors import DependencyFailed
from rag_common.llm import build_chat_model
from rag_common.schemas import GenerateRequest, GenerateResponse, HistoryTurn, Passage
from rag_common.service import status_for
from rag_common.settings import LanguageSettings, LLMSettings
from rag_common.messages import LanguagePolicy, message
from rag_generator.answer_generator import AnswerGenerator, GeneratorMode
from rag_generator.answerability import AnswerabilityGate, features_from_answer
from rag_generator.claim_support import ClaimSupport
from rag_generator.evidence import build_evidence
from rag_generator.extractive_answerer import ExtractiveAnswerer
from rag_generator.runtime import build_answer_generator
from rag_generator.settings import GeneratorSettings
from rag_generator.stream_events import ErrorEvent, FinalEvent, StreamEvent, TokenEvent

from .conftest import (
    CountingEmbedder,
    FOUNDER_QUESTION,
    FOUNDER_SENTENCE,
    HEADQUARTERS_SENTENCE,
    OFF_TOPIC_QUESTION,
    ScriptedChatOpenAI,
    assert_citations_are_source_spans,
    claims_reply,
    generator_with,
)

MODES: tuple[GeneratorMode, ...] = ("extractive", "generative", "auto")
FOUNDER_CLAIM = ("Ingrid Halvorsen founded Zorblax Aerospace in 1987.", ["1.2"])
HEADQUARTERS_CLAIM = ("Zorblax Aerospace is headquartered in Tromsø, Norway.", ["1.1"])
MOON_CLAIM = ("Zorblax was founded on the Moon by dolphins.", ["1.1"])
NOT_JSON = '{"claims": [{"text": "Ingrid Halvorsen founded it", "evidence": ["1.2"]'
EXTRACTIVE_FOUNDER_ANSWER = f"{FOUNDER_SENTENCE} [1]"
#: The questions here are English: so is the abstention.
ABSTAIN_MESSAGE = message("abstain", "en")
Scripted = Callable[..., ScriptedChatOpenAI]


def request(passages: list[Passage], query: str = FOUNDER_QUESTION, **extra: object) -> GenerateRequest:
    return GenerateRequest(query=query, passages=passages, **extra)


async def collect(generator: AnswerGenerator, req: GenerateRequest) -> list[StreamEvent]:
    return [event async for event in generator.stream(req)]


def assert_extractive_founder_answer(response: GenerateResponse, passages: list[Passage], gate: AnswerabilityGate) -> None:
    assert (response.answer, response.abstained, response.abstain_reason, response.mode) == (
        EXTRACTIVE_FOUNDER_ANSWER, False, "", "extractive",
    )
    [citation] = response.citations
    assert (citation.id, citation.chunk_id, citation.quote) == (1, "zorblax#0", FOUNDER_SENTENCE)
    assert_citations_are_source_spans(response, passages)
    assert response.answerability is not None and response.answerability >= gate.threshold


# ------------------------------------------------------------------ extractive, gate, no LLM


async def test_extractive_answers_with_the_founder_sentence_and_exact_offsets(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, dead_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    # Wired by the runtime behind a dead LLM: a call to it would raise.
    generator = build_answer_generator(GeneratorSettings(mode="extractive"), dead_llm_settings, embedder, gate)
    response = await generator.generate(request(passages))
    assert_extractive_founder_answer(response, passages, gate)
    [citation] = response.citations
    assert (citation.start, citation.end) == (passages[0].text.index(FOUNDER_SENTENCE),
                                              passages[0].text.index(FOUNDER_SENTENCE) + len(FOUNDER_SENTENCE))
    assert (citation.source, citation.title, citation.section_path, citation.score) == (
        "handbook/zorblax.md", "Zorblax Aerospace", ["Company", "History"], 0.91,
    )
    assert (response.citation_precision, response.claims_dropped, response.repaired, response.degraded) == (None, 0, False, [])


@pytest.mark.parametrize(
    ("question", "chunk_id", "words"),
    [
        ("How many charts does the Quillfeather Library hold?", "quillfeather#0", "40,000 charts"),
        ("How much sun does basil need?", "basil#0", "six hours of sun"),
        ("Where is Zorblax Aerospace headquartered?", "zorblax#0", "Tromsø"),
    ],
)
async def test_extractive_picks_the_answering_sentence_from_any_passage(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, passages: list[Passage],
    question: str, chunk_id: str, words: str,
) -> None:
    response = await generator_with("extractive", embedder, gate).generate(request(passages, question))
    assert not response.abstained and response.mode == "extractive"
    assert response.citations[0].chunk_id == chunk_id and words in response.citations[0].quote
    assert 1 <= len(response.citations) <= 3
    assert_citations_are_source_spans(response, passages)


@pytest.mark.parametrize("mode", MODES)
async def test_an_off_topic_question_abstains_not_answerable_without_the_llm(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted,
    passages: list[Passage], mode: GeneratorMode,
) -> None:
    model = scripted_model()
    generator = generator_with(mode, embedder, gate, None if mode == "extractive" else model)
    response = await generator.generate(request(passages, OFF_TOPIC_QUESTION))
    assert (response.answer, response.citations, response.abstained, response.abstain_reason, response.mode) == (
        ABSTAIN_MESSAGE, [], True, "not_answerable", None,
    )
    assert response.answerability is not None and 0.0 <= response.answerability < gate.threshold
    assert model.calls == []


async def test_without_a_gate_the_off_topic_question_gets_its_best_sentence(
    embedder: SentenceTransformerEmbedder, passages: list[Passage]
) -> None:
    # The gate, not the extractive scoring, is what abstains.
    response = await generator_with("extractive", embedder, None).generate(request(passages, OFF_TOPIC_QUESTION))
    assert not response.abstained and response.answerability is None and len(response.citations) >= 1


async def test_a_gate_with_a_higher_threshold_abstains_on_the_same_scores(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, passages: list[Passage]
) -> None:
    answered = await generator_with("extractive", embedder, gate).generate(request(passages))
    strict = AnswerabilityGate({**gate.params, "threshold": min(1.0, answered.answerability + 0.001)})
    response = await generator_with("extractive", embedder, strict).generate(request(passages))
    assert (response.abstain_reason, response.answerability) == ("not_answerable", answered.answerability)


async def test_answerability_is_the_gates_probability_on_this_requests_scores(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, passages: list[Passage]
) -> None:
    response = await generator_with("extractive", embedder, gate).generate(request(passages))
    units = build_evidence(passages, max_passages=6, max_passage_chars=1200)
    scored = ExtractiveAnswerer.of(GeneratorSettings(), embedder).answer(FOUNDER_QUESTION, units)
    expected = gate.probability(features_from_answer(scored, [p.score for p in passages], embedder_covers_language=True))
    assert response.answerability == round(expected, 4)
    # Retrieval's confidence is one of the gate's inputs: with a gate that weighs it, the same texts
    # with flat scores are less answerable.
    params = dict(gate.params)
    params["coef"] = [2.0 if name == "top_retrieval_score" else c for name, c in zip(params["features"], params["coef"])]
    weighing = AnswerabilityGate(params)
    flat = [p.model_copy(update={"score": 0.2}) for p in passages]
    confident = await generator_with("extractive", embedder, weighing).generate(request(passages))
    flattened = await generator_with("extractive", embedder, weighing).generate(request(flat))
    assert flattened.answerability < confident.answerability - 0.01


async def test_a_question_in_a_language_the_embedder_is_blind_to_is_gated_without_its_cosines(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, passages: list[Passage], monkeypatch: pytest.MonkeyPatch
) -> None:
    # The same texts, the question's language named by the caller: all-MiniLM-L6-v2 is declared English
    # only (EMBEDDER_LANGUAGES' default), so a Romanian question's cosines are not read.
    english = await generator_with("extractive", embedder, gate).assess(request(passages, language="en"))
    romanian = await generator_with("extractive", embedder, gate).assess(request(passages, language="ro"))
    assert english.features is not None and romanian.features is not None
    assert english.features.embedder_blind == 0.0 and english.features.best_sentence_cosine > 0.3
    assert romanian.features.embedder_blind == 1.0
    assert (romanian.features.best_sentence_cosine, romanian.features.best_passage_cosine) == (0.0, 0.0)
    assert romanian.answerability == round(gate.probability(romanian.features), 4) != english.answerability
    # Declared multilingual, the same Romanian question is read with its cosines.
    monkeypatch.setenv("EMBEDDER_LANGUAGES", '["*"]')
    seen = await generator_with("extractive", embedder, gate).assess(request(passages, language="ro"))
    assert seen.features is not None and seen.features.embedder_blind == 0.0
    assert seen.features.best_sentence_cosine == english.features.best_sentence_cosine


@pytest.mark.parametrize("mode", MODES)
async def test_no_passages_abstains_at_once(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, mode: GeneratorMode
) -> None:
    model = scripted_model()
    generator = generator_with(mode, embedder, gate, None if mode == "extractive" else model)
    response = await generator.generate(request([]))
    assert response.model_dump() == {
        "answer": ABSTAIN_MESSAGE, "citations": [], "abstained": True, "abstain_reason": "no_passages", "mode": None,
        "answerability": None, "citation_precision": None, "claims_dropped": 0, "repaired": False, "degraded": [], "answer_span": None, "conflict": None,
    }
    assert model.calls == []


async def test_passages_without_a_scorable_sentence_abstain_no_evidence(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted
) -> None:
    model = scripted_model()
    fragments = [Passage(chunk_id="f", doc_id="f", text="Yes.\n| --- | --- |\nSee above.", score=0.9)]
    response = await generator_with("auto", embedder, gate, model).generate(request(fragments))
    assert (response.abstained, response.abstain_reason, response.answerability) == (True, "no_evidence", None)
    assert model.calls == []


async def test_only_the_first_max_passages_are_read(
    embedder: SentenceTransformerEmbedder, passages: list[Passage]
) -> None:
    generator = generator_with("extractive", embedder, None, max_passages=1)
    response = await generator.generate(request(passages, "How much sun does basil need?"))
    assert {c.chunk_id for c in response.citations} == {"zorblax#0"}


async def test_retriever_vectors_are_used_and_change_nothing(
    embedder: SentenceTransformerEmbedder, counting_embedder: CountingEmbedder, gate: AnswerabilityGate,
    passages: list[Passage],
) -> None:
    generator = generator_with("extractive", counting_embedder, gate)
    calls = counting_embedder.calls
    plain = await generator.generate(request(passages))
    assert counting_embedder.batch_sizes == [("queries", 1), ("documents", 7), ("documents", 3)]

    calls.clear()
    query_vector = embedder.encode_queries([FOUNDER_QUESTION])[0].tolist()
    stored = embedder.encode_documents([p.text for p in passages])
    with_vectors = [p.model_copy(update={"embedding": vector.tolist()}) for p, vector in zip(passages, stored)]
    reused = await generator.generate(request(with_vectors, query_embedding=query_vector))
    assert counting_embedder.batch_sizes == [("documents", 7)]  # only the sentences are embedded
    assert (reused.answer, reused.citations, reused.abstained) == (plain.answer, plain.citations, plain.abstained)
    assert reused.answerability == pytest.approx(plain.answerability, abs=1e-3)

    calls.clear()
    wrong_dim = await generator.generate(request(passages, query_embedding=[0.1, 0.2, 0.3]))
    assert counting_embedder.batch_sizes[0] == ("queries", 1)  # a vector of another dimension is ignored, not trusted
    assert wrong_dim.model_dump() == plain.model_dump()


# ------------------------------------------------------------------ the question's language


async def test_a_romanian_question_that_the_passages_do_not_answer_gets_the_romanian_abstention(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, passages: list[Passage]
) -> None:
    # No language in the request: the generator names it from the query.
    response = await generator_with("extractive", embedder, gate).generate(
        request(passages, "Care este capitala statului Peru?")
    )
    assert (response.answer, response.abstained, response.abstain_reason) == (
        "Nu am găsit informația în documente.", True, "not_answerable",
    )


async def test_the_callers_language_is_the_abstentions_and_an_unknown_one_takes_the_default(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate
) -> None:
    generator = generator_with("extractive", embedder, gate)
    # The gateway named the conversation's language: an English-looking query keeps it.
    said = await generator.generate(request([], "Where is it?", language="ro"))
    assert (said.answer, said.abstain_reason) == ("Nu am găsit informația în documente.", "no_passages")
    english = await generator.generate(request([], FOUNDER_QUESTION))
    assert english.answer == ABSTAIN_MESSAGE
    # Nothing tells the language of "ok": RAG_DEFAULT_LANGUAGE's text.
    romanian_default = LanguagePolicy.of(LanguageSettings(default_language="ro"))
    unsure = await generator_with("extractive", embedder, gate, language=romanian_default).generate(request([], "ok"))
    assert unsure.answer == "Nu am găsit informația în documente."
    assert (await generator.generate(request([], "ok"))).answer == ABSTAIN_MESSAGE


def test_a_generative_mode_needs_a_claim_writer(embedder: SentenceTransformerEmbedder) -> None:
    for mode in ("generative", "auto"):
        with pytest.raises(ValueError, match="needs an LLM"):
            AnswerGenerator(
                mode=mode, extractive=ExtractiveAnswerer.of(GeneratorSettings(), embedder), support=ClaimSupport.of(GeneratorSettings(), embedder), writer=None,
                gate=None, max_passages=6, max_passage_chars=1200, language=LanguagePolicy.of(),
            )


# ------------------------------------------------------------------ generative and auto, scripted replies


async def test_supported_claims_are_the_answer_with_their_sentences_as_citations(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply(FOUNDER_CLAIM, HEADQUARTERS_CLAIM))
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert len(model.calls) == 1
    assert response.answer == f"{FOUNDER_CLAIM[0]} [1] {HEADQUARTERS_CLAIM[0]} [2]"
    assert [(c.id, c.quote) for c in response.citations] == [(1, FOUNDER_SENTENCE), (2, HEADQUARTERS_SENTENCE)]
    assert_citations_are_source_spans(response, passages)
    assert (response.abstained, response.mode, response.citation_precision, response.claims_dropped,
            response.repaired, response.degraded) == (False, "generative", 1.0, 0, False, [])
    assert response.answerability is not None and response.answerability >= gate.threshold


async def test_a_claim_citing_several_sentences_cites_each_once(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    both = ("Zorblax Aerospace, based in Tromsø, was founded in 1987 by Ingrid Halvorsen.", ["1.2", "1.1", "1.2"])
    model = scripted_model(claims_reply(both, FOUNDER_CLAIM))
    response = await generator_with("auto", embedder, gate, model).generate(request(passages))
    assert response.mode == "generative"
    assert response.answer == f"{both[0]} [1][2] {FOUNDER_CLAIM[0]} [1]"
    assert [c.quote for c in response.citations] == [FOUNDER_SENTENCE, HEADQUARTERS_SENTENCE]


async def test_the_history_reaches_the_prompt(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply(FOUNDER_CLAIM))
    history = [HistoryTurn(question="Where is Zorblax Aerospace based?", answer="In Tromsø, Norway [1].")]
    await generator_with("generative", embedder, gate, model).generate(request(passages, history=history))
    prompt = model.calls[0][-1].content
    assert "Conversation so far:\nUser: Where is Zorblax Aerospace based?\nAssistant: In Tromsø, Norway [1]." in prompt
    assert prompt.endswith(f"Question: {FOUNDER_QUESTION}") and "[1.2] " + FOUNDER_SENTENCE in prompt


async def test_an_unsupported_claim_is_dropped_and_the_rest_kept(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply(MOON_CLAIM, FOUNDER_CLAIM))
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert response.answer == f"{FOUNDER_CLAIM[0]} [1]" and "Moon" not in response.answer
    assert [c.quote for c in response.citations] == [FOUNDER_SENTENCE]  # the headquarters sentence is not cited
    assert (response.mode, response.claims_dropped, response.citation_precision, response.degraded) == (
        "generative", 1, 0.5, [],
    )


async def test_only_unsupported_claims_abstain_in_generative_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply(MOON_CLAIM))
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert (response.answer, response.citations, response.abstained, response.abstain_reason) == (
        ABSTAIN_MESSAGE, [], True, "no_supported_claim",
    )
    assert (response.claims_dropped, response.citation_precision, response.mode) == (1, 0.0, None)


async def test_only_unsupported_claims_fall_back_to_extraction_in_auto_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply(MOON_CLAIM))
    response = await generator_with("auto", embedder, gate, model).generate(request(passages))
    assert_extractive_founder_answer(response, passages, gate)
    assert "Moon" not in response.answer
    assert (response.claims_dropped, response.citation_precision) == (1, 0.0)
    assert response.degraded == ["generator: extractive answer, none of the LLM's 1 claims was supported"]


async def test_invalid_output_is_repaired_once(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(AIMessage(NOT_JSON), claims_reply(FOUNDER_CLAIM))
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert len(model.calls) == 2
    assert (response.answer, response.mode, response.repaired, response.abstained) == (
        f"{FOUNDER_CLAIM[0]} [1]", "generative", True, False,
    )


async def test_invalid_output_twice_abstains_in_generative_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(AIMessage(NOT_JSON), AIMessage("Ingrid Halvorsen [1.2]"))
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert len(model.calls) == 2
    assert (response.answer, response.citations, response.abstained, response.abstain_reason, response.mode) == (
        ABSTAIN_MESSAGE, [], True, "invalid_output", None,
    )
    assert response.answerability is not None and response.degraded == []


async def test_invalid_output_twice_falls_back_in_auto_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(AIMessage(NOT_JSON), AIMessage("Ingrid Halvorsen [1.2]"))
    response = await generator_with("auto", embedder, gate, model).generate(request(passages))
    assert_extractive_founder_answer(response, passages, gate)
    [degraded] = response.degraded
    assert degraded.startswith("generator: extractive answer, the LLM's reply was invalid (invalid output after repair: not JSON")


async def test_a_cut_off_reply_abstains_without_repair(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply(FOUNDER_CLAIM, finish_reason="length"))
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert len(model.calls) == 1
    assert (response.abstain_reason, response.repaired) == ("invalid_output", False)


async def test_an_empty_claims_list_abstains_in_generative_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply())
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert (response.answer, response.abstained, response.abstain_reason, response.claims_dropped) == (
        ABSTAIN_MESSAGE, True, "model_abstained", 0,
    )
    assert response.citation_precision is None


async def test_an_empty_claims_list_falls_back_in_auto_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply())
    response = await generator_with("auto", embedder, gate, model).generate(request(passages))
    assert_extractive_founder_answer(response, passages, gate)
    assert response.degraded == ["generator: extractive answer, the LLM gave no claim"]


async def test_markers_in_a_claims_text_are_not_left_dangling(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    # The prompt shows "[1.2]" ids; a model that echoes one (or an "[n]" of its own) in the text
    # passes the support check, and the answer then carries a marker no citation backs.
    model = scripted_model(claims_reply(("Ingrid Halvorsen founded Zorblax Aerospace [3].", ["1.2"])))
    response = await generator_with("generative", embedder, gate, model).generate(request(passages))
    assert not response.abstained
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", response.answer)}
    assert markers <= {c.id for c in response.citations}, response.answer


# ------------------------------------------------------------------ LLM down or slow


async def test_a_dead_llm_fails_generative_with_503(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, dead_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    generator = build_answer_generator(GeneratorSettings(mode="generative"), dead_llm_settings, embedder, gate)
    with pytest.raises(DependencyFailed) as raised:
        await generator.generate(request(passages))
    assert (raised.value.stage, raised.value.kind, status_for(raised.value)) == ("llm", "unavailable", 503)
    assert raised.value.message.startswith("llm unavailable:")


async def test_a_dead_llm_falls_back_in_auto_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, dead_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    generator = build_answer_generator(GeneratorSettings(mode="auto"), dead_llm_settings, embedder, gate)
    response = await generator.generate(request(passages))
    assert_extractive_founder_answer(response, passages, gate)
    [degraded] = response.degraded
    assert degraded.startswith("generator: extractive answer, the LLM failed (llm unavailable:")


async def test_a_hung_llm_fails_generative_with_504_at_the_budget(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, hung_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    generator = build_answer_generator(
        GeneratorSettings(mode="generative", llm_timeout_s=1), hung_llm_settings, embedder, gate
    )
    started = time.perf_counter()
    with pytest.raises(DependencyFailed) as raised:
        await generator.generate(request(passages))
    assert time.perf_counter() - started < 4
    assert (status_for(raised.value), raised.value.message) == (504, "llm timed out: no answer within 1s")


async def test_a_hung_llm_falls_back_in_auto_mode_at_the_budget(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, hung_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    generator = build_answer_generator(GeneratorSettings(mode="auto", llm_timeout_s=1), hung_llm_settings, embedder, gate)
    started = time.perf_counter()
    response = await generator.generate(request(passages))
    assert time.perf_counter() - started < 4
    assert_extractive_founder_answer(response, passages, gate)
    assert response.degraded == ["generator: extractive answer, the LLM failed (llm timed out: no answer within 1s)"]


# ------------------------------------------------------------------ the real model


async def test_the_real_model_in_generative_mode_keeps_the_invariants(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    generator = build_answer_generator(GeneratorSettings(mode="generative"), llm_settings, embedder, gate)
    response = await generator.generate(request(passages))
    if response.abstained:
        assert response.abstain_reason in {"model_abstained", "no_supported_claim", "invalid_output"}
        assert (response.answer, response.citations, response.mode) == (ABSTAIN_MESSAGE, [], None)
        return
    assert response.mode == "generative" and response.degraded == []
    assert 1 <= len(response.citations) and response.citation_precision is not None
    assert 0.0 < response.citation_precision <= 1.0
    assert_citations_are_source_spans(response, passages)


async def test_the_real_model_in_auto_mode_always_answers_an_answerable_question(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    generator = build_answer_generator(GeneratorSettings(mode="auto"), llm_settings, embedder, gate)
    response = await generator.generate(request(passages))
    assert not response.abstained and response.mode in {"generative", "extractive"}
    assert_citations_are_source_spans(response, passages)
    if response.mode == "extractive":
        assert response.answer == EXTRACTIVE_FOUNDER_ANSWER and len(response.degraded) == 1
    else:
        assert response.degraded == []


# ------------------------------------------------------------------ stream


def assert_tokens_then_final(events: list[StreamEvent]) -> GenerateResponse:
    assert events and isinstance(events[-1], FinalEvent)
    tokens = events[:-1]
    assert tokens and all(isinstance(e, TokenEvent) and e.text for e in tokens), events
    final = events[-1].response
    assert "".join(e.text for e in tokens) == final.answer  # type: ignore[union-attr]
    return final


STREAM_CASES = [
    # (mode, scripted replies, question, passages?, expected abstain_reason, expected answer mode)
    ("extractive", (), FOUNDER_QUESTION, True, "", "extractive"),
    ("generative", (claims_reply(FOUNDER_CLAIM, HEADQUARTERS_CLAIM),), FOUNDER_QUESTION, True, "", "generative"),
    ("auto", (claims_reply(FOUNDER_CLAIM),), FOUNDER_QUESTION, True, "", "generative"),
    ("auto", (claims_reply(MOON_CLAIM),), FOUNDER_QUESTION, True, "", "extractive"),
    ("auto", (claims_reply(),), FOUNDER_QUESTION, True, "", "extractive"),
    ("generative", (claims_reply(MOON_CLAIM),), FOUNDER_QUESTION, True, "no_supported_claim", None),
    ("generative", (claims_reply(),), FOUNDER_QUESTION, True, "model_abstained", None),
    ("generative", (AIMessage(NOT_JSON), AIMessage("no")), FOUNDER_QUESTION, True, "invalid_output", None),
    ("extractive", (), OFF_TOPIC_QUESTION, True, "not_answerable", None),
    ("generative", (), OFF_TOPIC_QUESTION, True, "not_answerable", None),
    ("auto", (), FOUNDER_QUESTION, False, "no_passages", None),
]


@pytest.mark.parametrize(
    ("mode", "replies", "question", "with_passages", "reason", "answer_mode"),
    STREAM_CASES,
    ids=[
        "extractive", "generative", "auto-claims", "auto-unsupported-fallback", "auto-no-claim-fallback",
        "generative-no_supported_claim", "generative-model_abstained", "generative-invalid_output",
        "extractive-not_answerable", "generative-not_answerable", "auto-no_passages",
    ],
)
async def test_streamed_tokens_join_to_the_final_answer(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage],
    mode: GeneratorMode, replies: tuple[AIMessage, ...], question: str, with_passages: bool, reason: str,
    answer_mode: str | None,
) -> None:
    model = scripted_model(*replies)
    generator = generator_with(mode, embedder, gate, None if mode == "extractive" else model)
    req = request(passages if with_passages else [], question)
    final = assert_tokens_then_final(await collect(generator, req))
    assert (final.abstain_reason, final.mode) == (reason, answer_mode)
    assert len(model.calls) == len(replies)  # scripted replies only: the real model was never asked
    # The stream's final response is what generate() returns for the same request.
    model.scripted.extend(replies)
    assert (await generator.generate(req)).model_dump() == final.model_dump()


async def test_a_streamed_answer_comes_one_claim_at_a_time(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, scripted_model: Scripted, passages: list[Passage]
) -> None:
    model = scripted_model(claims_reply(FOUNDER_CLAIM, HEADQUARTERS_CLAIM))
    events = await collect(generator_with("generative", embedder, gate, model), request(passages))
    assert [e.text for e in events if isinstance(e, TokenEvent)] == [
        f"{FOUNDER_CLAIM[0]} [1]", f" {HEADQUARTERS_CLAIM[0]} [2]",
    ]


async def test_a_dead_llm_streams_one_error_event_in_generative_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, dead_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    generator = build_answer_generator(GeneratorSettings(mode="generative"), dead_llm_settings, embedder, gate)
    [event] = await collect(generator, request(passages))
    assert isinstance(event, ErrorEvent) and isinstance(event.error, DependencyFailed)
    assert status_for(event.error) == 503 and event.error.message.startswith("llm unavailable:")


async def test_a_hung_llm_streams_one_error_event_in_generative_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, hung_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    generator = generator_with("generative", embedder, gate, build_chat_model(hung_llm_settings), llm_timeout_s=1)
    started = time.perf_counter()
    [event] = await collect(generator, request(passages))
    assert time.perf_counter() - started < 4
    assert isinstance(event, ErrorEvent) and event.error.message == "llm timed out: no answer within 1s"
    assert status_for(event.error) == 504


async def test_a_dead_llm_streams_the_fallback_in_auto_mode(
    embedder: SentenceTransformerEmbedder, gate: AnswerabilityGate, dead_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    generator = build_answer_generator(GeneratorSettings(mode="auto"), dead_llm_settings, embedder, gate)
    final = assert_tokens_then_final(await collect(generator, request(passages)))
    assert final.answer == EXTRACTIVE_FOUNDER_ANSWER and len(final.degraded) == 1
