"""Tables: Markdown rendering, finding them in text, and chunking them whole or by rows under the header."""

from __future__ import annotations

import pytest

from rag_retriever.chunking import Chunker
from rag_retriever.records import SourceDocument
from rag_retriever.tables import Block, markdown_table, split_cells, split_tables
from retriever_sample_files import big_table_markdown
from retriever_builders import settings_chunker

HEADER = "| Part number | Description | Price | Stock |\n| --- | --- | --- | --- |"


def test_markdown_table_escapes_pipes_collapses_whitespace_and_drops_empty_rows_and_columns():
    rows = [
        ["Name", None, "Note"],
        ["a|b", "", "two\nlines  here"],
        [None, None, None],
        ["short"],
    ]
    assert markdown_table(rows) == (
        "| Name | Note |\n"
        "| --- | --- |\n"
        "| a\\|b | two lines here |\n"
        "| short |  |"
    )
    assert markdown_table([[None, ""], []]) == ""


def test_split_cells_honours_escaped_pipes_and_optional_outer_pipes():
    assert split_cells("| a\\|b | c |") == ["a\\|b", "c"]
    assert split_cells("a | b") == ["a", "b"]


def test_split_tables_finds_pipe_tables_but_not_inside_code_fences():
    text = (
        "Intro line.\n"
        "| a | b |\n|---|:-:|\n| 1 | 2 |\n| 3 | 4 |\n"
        "After the table.\n\n"
        "```\n| x | y |\n|---|---|\n| 5 | 6 |\n```\n"
        "a | b\n--|--\n7 | 8\n"
    )
    blocks = split_tables(text)
    assert [block.is_table for block in blocks] == [False, True, False, True]
    assert blocks[0].text == "Intro line."
    assert blocks[1] == Block(
        "| a | b |\n|---|:-:|\n| 1 | 2 |\n| 3 | 4 |", True, "| a | b |\n|---|:-:|", ("| 1 | 2 |", "| 3 | 4 |")
    )
    assert blocks[2].text.startswith("After the table.") and "| 5 | 6 |" in blocks[2].text
    assert blocks[3].rows == ("7 | 8",)


def test_a_header_row_without_a_matching_delimiter_row_is_prose():
    blocks = split_tables("| a | b | c |\n|---|---|\n| 1 | 2 | 3 |")
    assert [block.is_table for block in blocks] == [False]


def markdown_chunks(tokenizer, text, chunk_tokens, overlap=10, doc_id="catalogue.md"):
    document = SourceDocument(doc_id, text, metadata={"content_type": "text/markdown"})
    return Chunker(tokenizer, chunk_tokens=chunk_tokens, chunk_overlap_tokens=overlap).chunk_document(document)


def test_a_table_that_fits_is_one_chunk_apart_from_the_prose(tokenizer):
    text = big_table_markdown(rows=3)
    chunks = markdown_chunks(tokenizer, text, chunk_tokens=200)
    assert [(chunk.section_path, chunk.table_id) for chunk in chunks] == [
        (["Parts catalogue"], None),
        (["Parts catalogue", "Spare parts"], "catalogue.md:t0"),
        (["Parts catalogue", "Ordering"], None),
    ]
    assert chunks[1].text.startswith(HEADER) and chunks[1].text.count("\n") == 4


def test_a_big_table_is_split_by_rows_with_the_header_repeated_and_one_table_id(tokenizer):
    text = big_table_markdown(rows=60)
    budget = 60
    rows = [line for line in text.splitlines() if line.startswith("| SP-")]
    chunks = markdown_chunks(tokenizer, text, chunk_tokens=budget)
    parts = [chunk for chunk in chunks if chunk.table_id is not None]

    assert len(parts) > 5
    assert {part.table_id for part in parts} == {"catalogue.md:t0"}
    assert all(part.section_path == ["Parts catalogue", "Spare parts"] for part in parts)
    assert all(tokenizer.count(chunk.text) <= budget for chunk in chunks)
    # Every part: the header and delimiter rows, then whole rows only; together all rows once, in order.
    seen = []
    for part in parts:
        assert part.text.startswith(HEADER + "\n")
        body = part.text[len(HEADER) + 1 :].splitlines()
        assert body and all(line in rows for line in body)
        seen.extend(body)
    assert seen == rows
    # The prose around the table is in its own chunks, with no table_id.
    prose = [chunk for chunk in chunks if chunk.table_id is None]
    assert [chunk.section_path for chunk in prose] == [["Parts catalogue"], ["Parts catalogue", "Ordering"]]
    assert not any("|" in chunk.text for chunk in prose)
    # Parts are consecutive chunks, in row order.
    indexes = [part.chunk_index for part in parts]
    assert indexes == list(range(indexes[0], indexes[0] + len(parts)))


