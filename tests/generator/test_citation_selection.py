"""Citation validation and the answer assembled from a model reply: pure functions, no model."""

from __future__ import annotations

import json

from rag_common.schemas import Passage
from rag_generator.answer_generator import ABSTAIN_MESSAGE, answer_from_model_output
from rag_generator.citation_selection import select_citations, strip_unbacked_markers
from rag_generator.llm_response import LLMCitation, ResponseLimits


def _sources(passages: list[Passage]) -> dict[int, Passage]:
    return dict(enumerate(passages, start=1))


def test_unknown_source_ids_are_dropped(passages: list[Passage]) -> None:
    cited = select_citations(
        [LLMCitation(source_id=7, quote="x"), LLMCitation(source_id=2, quote="holds 40,000 charts"), LLMCitation(source_id=0, quote="y")],
        _sources(passages),
    )
    assert [(c.id, c.chunk_id) for c in cited] == [(2, "quillfeather#0")]


def test_citation_carries_the_cited_passage(passages: list[Passage]) -> None:
    (citation,) = select_citations([LLMCitation(source_id=2, quote="  holds   40,000 charts ")], _sources(passages))
    assert citation.model_dump() == {
        "id": 2,
        "source": "handbook/quillfeather.md",
        "title": "Quillfeather Library",
        "page": 3,
        "chunk_id": "quillfeather#0",
        "score": 0.55,
        "quote": "holds 40,000 charts",
    }


def test_duplicates_are_merged_keeping_model_order(passages: list[Passage]) -> None:
    cited = select_citations(
        [
            LLMCitation(source_id=3, quote=""),
            LLMCitation(source_id=1, quote="founded in 1987"),
            LLMCitation(source_id=3, quote="six hours of sun"),
            LLMCitation(source_id=1, quote="Tromsø"),
        ],
        _sources(passages),
    )
    assert [(c.id, c.quote) for c in cited] == [(3, "six hours of sun"), (1, "founded in 1987")]


def test_citations_are_capped(passages: list[Passage]) -> None:
    cited = select_citations([LLMCitation(source_id=n, quote="q") for n in (1, 2, 3)], _sources(passages), max_citations=2)
    assert [c.id for c in cited] == [1, 2]


def test_no_valid_citation_left_means_abstain(passages: list[Passage]) -> None:
    reply = {"answer": "It was founded in 1987 [5].", "citations": [{"source_id": 5, "quote": "1987"}], "abstained": False}
    response = answer_from_model_output(reply, _sources(passages))
    assert (response.abstained, response.abstain_reason, response.answer, response.citations) == (
        True, "no_valid_citation", ABSTAIN_MESSAGE, [],
    )


def test_valid_reply_keeps_only_backed_markers(passages: list[Passage]) -> None:
    reply = {
        "answer": "Zorblax was founded in 1987 [1] in Norway [4].",
        "citations": [{"source_id": 1, "quote": "founded in 1987"}, {"source_id": 4, "quote": "Norway"}],
        "abstained": False,
    }
    response = answer_from_model_output(json.dumps(reply), _sources(passages))
    assert not response.abstained and response.abstain_reason == ""
    assert response.answer == "Zorblax was founded in 1987 [1] in Norway."
    assert [c.chunk_id for c in response.citations] == ["zorblax#0"]


def test_model_abstention_wins_over_its_citations(passages: list[Passage]) -> None:
    reply = {"answer": "Not in the sources.", "citations": [{"source_id": 1, "quote": "x"}], "abstained": True}
    response = answer_from_model_output(reply, _sources(passages))
    assert (response.abstained, response.abstain_reason, response.answer) == (True, "model_abstained", ABSTAIN_MESSAGE)


def test_invalid_json_string_abstains(passages: list[Passage]) -> None:
    response = answer_from_model_output('{"answer": "Zorblax was founded', _sources(passages))
    assert (response.abstained, response.abstain_reason, response.answer) == (True, "invalid_output", ABSTAIN_MESSAGE)


def test_malformed_or_out_of_bounds_replies_abstain(passages: list[Passage]) -> None:
    sources = _sources(passages)
    limits = ResponseLimits(answer_max_chars=20, max_citations=1)
    one_cite = [{"source_id": 1, "quote": "q"}]
    bad_replies = [
        None,
        "[1, 2]",
        {"answer": "x", "abstained": False},  # citations missing
        {"answer": "x", "citations": one_cite, "abstained": "maybe"},
        {"answer": "x", "citations": one_cite, "abstained": False, "confidence": 1},
        {"answer": "x" * 21, "citations": one_cite, "abstained": False},
        {"answer": "x", "citations": one_cite * 2, "abstained": False},
        {"answer": "x", "citations": [{"source_id": 1, "quote": "q" * 301}], "abstained": False},
        {"answer": "   ", "citations": one_cite, "abstained": False},
    ]
    for reply in bad_replies:
        response = answer_from_model_output(reply, sources, limits)
        assert (response.abstained, response.abstain_reason) == (True, "invalid_output"), reply


def test_strip_unbacked_markers() -> None:
    assert strip_unbacked_markers("A [1]. B [2][3]. C [12].", {1, 3}) == "A [1]. B[3]. C."
