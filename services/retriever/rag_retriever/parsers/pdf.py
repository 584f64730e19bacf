"""PDF: the text of each page (pages separated by ``\\f``, so every chunk knows its page) and its
tables as Markdown pipe tables, placed where they sit on the page.

Two libraries, each for what it does best:

- **pypdf** opens the file: a cheap structural check that names the problem (not a PDF, corrupt
  cross-reference table, encrypted with a password). It also reads the text of every page that
  cannot hold a ruled table (fewer than four line or rectangle drawing operators in its content
  stream and no form XObject), in its layout mode, whose blank lines mark paragraph breaks: about
  4 ms a page.
- **pdfplumber** (on pdfminer.six) reads the other pages: characters with positions, so text lines
  are rebuilt into paragraphs, and ruling lines, from which it finds tables and their cells.
  Characters inside a table are left out of the running text and the table is rendered once, as
  Markdown. It is about thirty times slower (≈ 0.12 s a page), hence only where a table may be.

Limits: no OCR (a scanned PDF without a text layer is rejected as such); tables are found from
their ruling lines (pdfplumber's default "lines" strategy), so a borderless table reads as text;
multi-column layouts are read line by line across the columns; a paragraph that continues on the
next page is two paragraphs (a chunk never spans two pages).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from io import BytesIO
from typing import Any

import pdfplumber
from pypdf import PasswordType, PdfReader

from rag_common.schemas import DocumentIn
from rag_common.upload_formats import PDF
from rag_retriever.parsers.base import UploadRejected, stem
from rag_retriever.tables import markdown_table

logger = logging.getLogger(__name__)

PAGE_BREAK = "\f"
_CID = re.compile(r"\(cid:\d+\)")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
#: A vertical gap larger than this fraction of the line height starts a new paragraph.
PARAGRAPH_GAP = 0.75
#: Path construction operators that draw table rules: rectangles and straight lines.
_RULE_OPERATOR = re.compile(rb"(?<![^\s\]\)>])(?:re|l)(?=\s)")
#: A ruled table needs a grid: at least two cells, so at least four rules or rectangles.
_MIN_RULES = 4
_BLANK_LINE = re.compile(r"\n[ \t]*\n")


class PdfParser:
    extensions = PDF.suffixes
    mime_types = PDF.mime_types

    def parse(self, name: str, data: bytes) -> list[DocumentIn]:
        reader, title = _open(data)
        pages = _extract_pages(reader, data)
        if not any(page.strip() for page in pages):
            raise UploadRejected(
                f"no extractable text (scanned?): none of the {len(pages)} page(s) has a text layer; OCR it first"
            )
        return [
            DocumentIn(
                id=name,
                text=PAGE_BREAK.join(pages),
                title=title or stem(name),
                source=name,
                metadata={"content_type": PDF.mime_type},
            )
        ]


def _open(data: bytes) -> tuple[PdfReader, str]:
    """Rejects what is not a readable PDF; returns the reader and the title from its metadata (or "")."""
    if b"%PDF-" not in data[:1024]:
        raise UploadRejected("corrupt PDF: no %PDF- header (not a PDF file)")
    try:
        reader = PdfReader(BytesIO(data))
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise UploadRejected("encrypted PDF: it needs a password to open")
        if len(reader.pages) == 0:
            raise UploadRejected("corrupt PDF: it has no pages")
        metadata = reader.metadata
        title = metadata.title if metadata is not None else None
    except UploadRejected:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many types for broken files
        raise UploadRejected(f"corrupt PDF: {_describe(exc)}") from exc
    return reader, " ".join(title.split()) if isinstance(title, str) else ""


def _extract_pages(reader: PdfReader, data: bytes) -> list[str]:
    pages: list[str | None] = []
    for page in reader.pages:
        text = None
        try:
            if not _may_hold_table(page):
                text = _plain_page_text(page)
        except Exception:  # noqa: BLE001 - pdfplumber gets its chance at the page
            logger.debug("pypdf could not read a page; pdfplumber will", exc_info=True)
        pages.append(text)
    todo = [index for index, text in enumerate(pages) if text is None]
    if not todo:
        return [text or "" for text in pages]
    try:
        with pdfplumber.open(BytesIO(data)) as pdf:
            for index in todo:
                page = pdf.pages[index]
                try:
                    pages[index] = _page_text(page)
                except Exception as exc:  # noqa: BLE001 - pdfminer raises many types for broken content
                    raise UploadRejected(f"corrupt PDF: page {index + 1}: {_describe(exc)}") from exc
                finally:
                    page.close()  # drops the page's cached layout objects: memory stays flat
    except UploadRejected:
        raise
    except Exception as exc:  # noqa: BLE001
        raise UploadRejected(f"corrupt PDF: {_describe(exc)}") from exc
    return [text or "" for text in pages]


def _may_hold_table(page: Any) -> bool:
    """Whether the page draws enough rules for a ruled table (or hides drawing in a form XObject)."""
    resources = page.get("/Resources")
    xobjects = resources.get_object().get("/XObject") if resources is not None else None
    if xobjects is not None:
        for reference in xobjects.get_object().values():
            if reference.get_object().get("/Subtype") == "/Form":
                return True
    contents = page.get_contents()
    if contents is None:
        return False
    return len(_RULE_OPERATOR.findall(contents.get_data())) >= _MIN_RULES


def _plain_page_text(page: Any) -> str:
    """pypdf's layout-mode text: paragraphs are separated by blank lines, lines within one are joined."""
    text = page.extract_text(extraction_mode="layout")
    paragraphs = []
    for block in _BLANK_LINE.split(text):
        joined = ""
        for line in block.splitlines():
            line = _clean(line)
            if line:
                joined = _join_lines(joined, line) if joined else line
        if joined:
            paragraphs.append(joined)
    return "\n\n".join(paragraphs)


