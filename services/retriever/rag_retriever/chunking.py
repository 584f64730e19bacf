"""Sentence-aware chunking, measured in the embedder's own tokens.

Sentences are packed into chunks of at most ``chunk_tokens`` tokens; consecutive chunks share whole
trailing sentences worth at most ``chunk_overlap_tokens``. A sentence longer than the budget is cut
on token boundaries (preferring word boundaries), so the model never truncates a chunk silently.
Markdown keeps its heading structure: each chunk carries the path of headings above it and no chunk
spans two sections. A chunk's text is a slice of the original, so lists and code keep their layout.

Plain text is read like Markdown (``SourceDocument.layout``), so a text gets the same chunks as a
``.md`` or ``.txt`` upload and as JSON. Structured documents (Markdown, HTML, plain text, PDF) get two
more rules:

- PDF text is pages separated by ``\f``: a chunk never spans two pages and carries its ``page``.
- A Markdown pipe table is never packed with prose and never cut inside a row. A table that fits the
  budget is one chunk; a larger one is split between rows into several chunks, each starting with
  the header row and its delimiter row, all sharing a ``table_id``. A single row that does not fit
  (with the header) is the one case where a row is cut, on token boundaries like a long sentence;
  a header that takes more than half the budget is not repeated. Table parts do not overlap (the
  repeated header is their context).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

from rag_common.sentences import sentence_spans
from rag_common.sentence_vectors import SentenceVectorMode
from rag_retriever.embed_template import TEXT_ONLY, EmbedTemplate
from rag_retriever.records import DEFAULT_TENANT, ChunkRecord, SourceDocument
from rag_retriever.tables import Block, split_tables

#: Tokens the model adds around every input ([CLS] and [SEP] for BERT-style encoders).
SPECIAL_TOKENS = 2

#: A sentence (or table row) longer than this many characters is tokenized in windows of about this
#: size, cut at whitespace, rather than whole. One call of the tokenizer holds the GIL for its whole
#: duration (tokenizers' ``encode``), and on a multi-megabyte "sentence" (text with no sentence end)
#: that was seconds per call, twice per sentence (count, then offsets), while searches in the same
#: process waited; its cost per character also grew with the length (0.54 s/MB at 1 MB, 0.85 s/MB at
#: 8 MB). A window of 16 KiB is a few thousand tokens: a few milliseconds per call. Shorter spans are
#: tokenized whole, exactly as before.
TOKENIZE_WINDOW_CHARS = 16_384
#: Where a window may end: whitespace every tokenizer splits on (the BERT normalizer drops other
#: control characters such as ``\f`` instead of splitting on them).
_WINDOW_BOUNDARY = re.compile(r"[ \t\n\r]")
#: The opening of an ATX heading line; the title is the rest (see :func:`heading`).
_HEADING_OPEN = re.compile(r" {0,3}(#{1,6})[ \t]+")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


class Tokenizer(Protocol):
    #: Longest input the model accepts, special tokens included.
    max_tokens: int

    def count(self, text: str) -> int:
        """Tokens in ``text``, without special tokens."""

    def offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each token of ``text``, without special tokens."""


@dataclass(frozen=True, slots=True)
class Section:
    path: tuple[str, ...]
    text: str


@dataclass(frozen=True, slots=True)
class _Piece:
    """A block of a document with where it sits."""

    page: int | None
    path: tuple[str, ...]
    block: Block


@dataclass(frozen=True, slots=True)
class _Unit:
    start: int
    end: int
    tokens: int


def chunk_id(doc_id: str, chunk_index: int, text: str, tenant: str = DEFAULT_TENANT) -> str:
    """``doc_id:index:hash``. Outside the default tenant the hash covers the tenant too, so two
    tenants' documents with the same id and text never share a chunk id (chunk ids key upserts and
    OpenSearch ``_id``s); the default tenant's ids are those from before tenants existed."""
    salted = text if tenant == DEFAULT_TENANT else f"{tenant}\x00{text}"
    return f"{doc_id}:{chunk_index}:{hashlib.sha1(salted.encode('utf-8')).hexdigest()[:12]}"


def heading(line: str) -> tuple[int, str] | None:
    """``(level, title)`` of an ATX heading line (``## Title ##``), else None: the title without the
    optional closing run of ``#`` (after a space or tab) and without trailing spaces and tabs.

    What ``^ {0,3}(#{1,6})[ \\t]+(.*?)(?:[ \\t]+#+)?[ \\t]*$`` matched, written out: that pattern
    was quadratic in a run of spaces inside the line (its lazy group tried the closing pattern from
    every position), 20,000 spaces in one heading line took 5 s."""
    opening = _HEADING_OPEN.match(line)
    if opening is None:
        return None
    title = line[opening.end() :].rstrip(" \t")
    unclosed = title.rstrip("#")
    if len(unclosed) < len(title) and unclosed[-1:] in (" ", "\t"):
        title = unclosed.rstrip(" \t")
    return len(opening.group(1)), title


