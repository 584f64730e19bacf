"""PDF and HTML parsing of real files generated in the test (fpdf2, pypdf, hand-written pages)."""

from __future__ import annotations

import pytest
from fpdf import FPDF

from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import to_source_document
from rag_retriever.parsers import REGISTRY, UploadRejected, parse_upload
from rag_retriever.parsers.html import HtmlParser
from rag_retriever.parsers.pdf import PdfParser
from retriever_sample_files import (
    AFTER_TABLE_TEXT,
    ARTICLE_HTML,
    HTML_BOILERPLATE,
    HTML_TABLE_MARKDOWN,
    PAGE1_TEXT,
    PAGE2_TEXT,
    PDF_TABLE_MARKDOWN,
    SIDEBAR_TABLE_HTML,
    encrypted_pdf,
    manual_pdf,
    scanned_pdf,
)

LIMIT = 5 * 1024 * 1024


def chunks_of(name, data, tokenizer, chunk_tokens=200, overlap=40, content_type=None):
    documents = parse_upload(name, data, LIMIT, content_type)
    chunker = Chunker(tokenizer, chunk_tokens=chunk_tokens, chunk_overlap_tokens=overlap)
    return [chunk for document in documents for chunk in chunker.chunk_document(to_source_document(document))]


# --------------------------------------------------------------------------- PDF


def test_pdf_pages_become_form_feed_separated_text_with_the_table_in_place():
    [document] = parse_upload("manual.pdf", manual_pdf(), LIMIT)
    assert (document.id, document.source, document.title) == ("manual.pdf", "manual.pdf", "Pump maintenance manual")
    assert document.metadata == {"content_type": "application/pdf"}
    page1, page2 = document.text.split("\f")
    assert page1 == PAGE1_TEXT  # wrapped lines joined back into one paragraph
    assert page2 == f"{PAGE2_TEXT}\n\n{PDF_TABLE_MARKDOWN}\n\n{AFTER_TABLE_TEXT}"


def test_pdf_chunks_carry_their_page_and_the_table_is_one_markdown_chunk(tokenizer):
    chunks = chunks_of("manual.pdf", manual_pdf(), tokenizer)
    assert [(chunk.page, chunk.table_id) for chunk in chunks] == [
        (1, None), (2, None), (2, "manual.pdf:t0"), (2, None),
    ]
    assert chunks[0].text == PAGE1_TEXT
    assert chunks[1].text == PAGE2_TEXT
    assert chunks[2].text == PDF_TABLE_MARKDOWN
    assert chunks[3].text == AFTER_TABLE_TEXT
    assert all(chunk.section_path == [] for chunk in chunks)


def test_a_framed_paragraph_in_a_pdf_stays_text():
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, "Intro text before the box.")
    pdf.ln(4)
    pdf.multi_cell(0, 6, "Warning: isolate the power supply before opening the terminal box.", border=1)
    [document] = parse_upload("box.pdf", bytes(pdf.output()), LIMIT)
    assert document.text == "Intro text before the box.\n\nWarning: isolate the power supply before opening the terminal box."


def test_a_pdf_with_an_empty_user_password_is_read():
    [document] = parse_upload("owner-only.pdf", encrypted_pdf(user_password=""), LIMIT)
    assert document.text.split("\f")[0] == PAGE1_TEXT


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda: encrypted_pdf("s3cret"), "encrypted PDF"),
        (scanned_pdf, "no extractable text (scanned?)"),
        (lambda: manual_pdf()[: len(manual_pdf()) // 2], "corrupt PDF"),
        (lambda: b"%PDF-1.7\n" + bytes(range(256)) * 8, "corrupt PDF"),
        (lambda: b"<html>not a pdf at all</html>", "corrupt PDF: no %PDF- header"),
    ],
    ids=["encrypted", "scanned", "truncated", "garbage", "not-a-pdf"],
)
def test_unreadable_pdfs_are_rejected_with_the_reason(make, reason):
    with pytest.raises(UploadRejected) as error:
        parse_upload("report.pdf", make(), LIMIT)
    assert str(error.value).startswith(reason)


# --------------------------------------------------------------------------- HTML


def test_html_keeps_the_article_drops_the_chrome_and_renders_the_table():
    [document] = parse_upload("guide.html", ARTICLE_HTML.encode(), LIMIT)
    assert (document.id, document.title, document.metadata) == (
        "guide.html", "Pump maintenance guide", {"content_type": "text/html"}
    )
    for phrase in HTML_BOILERPLATE:
        assert phrase not in document.text, phrase
    assert f"Inspection schedule\n\n{HTML_TABLE_MARKDOWN}\n\n## Replacing the seal" in document.text
    assert document.text.startswith("# Pump maintenance\n\nCentrifugal pumps need regular inspection")


