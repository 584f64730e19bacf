"""The incremental answer-text extractor over a JSON reply fed piece by piece: pure, no model."""

from __future__ import annotations

import json

from rag_generator.answer_text_stream import AnswerTextStream

REPLY = {
    "answer": 'Zorblax was "founded" in 1987 [1].\nIt sits in Troms\u00f8 \u2014 Norway \\ north [2].',
    "citations": [{"source_id": 1, "quote": "answer: not this"}, {"source_id": 2, "quote": "Troms\u00f8"}],
    "abstained": False,
}


def feed_all(pieces: list[str]) -> tuple[AnswerTextStream, list[str]]:
    stream = AnswerTextStream()
    deltas = []
    for piece in pieces:
        delta = stream.feed(piece)
        # At every step, what was sent is a prefix of the true answer.
        assert REPLY["answer"].startswith(stream.text)
        deltas.append(delta)
    return stream, deltas


def test_char_by_char_deltas_rebuild_the_answer_exactly() -> None:
    for text in (json.dumps(REPLY), json.dumps(REPLY, ensure_ascii=False, indent=2)):
        stream, deltas = feed_all(list(text))
        assert "".join(deltas) == REPLY["answer"] == stream.text
        assert stream.raw == text


def test_token_sized_pieces_and_no_json_syntax_in_deltas() -> None:
    text = json.dumps(REPLY)
    stream, deltas = feed_all([text[i : i + 3] for i in range(0, len(text), 3)])
    assert "".join(deltas) == REPLY["answer"]
    assert not any('"answer"' in d or d.startswith("{") for d in deltas)


def test_answer_after_other_keys_is_found() -> None:
    text = json.dumps({"abstained": False, "answer": "Late answer [1]", "citations": []})
    _, deltas = feed_all_free(list(text))
    assert "".join(deltas) == "Late answer [1]"


def test_non_json_text_yields_nothing_and_finish_completes() -> None:
    stream = AnswerTextStream()
    assert [stream.feed(p) for p in ["The answer", " is 42", "."]] == ["", "", ""]
    assert stream.finish("The answer is 42.") == "The answer is 42."
    assert stream.finish("Something else") == ""


def feed_all_free(pieces: list[str]) -> tuple[AnswerTextStream, list[str]]:
    stream = AnswerTextStream()
    return stream, [stream.feed(piece) for piece in pieces]
