"""Quote verification on hand-made passages: pure functions, no model."""

from __future__ import annotations

import pytest

from rag_common.schemas import Passage
from rag_generator.answer_generator import ABSTAIN_MESSAGE, answer_from_model_output
from rag_generator.citation_verifier import CitationVerifier
from rag_generator.llm_response import LLMCitation
from rag_generator.quote_normalisation import normalise, normalise_quote
from rag_generator.settings import GeneratorSettings

SOURCES = {
    1: Passage(
        chunk_id="zorblax#0",
        doc_id="zorblax",
        title="Zorblax Aerospace",
        text="Zorblax Aerospace is a maker of small satellite launchers headquartered in Tromsø, Norway.\n"
        "The company was founded in 1987   by the engineer Ingrid Halvorsen.",
    ),
    2: Passage(
        chunk_id="style#0",
        doc_id="style",
        title="Style guide",
        text="Write \u201cshort\u201d sentences \u2014 one idea each. Don\u2019t use jargon.",
    ),
}


def check(quote: str, source_id: int = 1, threshold: float = 90.0):
    return CitationVerifier(threshold).check(LLMCitation(source_id=source_id, quote=quote), SOURCES)


def test_exact_substring_is_verified_with_the_passage_words() -> None:
    result = check("founded in 1987 by the engineer")
    assert (result.verified, result.verdict, result.score) == (True, "exact", 100.0)
    assert result.matched_text == "founded in 1987 by the engineer"


def test_whitespace_and_case_are_normalised() -> None:
    result = check("  THE COMPANY was\n founded   IN 1987 ")
    assert (result.verdict, result.matched_text) == ("exact", "The company was founded in 1987")
    # across the passage's own line break too
    assert check("launchers headquartered in tromsø, norway. the company").verdict == "exact"


def test_unicode_quotes_and_dashes_are_normalised() -> None:
    result = check('write "short" sentences - one idea each. don\'t use jargon', source_id=2)
    assert result.verdict == "exact"
    assert result.matched_text == "Write \u201cshort\u201d sentences \u2014 one idea each. Don\u2019t use jargon"


def test_enclosing_quotation_marks_are_ignored() -> None:
    assert check("\u201cfounded in 1987\u201d").verdict == "exact"
    assert check('"founded in 1987"').verdict == "exact"


def test_fuzzy_match_above_threshold_is_verified() -> None:
    # One word changed ("an engineer" for "the engineer"): not a substring, close enough.
    result = check("founded in 1987 by an engineer Ingrid Halvorsen")
    assert result.verdict == "fuzzy" and 90.0 <= result.score < 100.0
    assert "Ingrid Halvorsen" in result.matched_text and result.matched_text in " ".join(SOURCES[1].text.split())


def test_fuzzy_match_below_threshold_is_rejected_and_the_threshold_is_configurable() -> None:
    paraphrase = "Zorblax was started by Ingrid Halvorsen"
    rejected = check(paraphrase)
    assert (rejected.verified, rejected.verdict, rejected.matched_text) == (False, "not_found", "")
    assert 0.0 < rejected.score < 90.0
    assert check(paraphrase, threshold=rejected.score).verdict == "fuzzy"
    assert check(paraphrase, threshold=rejected.score + 0.5).verdict == "not_found"


def test_threshold_100_accepts_only_exact_matches() -> None:
    assert check("founded in 1987 by an engineer Ingrid Halvorsen", threshold=100.0).verdict == "not_found"
    assert check("FOUNDED in 1987", threshold=100.0).verdict == "exact"


def test_wrong_source_id_is_rejected_even_with_a_true_quote() -> None:
    assert check("founded in 1987", source_id=2).verdict == "not_found"
    assert check("founded in 1987", source_id=3).verdict == "unknown_source"
    assert check("founded in 1987", source_id=0).verdict == "unknown_source"


@pytest.mark.parametrize("quote", ["", "   ", "\n", '""', "...", "\u201c\u201d"])
def test_empty_quote_is_unsupported(quote: str) -> None:
    assert (check(quote).verified, check(quote).verdict) == (False, "empty_quote")


