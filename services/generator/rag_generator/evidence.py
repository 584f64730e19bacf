"""Evidence units: the passages cut into numbered sentences a model can cite by id.

A small model cannot copy a quote reliably, but it can copy ``[2.3]``. Citing a sentence by id
turns "is this quote in the source?" (fuzzy, usually failing) into a lookup that cannot fail, and the
unit's offsets give the caller the exact span to highlight. Sentences are cut by
:func:`rag_common.sentences.sentence_spans`, the chunker's own rule, so a unit never straddles two of
the chunker's units; with the passage's language (``Passage.language``), as the chunker cut it.

Sources are numbered ``1..n`` in the order given (the reranker's order), so a
source number means the same passage in every part of the generator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby

from rag_common.schemas import Passage
from rag_common.sentences import sentence_spans

__all__ = [
    "EvidenceUnit",
    "build_evidence",
    "evidence_index",
    "is_table_separator",
    "render_evidence",
    "units_by_source",
]

#: A unit needs at least this many letters or digits to be worth citing; this drops Markdown table
#: delimiter rows (``|---|:---:|``), stray bullets and lone punctuation, and keeps short headings.
MIN_UNIT_ALNUM = 2


@dataclass(frozen=True, slots=True)
class EvidenceUnit:
    """One citable sentence (or table row, list item, heading) of one source."""

    #: ``"<source>.<index>"``, e.g. ``"2.3"``: what the model writes between brackets.
    id: str
    #: 1-based number of the passage among the sources shown.
    source: int
    #: 1-based number of the unit within its source (kept units only, so ids have no gaps).
    index: int
    #: Verbatim: ``passage.text[start:end] == text``.
    text: str
    start: int
    end: int
    # Excluded from eq/hash: a pydantic model is not hashable, and the id already says which passage.
    passage: Passage = field(compare=False, repr=False)


def is_table_separator(text: str) -> bool:
    """A Markdown table delimiter row such as ``| --- | :---: |``: layout, not content."""
    stripped = text.strip()
    return "|" in stripped and "-" in stripped and set(stripped) <= set("|-: \t")


def build_evidence(
    passages: Sequence[Passage],
    *,
    max_passages: int,
    max_passage_chars: int,
    max_units_per_passage: int | None = None,
) -> list[EvidenceUnit]:
    """The evidence units of the first ``max_passages`` passages, source by source, in text order.

    ``max_passage_chars`` bounds each passage the way the prompt always has (counted from its first
    non-blank character), but only whole units are kept: a sentence cut mid-way would be a citation
    of words the source never said in that form. The one exception is a first unit longer than the
    whole budget, which is cut at a word boundary so that every passage contributes something.
    """
    if max_passages < 1 or max_passage_chars < 1:
        raise ValueError("max_passages and max_passage_chars must be >= 1")
    units: list[EvidenceUnit] = []
    for source, passage in enumerate(passages[:max_passages], start=1):
        text = passage.text
        limit = len(text) - len(text.lstrip()) + max_passage_chars
        index = 0
        for start, end in sentence_spans(text, passage.language):
            if max_units_per_passage is not None and index >= max_units_per_passage:
                break
            if end > limit:
                if index > 0:
                    break
                end = _word_cut(text, start, limit)
                if end <= start:
                    break
            piece = text[start:end]
            if sum(char.isalnum() for char in piece) < MIN_UNIT_ALNUM or is_table_separator(piece):
                continue
            index += 1
            units.append(EvidenceUnit(f"{source}.{index}", source, index, piece, start, end, passage))
            if end >= limit:
                break
    return units


def _word_cut(text: str, start: int, limit: int) -> int:
    """End of the last whole word of ``text[start:limit]`` (``limit`` itself if there is no space)."""
    space = text.rfind(" ", start, limit + 1)
    end = space if space > start else limit
    while end > start and text[end - 1].isspace():
        end -= 1
    return end


def evidence_index(units: Iterable[EvidenceUnit]) -> dict[str, EvidenceUnit]:
    """Units by id, for resolving the ids a model cites."""
    return {unit.id: unit for unit in units}


def render_evidence(units: Sequence[EvidenceUnit]) -> str:
    """The prompt block: per source a ``[n] title — section, page`` header, then ``[n.i] sentence``
    lines. Whitespace inside a unit is collapsed so every unit stays on one line."""
    blocks: list[str] = []
    for source, group in groupby(units, key=lambda unit: unit.source):
        members = list(group)
        lines = [_source_header(source, members[0].passage)]
        lines.extend(f"[{unit.id}] {' '.join(unit.text.split())}" for unit in members)
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _source_header(number: int, passage: Passage) -> str:
    location = [" > ".join(passage.section_path)] if passage.section_path else []
    if passage.page is not None:
        location.append(f"page {passage.page}")
    name = passage.title or passage.source or passage.doc_id
    return f"[{number}] {name}" + (f" — {', '.join(location)}" if location else "")


def units_by_source(units: Iterable[EvidenceUnit]) -> Mapping[int, list[EvidenceUnit]]:
    """Units grouped by source number, each list in text order."""
    grouped: dict[int, list[EvidenceUnit]] = {}
    for unit in units:
        grouped.setdefault(unit.source, []).append(unit)
    return grouped
