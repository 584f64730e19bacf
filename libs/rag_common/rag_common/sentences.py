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

A period is not a boundary after an abbreviation of the text's language
(:mod:`rag_common.languages.abbreviations`: "art. 5 alin. (2)", "prof. univ. dr. Ion", "z. B.", "e.g."),
nor after these, whatever the language: an uppercase letter (initials, "J. R. R. Tolkien"); a lowercase
letter or letters joined by periods ("p. 5", "U.S.", "ș.a.m.d.") unless an uppercase word follows; a
number when a lowercase word follows ("1. januar"; in a language that writes ordinals with a period,
any number of up to three digits, "am 1. Januar", unless an abbreviation names it: "Abs. 2. Der").
Decimals ("3.5") never had a space to cut at. The chunker and the generator pass the chunk's language
(``ChunkRecord.language``, ``Passage.language``), so both cut a chunk alike; no language means
English's abbreviations, the rule before languages existed.
"""

from __future__ import annotations

import re

from rag_common.languages.abbreviations import Abbreviations, abbreviations

__all__ = ["sentence_spans"]

_LINE = re.compile(r"[^\n\f]+")
_SENTENCE_END = re.compile(r"(?<=[.!?…])\s+|(?<=[.!?…][\"'”’)\]])\s+")
#: A line that starts a block of its own kind: heading, table row, quote, bullet or numbered item.
_BLOCK_START = re.compile(r"[ \t]*(?:#{1,6}[ \t]|\||>|[-*+][ \t]|\d{1,3}[.)][ \t])")
#: Lines that are a block by themselves, whatever follows: headings and table rows.
_STANDALONE = re.compile(r"[ \t]*(?:#{1,6}[ \t]|\|)")
#: Letters joined by periods, the last period excluded: "U.S", "a.m", "ș.a.m.d", "O.U.G".
_DOTTED = re.compile(r"(?:[^\W\d_]{1,3}\.)+[^\W\d_]{1,3}")
_ROMAN = re.compile(r"[IVXLCDM]+")
#: Opening punctuation around a word that is not part of it: "(cf.", "„Nr.".
_OPENERS = "([{\"'“‘„«‹"
#: Characters looked at either side of a period: enough for any abbreviation or Roman numeral, and a
#: bound on the work per period in text with very long "words" (base64, URLs).
_LONGEST_WORD = 40
#: Punctuation after a word that is not part of it: "II)." is the Roman numeral "II".
_CLOSERS = ".,;:)]}\"'”’»›"


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


def sentence_spans(text: str, language: str | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` character offsets of each unit of ``text``, whitespace-trimmed, in order.

    Offsets index ``text`` itself (no normalisation), so ``text[start:end]`` is the unit verbatim and
    callers can point back into the original; a unit may contain the line breaks of a wrapped
    paragraph. Blank units are dropped. ``language``: the text's ISO 639-1 code, whose abbreviations
    do not end a sentence; None → English's (a code without a list → only the rules for every language).
    """
    known = abbreviations(language)
    spans: list[tuple[int, int]] = []
    for start, end, table_row in _blocks(text):
        if table_row:
            spans.append((start, end))
            continue
        for match in _SENTENCE_END.finditer(text, start, end):
            if _continues(text, start, match.start(), match.end(), end, known):
                continue
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


def _continues(text: str, start: int, stop: int, resume: int, end: int, known: Abbreviations) -> bool:
    """Whether the period at ``stop - 1`` (followed by whitespace up to ``resume``) is not a boundary;
    ``start``..``end``: the current sentence's start and the block's end."""
    if text[stop - 1] != ".":
        return False
    before = _word_before_period(text, start, stop - 1)
    if before is None:
        return False
    word_start, word = before
    word_end, ceiling = resume, min(end, resume + _LONGEST_WORD)
    while word_end < ceiling and not text[word_end].isspace():
        word_end += 1
    following = text[resume:word_end].lstrip(_OPENERS)
    if word.isdigit():
        if not following or following[0].islower():
            return bool(following)
        # An ordinal ("am 1. Januar"), unless an abbreviation names the number ("Abs. 2. Der").
        return known.ordinal_dot and len(word) <= 3 and not _names_a_number(text, start, word_start, known)
    letter = len(word) == 1 and word.isalpha()
    if letter and word.isupper():
        return True  # an initial: "J. R. R. Tolkien"
    # A lowercase letter ("p. 5", "Y. p. orientalis") ends a sentence before a capital ("integer n. It").
    kind = known.kind(word) or ("final" if letter else None)
    if kind == "inner":
        return True
    if kind == "final" or _DOTTED.fullmatch(word):
        # Ends a sentence only before a capitalised word that is not a Roman numeral ("cap. II").
        opens_sentence = bool(following) and following[0].isupper() and not _ROMAN.fullmatch(following.rstrip(_CLOSERS))
        return not opens_sentence
    return False


def _word_before_period(text: str, start: int, period: int) -> tuple[int, str] | None:
    """``(start, word)`` of the word ending at ``period`` (opening punctuation stripped); None when
    there is none or it is longer than any abbreviation."""
    begin, floor = period, max(start, period - _LONGEST_WORD)
    while begin > floor and not text[begin - 1].isspace():
        begin -= 1
    if begin > start and not text[begin - 1].isspace():
        return None
    word = text[begin:period].lstrip(_OPENERS)
    return (begin, word) if word else None


def _names_a_number(text: str, start: int, position: int, known: Abbreviations) -> bool:
    """Whether an abbreviation or an initial and its period stand right before ``position``:
    "Abs. 2", "S. 5", where the number is a reference rather than an ordinal."""
    period = position
    while period > start and text[period - 1].isspace():
        period -= 1
    if period == position or period == start or text[period - 1] != ".":
        return False
    before = _word_before_period(text, start, period - 1)
    if before is None:
        return False
    word = before[1]
    return (len(word) == 1 and word.isalpha()) or known.kind(word) is not None