def test_each_table_of_a_document_gets_its_own_id(tokenizer):
    table = "| k | v |\n| --- | --- |\n| a | 1 |"
    text = f"# One\n\n{table}\n\n# Two\n\nSome words.\n\n{table}\n"
    chunks = markdown_chunks(tokenizer, text, chunk_tokens=100)
    assert [chunk.table_id for chunk in chunks] == ["catalogue.md:t0", None, "catalogue.md:t1"]
    assert len({chunk.chunk_id for chunk in chunks}) == 3


def test_a_row_larger_than_the_budget_is_the_only_row_that_is_cut(tokenizer):
    long_cell = " ".join(f"word{i}" for i in range(150))
    rows = ["| SP-0001 | short row | 1.00 | 1 |", f"| SP-0002 | {long_cell} | 2.00 | 2 |", "| SP-0003 | short | 3.00 | 3 |"]
    text = HEADER + "\n" + "\n".join(rows)
    budget = 80  # the header (27 tokens: every | and - is one) is under half of it, so it is repeated
    chunks = markdown_chunks(tokenizer, text, chunk_tokens=budget)
    assert all(tokenizer.count(chunk.text) <= budget for chunk in chunks)
    assert all(chunk.text.startswith(HEADER + "\n") for chunk in chunks)
    bodies = [chunk.text[len(HEADER) + 1 :] for chunk in chunks]
    assert bodies[0] == rows[0] and bodies[-1] == rows[2]
    pieces = bodies[1:-1]
    assert len(pieces) > 1
    assert " ".join(pieces) == rows[1]  # cut at spaces, nothing lost
    assert len({chunk.table_id for chunk in chunks}) == 1


def test_a_header_too_large_to_repeat_is_not_repeated(tokenizer):
    columns = [f"Measured quantity number {i} in units" for i in range(6)]
    header = "| " + " | ".join(columns) + " |\n|" + " --- |" * len(columns)
    rows = ["| " + " | ".join(str(i * 10 + j) for j in range(len(columns))) + " |" for i in range(30)]
    text = header + "\n" + "\n".join(rows)
    budget = 60
    assert tokenizer.count(header) > budget // 2
    chunks = markdown_chunks(tokenizer, text, chunk_tokens=budget)
    assert len(chunks) > 1 and len({chunk.table_id for chunk in chunks}) == 1
    assert all(tokenizer.count(chunk.text) <= budget for chunk in chunks)
    assert chunks[0].text.startswith(header.splitlines()[0])
    assert not any(chunk.text.startswith("| Measured") for chunk in chunks[1:])
    assert "\n".join(chunk.text for chunk in chunks) == text


@pytest.mark.parametrize("content_type", ["text/plain", None])
def test_plain_text_tables_are_kept_whole_like_markdown_ones(tokenizer, content_type):
    # Plain text (also a JSON document without content_type) is read like Markdown (issue 12), so a
    # pipe table in it is a table, as in the same text uploaded as .md.
    metadata = {"content_type": content_type} if content_type else {}
    text = "| a | b |\n| --- | --- |\n| 1 | 2 |"
    [chunk] = settings_chunker(tokenizer).chunk_document(SourceDocument("notes.txt", text, metadata=metadata))
    assert (chunk.text, chunk.table_id) == (text, "notes.txt:t0")


def test_tables_in_other_stated_content_types_are_left_as_text(tokenizer):
    metadata = {"content_type": "text/x-log"}
    document = SourceDocument("notes.log", "| a | b |\n| --- | --- |\n| 1 | 2 |", metadata=metadata)
    [chunk] = settings_chunker(tokenizer).chunk_document(document)
    assert chunk.table_id is None
