"""How the chunker reads a document's layout: PDF pages (``\\f``), Markdown-like headings (Markdown,
HTML) and tables as hard boundaries for packing and overlap."""

from __future__ import annotations

from rag_retriever.chunking import Chunker
from rag_retriever.records import SourceDocument
from retriever_builders import settings_chunker

SENTENCE = "The pump on page {page} runs at {rpm} rpm and moves clean water through the booster set."


def page_text(page: int, sentences: int) -> str:
    return " ".join(SENTENCE.format(page=page, rpm=1000 + i) for i in range(sentences))


def test_pdf_chunks_never_span_two_pages_and_carry_the_page_number(tokenizer):
    pages = [page_text(1, 12), "", page_text(3, 2), page_text(4, 12)]  # page 2 has no text
    document = SourceDocument("report.pdf", "\f".join(pages), metadata={"content_type": "application/pdf"})
    chunks = Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=20).chunk_document(document)
    assert {chunk.page for chunk in chunks} == {1, 3, 4}
    for chunk in chunks:
        assert f"page {chunk.page} " in chunk.text
        assert all(f"page {other} " not in chunk.text for other in {1, 3, 4} - {chunk.page})
        assert tokenizer.count(chunk.text) <= 60
    assert [chunk.page for chunk in chunks] == sorted(chunk.page for chunk in chunks)


def test_form_feeds_mean_pages_only_for_pdf(tokenizer):
    document = SourceDocument("notes.txt", "First part.\fSecond part.")
    [chunk] = settings_chunker(tokenizer).chunk_document(document)
    assert chunk.page is None


def test_html_documents_are_chunked_along_their_headings(tokenizer):
    text = "# Guide\n\nIntro text.\n\n## Setup\n\nInstall it."
    document = SourceDocument("guide.html", text, metadata={"content_type": "text/html"})
    chunks = settings_chunker(tokenizer).chunk_document(document)
    assert [(chunk.section_path, chunk.text) for chunk in chunks] == [
        (["Guide"], "Intro text."),
        (["Guide", "Setup"], "Install it."),
    ]


def test_overlap_does_not_carry_prose_across_a_table(tokenizer):
    before = " ".join(f"Sentence {i} comes before the table." for i in range(3))
    after = " ".join(f"Sentence {i} comes after the table." for i in range(3))
    text = f"{before}\n\n| a | b |\n| --- | --- |\n| 1 | 2 |\n\n{after}"
    document = SourceDocument("t.md", text, metadata={"content_type": "text/markdown"})
    chunks = Chunker(tokenizer, chunk_tokens=100, chunk_overlap_tokens=40).chunk_document(document)
    assert [chunk.text for chunk in chunks] == [before, "| a | b |\n| --- | --- |\n| 1 | 2 |", after]
    assert [chunk.table_id for chunk in chunks] == [None, "t.md:t0", None]