def markdown_sections(text: str) -> list[Section]:
    """Split markdown at ATX headings (``#`` .. ``######``), ignoring ``#`` lines inside code fences."""
    sections: list[Section] = []
    headings: list[tuple[int, str]] = []
    body: list[str] = []
    fence: str | None = None

    def flush() -> None:
        joined = "\n".join(body).strip()
        if joined:
            sections.append(Section(tuple(title for _, title in headings if title), joined))
        body.clear()

    for line in text.splitlines():
        fence_match = _FENCE.match(line)
        if fence is not None:
            body.append(line)
            marker = fence_match.group(1) if fence_match else ""
            if marker[:1] == fence[:1] and len(marker) >= len(fence):
                fence = None
            continue
        if fence_match:
            fence = fence_match.group(1)
            body.append(line)
            continue
        found = heading(line)
        if found:
            flush()
            level, title = found
            while headings and headings[-1][0] >= level:
                headings.pop()
            headings.append((level, title.strip()))
            continue
        body.append(line)
    flush()
    return sections


class Chunker:
    def __init__(
        self, tokenizer: Tokenizer, chunk_tokens: int, chunk_overlap_tokens: int,
        embed_template: str = TEXT_ONLY, *, sentence_vectors: SentenceVectorMode = "off",
        window_chars: int = TOKENIZE_WINDOW_CHARS,
    ) -> None:
        """``chunk_tokens``, ``chunk_overlap_tokens``: the settings' (``RetrieverSettings``, the one
        source of their defaults). The template and sentence vectors default to the bare chunk text
        and none, what a chunker outside the service (tools, tests) wants."""
        limit = tokenizer.max_tokens - SPECIAL_TOKENS
        if not 0 < chunk_tokens <= limit:
            raise ValueError(
                f"chunk_tokens must be between 1 and {limit} (the model's max_seq_length "
                f"{tokenizer.max_tokens} minus {SPECIAL_TOKENS} special tokens), got {chunk_tokens}"
            )
        if not 0 <= chunk_overlap_tokens < chunk_tokens:
            raise ValueError(
                f"chunk_overlap_tokens must be >= 0 and below chunk_tokens ({chunk_tokens}), got {chunk_overlap_tokens}"
            )
        self._tokenizer = tokenizer
        self.chunk_tokens = chunk_tokens
        self.chunk_overlap_tokens = chunk_overlap_tokens
        #: What the embedder sees of each chunk (``rag_retriever.embed_template``).
        self.embed_template = EmbedTemplate(embed_template)
        #: Whether and how the ingestor stores sentence vectors: part of each document's fingerprint.
        self.sentence_vectors = sentence_vectors
        #: Longest span tokenized in one call (``TOKENIZE_WINDOW_CHARS``; smaller in tests).
        self._window_chars = window_chars

    def embed_text(self, text: str, title: str, section_path: tuple[str, ...] | list[str]) -> str:
        """The string embedded for a chunk: the template rendered, its context cut to fit the model."""
        limit = self._tokenizer.max_tokens - SPECIAL_TOKENS

        def cut(context: str, keep: int) -> str:
            offsets = self._tokenizer.offsets(context)
            return context if len(offsets) <= keep else context[: offsets[keep - 1][1]]

        return self.embed_template.render(
            text, title, section_path, fits=lambda candidate: self._tokenizer.count(candidate) <= limit, cut=cut
        )

    def chunk_document(self, document: SourceDocument) -> list[ChunkRecord]:
        fingerprint = document.fingerprint(self.embed_template.template, sentence_vectors=self.sentence_vectors)
        digest = document.content_hash
        records: list[ChunkRecord] = []
        tables = 0
        for piece in _pieces(document):
            table_id: str | None = None
            if piece.block.is_table:
                table_id = f"{document.doc_id}:t{tables}"
                tables += 1
                texts = self.split_table(piece.block)
            else:
                texts = self.split_text(piece.block.text, document.language)
            for text in texts:
                index = len(records)
                embedded = self.embed_text(text, document.title, piece.path)
                records.append(
                    ChunkRecord(
                        # Over what is embedded: a chunk whose title or headings (in the template) change
                        # gets a new id, so its stored vector is not reused. Text-only: the text's id.
                        chunk_id=chunk_id(document.doc_id, index, embedded, document.tenant),
                        doc_id=document.doc_id,
                        text=text,
                        chunk_index=index,
                        title=document.title,
                        source=document.source,
                        page=piece.page,
                        section_path=list(piece.path),
                        metadata=dict(document.metadata),
                        doc_fingerprint=fingerprint,
                        table_id=table_id,
                        content_hash=digest,
                        tenant=document.tenant,
                        readers=list(document.readers),
                        embed_text=None if embedded == text else embedded,
                        # The language its sentences were cut in: the generator cuts the passage alike.
                        language=document.language,
                    )
                )
        return records

    def split_table(self, table: Block) -> list[str]:
        """One table (a block from :func:`split_tables`) as chunks of whole rows under its header."""
        if self._tokenizer.count(table.text) <= self.chunk_tokens:
            return [table.text]
        header_tokens = self._tokenizer.count(table.header)
        if header_tokens <= self.chunk_tokens // 2:
            prefix, lines = table.header + "\n", list(table.rows)
        else:  # a header this large is not worth repeating: it becomes the first part(s)
            prefix, lines = "", [*table.header.splitlines(), *table.rows]
        budget = self.chunk_tokens - (self._tokenizer.count(prefix) if prefix else 0)
        parts: list[str] = []
        group: list[tuple[str, int]] = []
        used = 0
        for line in lines:
            tokens = self._tokenizer.count(line)
            # The real count of header + row only when the sum is near the budget (counts of
            # whitespace-joined text add up, give or take the join).
            if tokens > budget - 2 and self._tokenizer.count(prefix + line) > self.chunk_tokens:
                parts.extend(self._rows_part(prefix, group, budget))
                group, used = [], 0
                parts.extend(self._cut_row(prefix, line, budget))
                continue
            if group and used + tokens > budget:
                parts.extend(self._rows_part(prefix, group, budget))
                group, used = [], 0
            group.append((line, tokens))
            used += tokens
        parts.extend(self._rows_part(prefix, group, budget))
        return parts

    def _rows_part(self, prefix: str, group: list[tuple[str, int]], budget: int) -> list[str]:
        # Row counts are added up for packing; the real count of the part decides (as in _verified).
        if not group:
            return []
        text = prefix + "\n".join(line for line, _ in group)
        if self._tokenizer.count(text) <= self.chunk_tokens:
            return [text]
        if len(group) == 1:
            return self._cut_row(prefix, group[0][0], budget)
        middle = len(group) // 2
        return self._rows_part(prefix, group[:middle], budget) + self._rows_part(prefix, group[middle:], budget)

    def _cut_row(self, prefix: str, row: str, budget: int) -> list[str]:
        """A row too long for one chunk, cut on token boundaries; each piece keeps the header."""
        while True:
            pieces = [row[unit.start : unit.end] for unit in self._split_long(row, 0, len(row), budget)]
            over = max(self._tokenizer.count(prefix + piece) for piece in pieces) - self.chunk_tokens
            if over <= 0 or budget == 1:
                return [prefix + piece for piece in pieces]
            budget = max(1, budget - over)

    def split_text(self, text: str, language: str | None = None) -> list[str]:
        """``text`` packed into chunks of whole sentences, cut for ``language`` (the document's)."""
        units: list[_Unit] = []
        for start, end in sentence_spans(text, language):
            if end - start > self._window_chars:
                units.extend(self._long_span(text, start, end))
                continue
            tokens = self._tokenizer.count(text[start:end])
            if tokens <= self.chunk_tokens:
                units.append(_Unit(start, end, tokens))
            else:
                units.extend(self._split_long(text, start, end))
        chunks: list[str] = []
        for group in self._pack(units):
            chunks.extend(self._verified(text, group))
        return chunks

    def _pack(self, units: list[_Unit]) -> list[list[_Unit]]:
        groups: list[list[_Unit]] = []
        current: list[_Unit] = []
        used = 0
        for unit in units:
            if current and used + unit.tokens > self.chunk_tokens:
                groups.append(current)
                current = self._overlap(current, unit.tokens)
                used = sum(u.tokens for u in current)
            current.append(unit)
            used += unit.tokens
        if current:
            groups.append(current)
        return groups

    def _overlap(self, previous: list[_Unit], next_tokens: int) -> list[_Unit]:
        carried: list[_Unit] = []
        used = 0
        for unit in reversed(previous):
            if used + unit.tokens > self.chunk_overlap_tokens or used + unit.tokens + next_tokens > self.chunk_tokens:
                break
            carried.insert(0, unit)
            used += unit.tokens
        return carried

    def _verified(self, text: str, group: list[_Unit]) -> list[str]:
        # Packing adds per-sentence counts; a tokenizer that is not additive across the joining
        # whitespace could exceed the budget, so the real count of the chunk decides.
        chunk = text[group[0].start : group[-1].end]
        if len(group) == 1 or self._tokenizer.count(chunk) <= self.chunk_tokens:
            return [chunk]
        middle = len(group) // 2
        return self._verified(text, group[:middle]) + self._verified(text, group[middle:])

    def _long_span(self, text: str, start: int, end: int) -> list[_Unit]:
        """The units of a span longer than a tokenizing window: what counting it whole and, when over
        the budget, cutting it (``_split_long``) gives, without tokenizing it whole. The cut comes
        first; only a span it leaves in one piece is counted whole (it has at most about a budget of
        tokens) to keep that piece as the whole span, as before."""
        units = self._split_long(text, start, end)
        if len(units) == 1:
            tokens = self._tokenizer.count(text[start:end])
            if tokens <= self.chunk_tokens:
                return [_Unit(start, end, tokens)]
        return units

    def _split_long(self, text: str, start: int, end: int, budget: int | None = None) -> list[_Unit]:
        budget = budget or self.chunk_tokens
        segment = text[start:end]
        # Token offsets as one tokenization of the segment gives them, made a window at a time as the
        # cut advances (``_Offsets``): the pieces are those of the whole segment's offsets.
        offsets = _Offsets(self._tokenizer, segment, self._window_chars)
        offsets.ensure(budget + 1)
        units: list[_Unit] = []
        i = 0
        while i < len(offsets):
            take = min(budget, len(offsets) - i)
            while True:
                cut = _word_cut(segment, offsets, i, take)
                piece_start, piece_end = offsets[i][0], offsets[cut - 1][1]
                tokens = self._tokenizer.count(segment[piece_start:piece_end])
                if tokens <= budget or cut - i == 1:
                    break
                take = max(1, (cut - i) - (tokens - budget))
            units.append(_Unit(start + piece_start, start + piece_end, tokens))
            i = cut
            offsets.release(i)
            # Known up to the window _word_cut reads (budget + 1 tokens from i), or all of them.
            offsets.ensure(i + budget + 1)
        return units


