from __future__ import annotations

import rag_retriever.chunking as chunking
from rag_common.sentences import sentence_spans


def units(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text)]


def test_sentences_split_after_final_punctuation_with_trimmed_offsets() -> None:
    text = "  First one. Second one!  Third?\tFourth… fifth"
    spans = sentence_spans(text)
    assert [text[s:e] for s, e in spans] == ["First one.", "Second one!", "Third?", "Fourth…", "fifth"]
    assert spans[0] == (2, 12)


def test_closing_quote_or_bracket_stays_with_its_sentence() -> None:
    assert units('He said "stop." Then left. (It rained.) Done') == ['He said "stop."', "Then left.", "(It rained.)", "Done"]


def test_abbreviation_free_text_without_punctuation_is_one_unit() -> None:
    assert units("version 2.5 of the API is live") == ["version 2.5 of the API is live"]


def test_line_break_is_a_boundary_so_each_table_row_is_one_unit() -> None:
    table = "| Store | Key |\n|---|---|\n| Redis | rag:conversation:{id} |\n| Postgres | Stores turns. Keys expire. |"
    assert units(table) == [
        "| Store | Key |",
        "|---|---|",
        "| Redis | rag:conversation:{id} |",
        "| Postgres | Stores turns. Keys expire. |",
    ]
    assert units("# Heading\n- item one. Still one? No\n\n  - item two  ") == [
        "# Heading",
        "- item one.",
        "Still one?",
        "No",
        "- item two",
    ]


def test_blank_text_has_no_units() -> None:
    assert sentence_spans("") == []
    assert sentence_spans(" \n\n\t ") == []


def test_the_chunker_uses_the_shared_splitter() -> None:
    assert chunking.sentence_spans is sentence_spans
    assert not hasattr(chunking, "_unit_spans")


def test_a_wrapped_line_continues_its_sentence_but_blocks_still_end_it() -> None:
    text = (
        "# Conversation memory\nKey `rag:conversation:{id}` holds a Redis list of `Turn` JSON, trimmed\n"
        "to the turn limit. It expires after a week.\n- a bullet that wraps\n  onto two lines\n\n"
        "| a | b |\n| x. y | z |\nAfter the table.\fNext page."
    )
    units = [text[a:b] for a, b in sentence_spans(text)]
    assert units == [
        "# Conversation memory",
        "Key `rag:conversation:{id}` holds a Redis list of `Turn` JSON, trimmed\nto the turn limit.",
        "It expires after a week.",
        "- a bullet that wraps\n  onto two lines",
        "| a | b |",
        "| x. y | z |",
        "After the table.",
        "Next page.",
    ]