def test_quote_running_on_past_its_source_is_rejected() -> None:
    # The whole passage followed by invented text: partial_ratio alone would score 100.
    run_on = SOURCES[2].text + " Use long words and the passive voice."
    assert check(run_on, source_id=2).verdict == "not_found"


def test_precision_is_verified_over_produced() -> None:
    verifier = CitationVerifier()
    citations = [
        LLMCitation(source_id=1, quote="founded in 1987"),
        LLMCitation(source_id=1, quote="founded in 1999 by a committee"),
        LLMCitation(source_id=2, quote="one idea each"),
        LLMCitation(source_id=9, quote="one idea each"),
    ]
    verification = verifier.verify(citations, SOURCES)
    assert [c.verdict for c in verification.checks] == ["exact", "not_found", "exact", "unknown_source"]
    assert verification.citation_precision == 0.5
    assert [(c.source_id, c.quote) for c in verification.verified] == [(1, "founded in 1987"), (2, "one idea each")]
    assert verifier.verify([], SOURCES).citation_precision is None
    assert verifier.verify(citations[:1], SOURCES).citation_precision == 1.0


def test_invalid_threshold_is_refused() -> None:
    with pytest.raises(ValueError):
        CitationVerifier(101.0)
    assert GeneratorSettings().quote_match_threshold == 90.0


def test_normalisation_helpers() -> None:
    assert normalise("  A\u00a0B\t\u2013 \u201cC\u201d  ") == 'a b - "c"'
    assert normalise_quote(" \u2018Tromsø\u2019 ") == "tromsø"
    assert normalise_quote(" ... ") == ""


# ---------------------------------------------------------------- wired into the response


def test_unsupported_citations_are_removed_with_their_markers() -> None:
    reply = {
        "answer": "Zorblax was founded in 1987 [1] and makes rockets [2].",
        "citations": [{"source_id": 1, "quote": "founded in 1987"}, {"source_id": 2, "quote": "makes rockets"}],
        "abstained": False,
    }
    response = answer_from_model_output(reply, SOURCES)
    assert (response.abstained, response.citation_precision) == (False, 0.5)
    assert response.answer == "Zorblax was founded in 1987 [1] and makes rockets."
    assert [(c.id, c.quote) for c in response.citations] == [(1, "founded in 1987")]


def test_answer_with_no_supported_citation_abstains() -> None:
    reply = {
        "answer": "Zorblax makes rockets [1].",
        "citations": [{"source_id": 1, "quote": "Zorblax makes big rockets for Mars"}, {"source_id": 2, "quote": ""}],
        "abstained": False,
    }
    response = answer_from_model_output(reply, SOURCES)
    assert response.model_dump() == {
        "answer": ABSTAIN_MESSAGE, "citations": [], "abstained": True, "abstain_reason": "no_valid_citation",
        "citation_precision": 0.0, "repaired": False,
    }


def test_answer_citing_nothing_abstains_with_no_precision() -> None:
    response = answer_from_model_output({"answer": "Zorblax makes rockets.", "citations": [], "abstained": False}, SOURCES)
    assert (response.abstain_reason, response.citation_precision) == ("no_valid_citation", None)


def test_a_verified_quote_longer_than_the_schema_bound_is_cut_not_an_error() -> None:
    """A fuzzy match can cover more passage text than QUOTE_MAX_CHARS; the answer must survive it."""
    from rag_generator.citation_verifier import CitationCheck, Verification
    from rag_generator.llm_response import QUOTE_MAX_CHARS, LLMCitation

    long_span = " ".join(f"word{i}" for i in range(60))  # ~400 characters of passage text
    check = CitationCheck(LLMCitation(source_id=1, quote="word1 word2"), "fuzzy", 95.0, long_span)
    (citation,) = Verification([check]).verified
    assert len(citation.quote) <= QUOTE_MAX_CHARS
    assert citation.quote.endswith("…") and long_span.startswith(citation.quote[:-1])
