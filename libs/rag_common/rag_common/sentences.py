"""What counts as a sentence, in one place.

The retriever's chunker packs sentences into chunks, and the generator numbers the sentences of
those chunks as evidence units the model cites by id (``[2.3]``). Both must cut text the same way:
if they disagreed, a citation could name a "sentence" that straddles two of the chunker's units, or
the chunker could cut a chunk inside what the generator shows as one sentence. So the rule lives
here, in the shared package, and neither service keeps a copy.

Text is first cut into blocks: a blank line, a page break (``\f``) or a line that starts a block
(a heading, a list item, a quote, a table row) ends the block before it, and a heading or table row
is a block of its own. A single line break inside a paragraph is only a wrapped line, not a boundary:
hard-wrapped Markdown would otherwise cut most sentences in two. Within a block, a boundary is
whitespace after sentence-final punctuation (a closing quote or bracket right after the punctuation
stays with its sentence); a table row is never cut: a cell reading "Stores turns. Keys expire." must
not cut its row in two.
"""

from __future__ import annotations

import re

__all__ = ["sentence_spans"]

_LINE = re.compile(r"[^\n\f]+")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[.!?…][\"'”’)\]])\s+")
#: A line that starts a block of its own kind: heading, table row, quote, bullet or numbered item.
_BLOCK_START = re.compile(r"[ \t]*(?:#{1,6}[ \t]|\||>|[-*+][ \t]|\d{1,3}[.)][ \t])")
#: Lines that are a block by themselves, whatever follows: headings and table rows.
_STANDALONE = re.compile(r"[ \t]*(?:#{1,6}[ \t]|\|)")


def _blocks(text: str) -> list[tuple[int, int, bool]]:
    """``(start, end, is_table_row)`` of each block, in order."""
    blocks: list[tuple[int, int, bool]] = []
    current: list[int] | None = None  # [start, end] of the open paragraph block

    def flush() -> None:
        nonlocal current
        if current is not None:
            blocks.append((current[0], current[1], False))
            current = None

    for line in _LINE.finditer(text):
        start, end = line.span()
        content = line.group()
        if not content.strip():
            flush()
            continue
        if _STANDALONE.match(content):
            flush()
            blocks.append((start, end, content.lstrip().startswith("|")))
            continue
        gap = text[current[1] : start] if current is not None else ""
        wrapped = current is not None and gap.count("\n") == 1 and "\f" not in gap and not _BLOCK_START.match(content)
        if not wrapped:
            flush()
            current = [start, end]
        else:
            current[1] = end
    flush()
    return blocks


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of each unit of ``text``, whitespace-trimmed, in order.

    Offsets index ``text`` itself (no normalisation), so ``text[start:end]`` is the unit verbatim and
    callers can point back into the original; a unit may contain the line breaks of a wrapped
    paragraph. Blank units are dropped.
    """
    spans: list[tuple[int, int]] = []
    for start, end, table_row in _blocks(text):
        if table_row:
            spans.append((start, end))
            continue
        for match in _SENTENCE_END.finditer(text, start, end):
            spans.append((start, match.start()))
            start = match.end()
        spans.append((start, end))
    stripped: list[tuple[int, int]] = []
    for start, end in spans:
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start < end:
            stripped.append((start, end))
    return stripped