class _Offsets:
    """The token offsets of ``segment`` that one tokenization of all of it would give, made window by
    window on demand. ``offsets[k]`` is token ``k``'s ``(start, end)`` in ``segment`` for any ``k``
    below ``len(offsets)``, the tokens known so far (all of them once the last window is read).

    Each window ends just before a space, tab or line break and the next starts there: BERT-style
    pre-tokenizers split at whitespace, so the windows' tokens are exactly the whole segment's (for
    tokenizers that attach a space to the following token, a piece's first offset may move by that
    space; every piece is still counted by the real tokenizer). A segment without whitespace is one
    window. So no tokenizer call sees more than about ``window_chars`` characters, and each character
    is tokenized once."""

    def __init__(self, tokenizer: Tokenizer, segment: str, window_chars: int) -> None:
        self._tokenizer = tokenizer
        self._segment = segment
        self._window_chars = max(1, window_chars)
        self._base = 0  # index of the first token still held
        self._held: list[tuple[int, int]] = []
        self._next = 0  # first character not tokenized yet

    def __len__(self) -> int:
        return self._base + len(self._held)

    def __getitem__(self, index: int) -> tuple[int, int]:
        return self._held[index - self._base]

    def ensure(self, count: int) -> None:
        """Tokenize further windows until ``count`` tokens are known or the segment is done."""
        while len(self) < count and self._next < len(self._segment):
            start = self._next
            end = len(self._segment)
            if start + self._window_chars < end:
                boundary = _WINDOW_BOUNDARY.search(self._segment, start + self._window_chars)
                end = boundary.start() if boundary else end
            self._held.extend((start + s, start + e) for s, e in self._tokenizer.offsets(self._segment[start:end]))
            self._next = end

    def release(self, index: int) -> None:
        """Tokens before ``index`` are not read again (dropped in batches, so memory stays a window)."""
        if index - self._base > 4096:
            del self._held[: index - self._base]
            self._base = index


def _pieces(document: SourceDocument) -> Iterator[_Piece]:
    layout = document.layout
    if layout == "pages":
        for number, page in enumerate(document.text.split("\f"), start=1):
            for block in split_tables(page):
                yield _Piece(number, (), block)
    elif layout == "markdown":
        for section in markdown_sections(document.text):
            for block in split_tables(section.text):
                yield _Piece(None, section.path, block)
    else:
        yield _Piece(None, (), Block(document.text))


def _word_cut(segment: str, offsets: list[tuple[int, int]] | _Offsets, first: int, take: int) -> int:
    """Index after the last token to take: ``first + take``, moved back to whitespace if the window has
    some, else to a punctuation boundary, else left inside one very long word."""
    end = first + take
    if end >= len(offsets):
        return len(offsets)
    cuts = range(end, first, -1)
    for cut in cuts:
        if offsets[cut - 1][1] < offsets[cut][0]:
            return cut
    for cut in cuts:
        previous_end, next_start = offsets[cut - 1][1], offsets[cut][0]
        if not (segment[previous_end - 1].isalnum() and segment[next_start].isalnum()):
            return cut
    return end