@dataclass(frozen=True, slots=True)
class _Item:
    top: float
    bottom: float
    text: str
    is_table: bool = False


def _page_text(page: Any) -> str:
    tables = page.find_tables()
    items = []
    boxes = []
    for table in tables:
        rows = table.extract()
        # A framed paragraph or a one-line box is found as a 1-row or 1-column "table": leave it as text.
        filled = [row for row in rows if any(cell and cell.strip() for cell in row)]
        if len(filled) < 2 or max(sum(1 for cell in row if cell and cell.strip()) for row in filled) < 2:
            continue
        rendered = markdown_table(rows)
        if rendered:
            boxes.append(table.bbox)
            items.append(_Item(table.bbox[1], table.bbox[3], rendered, is_table=True))
    source = page.filter(lambda obj: not _inside_any(obj, boxes)) if boxes else page
    for line in source.extract_text_lines(return_chars=False):
        text = _clean(line["text"])
        if text:
            items.append(_Item(float(line["top"]), float(line["bottom"]), text))
    items.sort(key=lambda item: item.top)
    return "\n\n".join(_blocks(items))


def _inside_any(obj: dict[str, Any], boxes: list[tuple[float, float, float, float]]) -> bool:
    if "x0" not in obj or "top" not in obj:
        return False
    x = (obj["x0"] + obj["x1"]) / 2
    y = (obj["top"] + obj["bottom"]) / 2
    return any(x0 <= x <= x1 and top <= y <= bottom for x0, top, x1, bottom in boxes)


def _blocks(items: list[_Item]) -> list[str]:
    """Lines joined into paragraphs (a wider gap or a change of font height ends one), tables as is."""
    blocks: list[str] = []
    paragraph = ""
    previous: _Item | None = None
    for item in items:
        if item.is_table:
            if paragraph:
                blocks.append(paragraph)
            blocks.append(item.text)
            paragraph, previous = "", None
            continue
        if previous is not None and paragraph and not _starts_paragraph(previous, item):
            paragraph = _join_lines(paragraph, item.text)
        else:
            if paragraph:
                blocks.append(paragraph)
            paragraph = item.text
        previous = item
    if paragraph:
        blocks.append(paragraph)
    return blocks


def _starts_paragraph(previous: _Item, line: _Item) -> bool:
    height_before, height = previous.bottom - previous.top, line.bottom - line.top
    tallest = max(height_before, height, 1.0)
    return line.top - previous.bottom > PARAGRAPH_GAP * tallest or abs(height - height_before) > 0.2 * tallest


def _join_lines(text: str, line: str) -> str:
    # "main-" + "tenance" → "maintenance"; a real hyphen at a line end ("well-" + "known") loses its
    # hyphen too, the lesser evil for search.
    if len(text) > 1 and text.endswith("-") and text[-2].isalpha() and line[:1].islower():
        return text[:-1] + line
    return f"{text} {line}"


def _clean(text: str) -> str:
    return " ".join(_CONTROL.sub(" ", _CID.sub("", text)).split())


def _describe(exc: BaseException) -> str:
    message = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
