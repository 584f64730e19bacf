"""HTML: the page's main content as Markdown (headings become ``section_path``), boilerplate removed,
data tables as Markdown pipe tables.

Three steps, so that tables survive boilerplate removal whatever the extractor thinks of them:

1. **lxml** parses the page. Obvious chrome goes first: ``<nav>``, ``<footer>``, ``<aside>``, the site
   ``<header>`` (outside ``<main>``/``<article>``), ``role=navigation|banner|contentinfo``, cookie and
   consent banners (short elements whose id or class says cookie/consent/gdpr), scripts and forms'
   buttons. Every *data* table (at least two rows and two columns, no nested table, not
   ``role=presentation``) is rendered to Markdown here (``colspan``/``rowspan`` expanded, ``<br>`` and
   block children as spaces) and replaced by a placeholder paragraph.
2. **trafilatura** extracts the main content as Markdown (its boilerplate heuristics drop menus,
   share bars, comment sections and the like that step 1 did not name).
3. Each placeholder is replaced by its table. A table whose placeholder the extractor dropped is
   kept anyway (step 1 already removed the chrome it could have belonged to), after the headings it
   sat under, so it still carries the right ``section_path``.

Title: ``<title>``, else the first ``<h1>``, else ``og:title``, else the file name. Encoding: a BOM,
else UTF-8 if the bytes are valid UTF-8, else the charset the page declares in a ``<meta>`` tag.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

import lxml.etree
import lxml.html
import trafilatura

from rag_common.schemas import DocumentIn
from rag_common.upload_formats import HTML
from rag_retriever.parsers.base import UploadRejected, stem
from rag_retriever.tables import markdown_table

_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_DROP_TAGS = ("script", "style", "noscript", "template", "svg", "iframe", "nav", "footer", "aside", "button", "dialog")
_DROP_ROLES = ("navigation", "contentinfo", "search")
_CONSENT = re.compile(r"cookie|consent|gdpr", re.IGNORECASE)
#: Cookie banners are short; a long element whose class mentions cookies is probably content (recipes).
_CONSENT_MAX_CHARS = 2000
_BLOCK_TAGS = {
    "address", "article", "blockquote", "br", "dd", "div", "dl", "dt", "figcaption", "figure", "h1", "h2",
    "h3", "h4", "h5", "h6", "hr", "li", "ol", "p", "pre", "section", "table", "td", "th", "tr", "ul",
}
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
_XML_DECLARATION = re.compile(r"^\s*<\?xml[^>]*\?>")
_MARKDOWN_ESCAPE = re.compile(r"\\([*_])")
_MAX_SPAN = 1000


@dataclass(frozen=True, slots=True)
class _Table:
    token: str
    markdown: str
    caption: str
    path: tuple[str, ...]

    @property
    def block(self) -> str:
        return f"{self.caption}\n\n{self.markdown}" if self.caption else self.markdown


class HtmlParser:
    extensions = HTML.suffixes
    mime_types = HTML.mime_types

    def parse(self, name: str, data: bytes) -> list[DocumentIn]:
        text = _decode(data)
        try:
            tree = lxml.html.document_fromstring(_XML_DECLARATION.sub("", text, count=1))
        except (lxml.etree.ParserError, ValueError) as exc:
            raise UploadRejected(f"invalid HTML: {exc}") from exc
        title = _title(tree) or stem(name)
        _drop_boilerplate(tree)
        tables = _take_tables(tree)
        body = trafilatura.extract(
            tree,
            output_format="markdown",
            include_comments=False,
            include_tables=True,  # layout tables (not taken above) are left to trafilatura
            include_images=False,
            include_links=False,
            deduplicate=False,
        ) or ""
        body = _put_tables_back(_MARKDOWN_ESCAPE.sub(r"\1", body), tables)
        if not body.strip():
            raise UploadRejected("no extractable text in the HTML page")
        return [DocumentIn(id=name, text=body, title=title, source=name, metadata={"content_type": HTML.mime_type})]


def _decode(data: bytes) -> str:
    for bom, encoding in ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16"), (b"\xfe\xff", "utf-16")):
        if data.startswith(bom):
            return _checked(data.decode(encoding, errors="replace"))
    try:
        return _checked(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        declared = _META_CHARSET.search(data[:4096])
        if declared is None:
            raise UploadRejected(
                f"HTML is not UTF-8 (invalid byte at offset {exc.start}) and declares no charset"
            ) from exc
        charset = declared.group(1).decode("ascii")
        try:
            return _checked(data.decode(charset))
        except (LookupError, UnicodeDecodeError) as inner:
            raise UploadRejected(f"HTML cannot be decoded as its declared charset {charset!r}") from inner


def _checked(text: str) -> str:
    if "\x00" in text:
        raise UploadRejected("file is binary, not HTML")
    if not text.strip():
        raise UploadRejected("file is empty")
    return text


def _title(tree: lxml.html.HtmlElement) -> str:
    for candidate in (tree.find(".//title"), tree.find(".//h1")):
        if candidate is not None:
            text = _text_of(candidate)
            if text:
                return text
    for content in tree.xpath("//meta[@property='og:title']/@content"):
        text = " ".join(str(content).split())
        if text:
            return text
    return ""


def _drop_boilerplate(tree: lxml.html.HtmlElement) -> None:
    doomed = [element for element in tree.iter(*_DROP_TAGS)]
    doomed += [
        element
        for element in tree.iter("header")
        if not any(ancestor.tag in ("main", "article") for ancestor in element.iterancestors())
    ]
    for element in tree.iter():
        if not isinstance(element.tag, str) or element.tag in ("html", "body", "main", "article"):
            continue
        role = (element.get("role") or "").lower()
        if role in _DROP_ROLES or (role == "banner" and element.tag != "main"):
            doomed.append(element)
        elif _CONSENT.search(f"{element.get('id', '')} {element.get('class', '')}") and (
            len(element.text_content()) < _CONSENT_MAX_CHARS
        ):
            doomed.append(element)
    for element in doomed:
        if element.getparent() is not None:  # an ancestor may have gone already
            element.drop_tree()  # keeps the tail text


def _take_tables(tree: lxml.html.HtmlElement) -> list[_Table]:
    """Replaces each data table with a placeholder paragraph; returns the tables in document order."""
    nonce = uuid.uuid4().hex[:12]
    found: list[tuple[lxml.html.HtmlElement, _Table]] = []
    headings: list[tuple[int, str]] = []
    for element in tree.iter():
        if not isinstance(element.tag, str):
            continue
        level = _HEADINGS.get(element.tag)
        if level is not None:
            title = _text_of(element)
            if title:
                while headings and headings[-1][0] >= level:
                    headings.pop()
                headings.append((level, title))
        elif element.tag == "table" and _is_data_table(element):
            markdown = markdown_table(_table_rows(element))
            if markdown:
                caption = element.find("caption")
                table = _Table(
                    token=f"RAGTABLE{nonce}N{len(found)}Z",
                    markdown=markdown,
                    caption=_text_of(caption) if caption is not None else "",
                    path=tuple(title for _, title in headings),
                )
                found.append((element, table))
    for element, table in found:
        placeholder = lxml.html.Element("p")
        placeholder.text = table.token
        placeholder.tail = element.tail
        parent = element.getparent()
        if parent is not None:
            parent.replace(element, placeholder)
    return [table for _, table in found]


def _is_data_table(table: lxml.html.HtmlElement) -> bool:
    if (table.get("role") or "").lower() in ("presentation", "none"):
        return False
    if next(table.iterdescendants("table"), None) is not None:
        return False
    rows = [row for row in _own_rows(table) if len(_cells(row)) > 0]
    return len(rows) >= 2 and max(_width(row) for row in rows) >= 2


def _own_rows(table: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    """Header rows first, then body rows, then footer rows (HTML 4 allowed <tfoot> before <tbody>)."""
    head, body, foot = [], [], []
    for row in table.iter("tr"):
        group = row.getparent()
        tag = group.tag if group is not None else ""
        (head if tag == "thead" else foot if tag == "tfoot" else body).append(row)
    return head + body + foot


def _cells(row: lxml.html.HtmlElement) -> list[lxml.html.HtmlElement]:
    return [cell for cell in row if cell.tag in ("td", "th")]


def _width(row: lxml.html.HtmlElement) -> int:
    return sum(_span(cell, "colspan") for cell in _cells(row))


def _span(cell: lxml.html.HtmlElement, attribute: str) -> int:
    try:
        value = int((cell.get(attribute) or "1").strip())
    except ValueError:
        return 1
    return min(max(value, 1), _MAX_SPAN)


def _table_rows(table: lxml.html.HtmlElement) -> list[list[str]]:
    """The table as a grid: a colspan leaves the spanned cells empty, a rowspan repeats the value in
    the rows below (so each row reads on its own when a big table is split by rows)."""
    grid: list[list[str]] = []
    carried: dict[int, tuple[str, int]] = {}  # column → (text, rows still to fill)
    for row in _own_rows(table):
        out: list[str] = []
        column = 0

        def fill_carried() -> None:
            nonlocal column
            while column in carried:
                text, left = carried[column]
                out.append(text)
                if left <= 1:
                    del carried[column]
                else:
                    carried[column] = (text, left - 1)
                column += 1

        for cell in _cells(row):
            fill_carried()
            text = _text_of(cell)
            rowspan = _span(cell, "rowspan")
            for offset in range(_span(cell, "colspan")):
                value = text if offset == 0 else ""
                out.append(value)
                if rowspan > 1:
                    carried[column] = (value, rowspan - 1)
                column += 1
        fill_carried()
        if out:
            grid.append(out)
    return grid


def _text_of(element: lxml.html.HtmlElement) -> str:
    """Visible text with block elements and ``<br>`` as spaces, whitespace collapsed."""
    parts: list[str] = []

    def walk(node: lxml.html.HtmlElement) -> None:
        if node.text:
            parts.append(node.text)
        for child in node:
            if isinstance(child.tag, str):
                block = child.tag in _BLOCK_TAGS
                if block:
                    parts.append(" ")
                walk(child)
                if block:
                    parts.append(" ")
            if child.tail:
                parts.append(child.tail)

    walk(element)
    return " ".join("".join(parts).split())


def _put_tables_back(body: str, tables: list[_Table]) -> str:
    before: list[str] = []
    after: list[str] = []
    for table in tables:
        if table.token in body:
            body = body.replace(table.token, f"\n\n{table.block}\n\n", 1)
        elif not table.path:
            before.append(table.block)  # no heading above it: the top of the page, before any heading
        else:
            headings = "\n\n".join(f"{'#' * min(depth, 6)} {title}" for depth, title in enumerate(table.path, 1))
            after.append(f"{headings}\n\n{table.block}")
    text = "\n\n".join(part for part in (*before, body, *after) if part.strip())
    lines = [line.rstrip() for line in text.splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
