"""answer_assembly: markers, citations with offsets, and the abstention/answer responses."""

from __future__ import annotations

import pytest

from rag_common.schemas import Citation, Passage
from rag_generator.answer_assembly import AnswerPart, abstention, answered, cite
from rag_generator.evidence import EvidenceUnit, build_evidence, evidence_index

from .conftest import PASSAGES


@pytest.fixture(scope="module")
def units() -> dict[str, EvidenceUnit]:
    return evidence_index(build_evidence(PASSAGES, max_passages=6, max_passage_chars=1200))


def test_markers_are_numbered_in_order_of_first_citation(units: dict[str, EvidenceUnit]) -> None:
    cited = cite([
        AnswerPart("Basil needs sun.", [units["3.1"]]),
        AnswerPart("Halvorsen founded Zorblax.", [units["1.2"], units["3.1"]]),
        AnswerPart("It is in Tromsø.", [units["1.1"]]),
    ])
    assert cited.answer == "Basil needs sun. [1] Halvorsen founded Zorblax. [2][1] It is in Tromsø. [3]"
    assert [(c.id, c.chunk_id, c.quote) for c in cited.citations] == [
        (1, "basil#0", units["3.1"].text),
        (2, "zorblax#0", units["1.2"].text),
        (3, "zorblax#0", units["1.1"].text),
    ]


def test_one_citation_per_distinct_sentence_and_one_marker_per_sentence_in_a_part(
    units: dict[str, EvidenceUnit],
) -> None:
    cited = cite([
        AnswerPart("First.", [units["1.2"], units["1.2"], units["1.1"]]),
        AnswerPart("Second.", [units["1.1"], units["1.2"]]),
    ])
    assert cited.answer == "First. [1][2] Second. [2][1]"
    assert len(cited.citations) == 2
    # Two sentences of one chunk are two citations, each with its own span.
    assert {c.chunk_id for c in cited.citations} == {"zorblax#0"}
    assert [(c.start, c.end) for c in cited.citations] == [
        (units["1.2"].start, units["1.2"].end),
        (units["1.1"].start, units["1.1"].end),
    ]


def test_pieces_join_to_the_answer_one_space_apart(units: dict[str, EvidenceUnit]) -> None:
    cited = cite([
        AnswerPart("  Halvorsen\n founded   Zorblax. ", [units["1.2"]]),
        AnswerPart("No source for this.", []),
        AnswerPart("Basil needs sun.", [units["3.1"]]),
    ])
    assert cited.pieces == ["Halvorsen founded Zorblax. [1]", " No source for this.", " Basil needs sun. [2]"]
    assert "".join(cited.pieces) == cited.answer


def test_no_parts_is_an_empty_answer() -> None:
    cited = cite([])
    assert (cited.pieces, cited.citations, cited.answer) == ([], [], "")


def test_a_citation_is_the_sentence_verbatim_with_its_offsets_and_location() -> None:
    passage = Passage(
        chunk_id="c1", doc_id="d1", title="Guide", source="guide.pdf", page=7, score=0.4,
        section_path=["Part A", "Setup"],
        text="  Intro line here.\nThe  key   lives in Redis under rag:conversation:{id}. Done now.",
    )
    unit = evidence_index(build_evidence([passage], max_passages=1, max_passage_chars=1000))["1.2"]
    [citation] = cite([AnswerPart("It is in Redis.", [unit])]).citations
    assert citation == Citation(
        id=1, source="guide.pdf", title="Guide", page=7, chunk_id="c1", score=0.4,
        quote="The  key   lives in Redis under rag:conversation:{id}.", start=unit.start, end=unit.end,
        section_path=["Part A", "Setup"],
    )
    assert passage.text[citation.start : citation.end] == citation.quote  # whitespace kept in the quote


def test_extracted_sentences_keep_their_words_but_not_their_line_breaks(units: dict[str, EvidenceUnit]) -> None:
    cited = cite([AnswerPart(unit.text, [unit]) for unit in (units["2.1"], units["2.2"])])
    assert cited.answer == f"{units['2.1'].text} [1] {units['2.2'].text} [2]"


def test_abstention() -> None:
    response = abstention("no_supported_claim", language="en", answerability=0.8, citation_precision=0.0, claims_dropped=2,
                          repaired=True, degraded=["x"])
    assert response.model_dump() == {
        "answer": "I could not find this in the documents.", "citations": [], "abstained": True,
        "abstain_reason": "no_supported_claim",
        "mode": None, "answerability": 0.8, "citation_precision": 0.0, "claims_dropped": 2, "repaired": True,
        "degraded": ["x"], "answer_span": None, "conflict": None,
    }
    assert abstention("no_passages", language="ro").model_dump() == {
        "answer": "Nu am găsit informația în documente.", "citations": [], "abstained": True, "abstain_reason": "no_passages",
        "mode": None, "answerability": None, "citation_precision": None, "claims_dropped": 0, "repaired": False,
        "degraded": [], "answer_span": None, "conflict": None,
    }


def test_answered(units: dict[str, EvidenceUnit]) -> None:
    cited = cite([AnswerPart("Halvorsen founded it.", [units["1.2"]])])
    response = answered(cited, "generative", answerability=0.97, citation_precision=0.5, claims_dropped=1,
                        degraded=("y",))
    assert (response.answer, response.citations, response.abstained, response.abstain_reason) == (
        "Halvorsen founded it. [1]", cited.citations, False, "",
    )
    assert (response.mode, response.answerability, response.citation_precision, response.claims_dropped,
            response.repaired, response.degraded) == ("generative", 0.97, 0.5, 1, False, ["y"])
