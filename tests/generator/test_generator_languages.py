"""The generator reads words and sentences in the passage's and the question's language."""

from __future__ import annotations

from rag_common.schemas import Passage
from rag_generator.claim_support import Claim, ClaimSupport
from rag_generator.evidence import build_evidence
from rag_generator.extractive_answerer import ExtractiveAnswerer
from rag_generator.settings import GeneratorSettings

from .conftest import CountingEmbedder

REGULATION = (
    "Conform art. 5 alin. (2) lit. b) din Legea nr. 1/2011, conversațiile sunt stocate în Redis. "
    "Unde sunt ei și ce fac dacă nu vin? Nimeni nu știe."
)


def romanian(language: str | None) -> Passage:
    return Passage(chunk_id="c1", doc_id="d1", text=REGULATION, language=language)


def test_evidence_units_are_cut_in_the_passage_language() -> None:
    units = build_evidence([romanian("ro")], max_passages=1, max_passage_chars=2000)
    assert [unit.text for unit in units] == [
        "Conform art. 5 alin. (2) lit. b) din Legea nr. 1/2011, conversațiile sunt stocate în Redis.",
        "Unde sunt ei și ce fac dacă nu vin?",
        "Nimeni nu știe.",
    ]
    assert len(build_evidence([romanian(None)], max_passages=1, max_passage_chars=2000)) > 3


def test_claim_support_reads_the_claim_and_its_evidence_in_their_languages(counting_embedder: CountingEmbedder) -> None:
    support = ClaimSupport.of(GeneratorSettings(), counting_embedder)
    units = build_evidence([romanian("ro")], max_passages=1, max_passage_chars=2000)
    claim = "Unde sunt stocate conversațiile? În Redis."
    # In Romanian "unde", "sunt" and "în" are function words: every content word of the claim is cited.
    assert support.score_claims([Claim(claim, units[:1], language="ro")])[0].lexical == 1.0
    # Read as English, "unde" counts as a content word the cited sentence lacks.
    assert support.score_claims([Claim(claim, [units[0].text])])[0].lexical < 1.0


def test_the_extractive_answerer_reads_the_query_in_its_language(counting_embedder: CountingEmbedder) -> None:
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder)
    query = "Unde sunt stocate conversațiile?"
    answer = answerer.answer(query, [romanian("ro")], language="ro")
    lexical = {score.unit.index: score.lexical for score in answer.candidates}
    # The question's own function words match nothing: the sentence that stores conversations covers
    # both content words, the question-like sentence none.
    assert lexical[1] == 1.0 and lexical[2] == 0.0
    english = {s.unit.index: s.lexical for s in answerer.answer(query, [romanian(None)]).candidates}
    assert max(english.values()) < 1.0
