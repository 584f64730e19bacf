"""Uploaded files → documents, or a per-file reason why not."""

from __future__ import annotations

import json

import pytest

from rag_retriever.parsers import UploadRejected, parse_upload

LIMIT = 1024


def test_text_file_becomes_one_document_named_after_the_file():
    [document] = parse_upload("notes/ops-notes.txt", "Restart the queue.\n".encode(), LIMIT)
    assert document.id == "ops-notes.txt"
    assert document.source == "ops-notes.txt"
    assert document.title == "ops-notes"
    assert document.metadata == {"content_type": "text/plain"}


@pytest.mark.parametrize("name", ["guide.md", "GUIDE.MARKDOWN"])
def test_markdown_file_takes_its_title_from_the_first_heading(name):
    [document] = parse_upload(name, "\ufeff# Runbook\n\nStep one.".encode(), LIMIT)
    assert document.id == name
    assert document.title == "Runbook"
    assert document.metadata["content_type"] == "text/markdown"


def test_json_file_with_one_document_or_a_list():
    one = {"id": "faq-1", "text": "Answer.", "title": "FAQ", "metadata": {"tenant": "acme"}}
    [document] = parse_upload("faq.json", json.dumps(one).encode(), LIMIT)
    assert (document.id, document.source, document.metadata) == ("faq-1", "faq.json", {"tenant": "acme"})

    many = [{"text": "First."}, {"text": "Second.", "source": "wiki"}]
    documents = parse_upload("batch.json", json.dumps(many).encode(), LIMIT)
    assert [(d.id, d.source) for d in documents] == [(None, "batch.json"), (None, "wiki")]


def test_jsonl_file_has_one_document_per_line():
    lines = "\n".join(json.dumps({"id": f"d{i}", "text": f"Text {i}."}) for i in range(3)) + "\n\n"
    assert [d.id for d in parse_upload("docs.jsonl", lines.encode(), LIMIT)] == ["d0", "d1", "d2"]


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("report.pdf", b"%PDF-1.7", "corrupt PDF"),
        ("photo.png", b"\x89PNG\r\n", "unsupported file type '.png'"),
        ("README", b"text", "unsupported file type '(none)'"),
        ("", b"text", "no name"),
        ("empty.txt", b"", "empty"),
        ("blank.md", b"  \n\n ", "empty"),
        ("latin1.txt", "café".encode("latin-1"), "not UTF-8"),
        ("nul.txt", b"abc\x00def", "binary"),
        ("big.txt", b"x" * (LIMIT + 1), "larger than the upload limit"),
        ("broken.json", b'{"text": ', "invalid JSON"),
        ("scalar.json", b"42", "document object or a list"),
        ("emptylist.json", b"[]", "no documents"),
        ("blank-text.json", b'[{"text": "ok"}, {"text": "  "}]', "item 1: text: Value error, document text is empty"),
        ("extra.json", b'{"text": "ok", "author": "me"}', "author: Extra inputs are not permitted"),
        ("lines.jsonl", b'{"text": "ok"}\n{"text": oops}\n', "line 2: invalid JSON"),
        ("list.jsonl", b'["text"]\n', "line 1: expected a JSON object"),
    ],
)
def test_unreadable_files_are_rejected_with_a_reason(name, data, reason):
    with pytest.raises(UploadRejected) as error:
        parse_upload(name, data, LIMIT)
    assert reason in str(error.value)
