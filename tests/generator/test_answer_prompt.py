"""Prompt and response-schema construction: pure functions, no model."""

from __future__ import annotations

from rag_common.schemas import HistoryTurn, Passage
from rag_generator.answer_prompt import build_answer_messages, number_sources, source_header
from rag_generator.answer_schema import build_answer_schema


def test_sources_are_numbered_capped_and_cut(passages: list[Passage]) -> None:
    sources = number_sources(passages, max_passages=2)
    assert {n: p.chunk_id for n, p in sources.items()} == {1: "zorblax#0", 2: "quillfeather#0"}
    question = build_answer_messages(
        "Who founded Zorblax?", sources, [HistoryTurn(question="Where is Zorblax?", answer="Norway.")], max_passage_chars=30
    )[-1].content
    assert "[1] Zorblax Aerospace — Company > History\nZorblax Aerospace is a maker o\n" in question
    assert "[2] Quillfeather Library — page 3\n" in question
    assert "basil" not in question.lower()
    assert "User: Where is Zorblax?\nAssistant: Norway." in question
    assert question.endswith("Question: Who founded Zorblax?")


def test_header_falls_back_to_source_name() -> None:
    passage = Passage(chunk_id="c", doc_id="d", text="t", source="notes.md")
    assert source_header(4, passage) == "[4] notes.md"


def test_schema_admits_only_the_shown_source_numbers() -> None:
    schema = build_answer_schema([3, 1, 2], answer_max_chars=1000, max_citations=4)["schema"]
    citations = schema["properties"]["citations"]
    assert citations["maxItems"] == 4
    assert citations["items"]["properties"]["source_id"] == {"type": "integer", "enum": [1, 2, 3]}
    assert schema["properties"]["answer"]["maxLength"] == 1000
    assert schema["required"] == ["answer", "citations", "abstained"]
