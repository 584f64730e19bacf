"""Markdown pipe tables: rendering (for the PDF and HTML parsers) and finding them again (for the chunker).

Every parser hands the chunker Markdown, so a table from any source looks the same::

    | Component | Interval |
    | --- | --- |
    | Bearings | 12 months |

A cell's text is one line (whitespace collapsed) with ``|`` escaped as ``\\|``; the first row is
the header (GFM requires one; PDF tables have no header notion, and an HTML table without ``<th>``
usually starts with its column names anyway).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
# A delimiter row: cells of dashes with optional alignment colons, e.g. `| --- | :-: |` or `--|--`.
_DELIMITER_CELL = re.compile(r"^:?-+:?$")
_UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


def escape_cell(text: str | None) -> str:
    """One table cell: whitespace (line breaks included) collapsed, ``|`` escaped."""
    return " ".join((text or "").split()).replace("|", "\\|")


def markdown_table(rows: Sequence[Sequence[str | None]]) -> str:
    """A GFM pipe table of ``rows`` (the first is the header); ``""`` when no cell holds text.

    Rows are padded to the widest; rows and columns empty in every cell are dropped (PDF table
    finders report merged cells as extra empty columns).
    """
    cells = [[escape_cell(cell) for cell in row] for row in rows]
    cells = [row for row in cells if any(row)]
    if not cells:
        return ""
    width = max(len(row) for row in cells)
    cells = [row + [""] * (width - len(row)) for row in cells]
    keep = [column for column in range(width) if any(row[column] for row in cells)]
    cells = [[row[column] for column in keep] for row in cells]
    lines = [_row_line(cells[0]), _row_line(["---"] * len(keep))]
    lines.extend(_row_line(row) for row in cells[1:])
    return "\n".join(lines)


def _row_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def split_cells(line: str) -> list[str]:
    """The cells of a pipe-table line (leading and trailing pipes optional, ``\\|`` is not a separator)."""
    stripped = line.strip()
    if stripped.startswith("|"):
        stripped = stripped[1:]
    if stripped.endswith("|") and not stripped.endswith("\\|"):
        stripped = stripped[:-1]
    return [cell.strip() for cell in _UNESCAPED_PIPE.split(stripped)]


def is_delimiter_row(line: str) -> bool:
    if "-" not in line:
        return False
    cells = split_cells(line)
    return bool(cells) and all(_DELIMITER_CELL.match(cell) for cell in cells) and (
        "|" in line or len(cells) > 1
    )


@dataclass(frozen=True, slots=True)
class Block:
    """A run of a section's text: prose, or one Markdown table (``header`` = header + delimiter lines)."""

    text: str
    is_table: bool = False
    header: str = ""
    rows: tuple[str, ...] = ()


def split_tables(text: str) -> list[Block]:
    """``text`` cut into prose blocks and table blocks, in order; tables inside code fences are prose.

    A table is a line with a ``|`` followed by a delimiter row with the same number of cells; its
    rows are the following lines that contain a ``|`` (a blank or pipe-less line ends it).
    """
    lines = text.splitlines()
    blocks: list[Block] = []
    prose: list[str] = []
    fence: str | None = None

    def flush_prose() -> None:
        joined = "\n".join(prose).strip("\n")
        if joined.strip():
            blocks.append(Block(joined))
        prose.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence_match = _FENCE.match(line)
        if fence is not None:
            prose.append(line)
            marker = fence_match.group(1) if fence_match else ""
            if marker[:1] == fence[:1] and len(marker) >= len(fence):
                fence = None
            i += 1
            continue
        if fence_match:
            fence = fence_match.group(1)
            prose.append(line)
            i += 1
            continue
        if (
            "|" in line
            and i + 1 < len(lines)
            and is_delimiter_row(lines[i + 1])
            and len(split_cells(line)) == len(split_cells(lines[i + 1]))
        ):
            flush_prose()
            header = [line.strip(), lines[i + 1].strip()]
            i += 2
            rows: list[str] = []
            while i < len(lines) and lines[i].strip() and "|" in lines[i]:
                rows.append(lines[i].strip())
                i += 1
            blocks.append(Block("\n".join(header + rows), is_table=True, header="\n".join(header), rows=tuple(rows)))
            continue
        prose.append(line)
        i += 1
    flush_prose()
    return blocks