def test_html_chunks_follow_the_headings_and_the_table_keeps_its_section(tokenizer):
    chunks = chunks_of("guide.html", ARTICLE_HTML.encode(), tokenizer)
    summary = [(chunk.section_path, chunk.table_id, chunk.text.splitlines()[0]) for chunk in chunks]
    assert summary == [
        (["Pump maintenance"], None, "Centrifugal pumps need regular inspection of the impeller and the mechanical seal. A worn seal leaks fluid along the shaft and must be replaced before the bearings are damaged."),
        (["Pump maintenance", "Inspection intervals"], None, "The intervals below apply to pumps running continuously in clean water service; dirty or abrasive service halves every interval."),
        (["Pump maintenance", "Inspection intervals"], "guide.html:t0", "| Component | Interval | Action |"),
        (["Pump maintenance", "Replacing the seal"], None, "Drain the casing, remove the coupling guard and withdraw the rotating assembly. Fit the new seal faces without touching the lapped surfaces, then refill and vent the casing."),
    ]
    assert chunks[2].text == HTML_TABLE_MARKDOWN
    assert not any(phrase in chunk.text for chunk in chunks for phrase in HTML_BOILERPLATE)


def test_a_table_the_extractor_drops_is_kept_under_its_headings(tokenizer):
    chunks = chunks_of("x200.htm", SIDEBAR_TABLE_HTML.encode(), tokenizer)
    [table] = [chunk for chunk in chunks if chunk.table_id]
    assert table.text == "| Flow | Head |\n| --- | --- |\n| 12 m3/h | 40 m |\n| 18 m3/h | 32 m |"
    assert table.section_path == ["Model X200 pump", "Technical data"]
    assert not any("Products" in chunk.text for chunk in chunks)


def test_layout_tables_are_not_turned_into_markdown():
    page = (
        "<html><head><title>Old site</title></head><body><table><tr><td>"
        "<p>This page is laid out with a single-cell table, like many sites from the nineties. The text "
        "inside it is the whole article and reads as paragraphs, not as a table.</p>"
        "<p>A second paragraph adds enough words for the extractor to take it as the main content.</p>"
        "</td></tr></table></body></html>"
    )
    [document] = parse_upload("old.html", page.encode(), LIMIT)
    assert "laid out with a single-cell table" in document.text
    assert "| --- |" not in document.text


def test_html_encoding_comes_from_utf8_or_the_declared_charset():
    latin = "<html><head><meta charset='iso-8859-1'><title>Café</title></head><body><p>Crème brûlée recipe: " \
            "heat the cream, whisk the yolks with sugar, bake in a water bath and caramelise the top.</p></body></html>"
    [document] = parse_upload("recipe.html", latin.encode("latin-1"), LIMIT)
    assert document.title == "Café" and "Crème brûlée" in document.text
    with pytest.raises(UploadRejected, match="not UTF-8 .* declares no charset"):
        parse_upload("recipe.html", latin.replace("<meta charset='iso-8859-1'>", "").encode("latin-1"), LIMIT)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"<html><body><nav><a href='/'>Home</a></nav></body></html>", "no extractable text"),
        (b"<html>\x00\x01\x02</html>", "binary"),
        (b"   \n", "empty"),
    ],
)
def test_unreadable_html_is_rejected_with_the_reason(data, reason):
    with pytest.raises(UploadRejected, match=reason):
        parse_upload("page.html", data, LIMIT)


# --------------------------------------------------------------------------- registry


def test_the_registry_picks_by_suffix_then_by_mime_type():
    assert isinstance(REGISTRY.find("report.PDF"), PdfParser)
    assert isinstance(REGISTRY.find("download", "text/html; charset=utf-8"), HtmlParser)
    assert isinstance(REGISTRY.find("page.htm", "application/octet-stream"), HtmlParser)
    assert REGISTRY.find("download", "application/octet-stream") is None
    [document] = parse_upload("download", manual_pdf(), LIMIT, content_type="application/pdf")
    assert document.id == "download" and document.metadata["content_type"] == "application/pdf"
    with pytest.raises(UploadRejected, match=r"unsupported file type '\.docx'.*\.pdf"):
        parse_upload("memo.docx", b"PK\x03\x04", LIMIT)
    with pytest.raises(UploadRejected, match=r"unsupported file type '\(none\) \(image/png\)'"):
        parse_upload("picture", b"\x89PNG", LIMIT, content_type="image/png")


def test_binary_files_are_checked_against_the_size_limit_before_parsing():
    with pytest.raises(UploadRejected, match="larger than the upload limit"):
        parse_upload("manual.pdf", manual_pdf(), 100)
