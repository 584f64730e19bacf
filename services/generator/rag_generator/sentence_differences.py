"""What two near-duplicate sentences differ in: the values one states where the other states another.

Sentences are compared as token sequences (difflib): a stretch of one replaced by a stretch of the
other is a difference when both stretches hold a value, a span typed by :mod:`rag_generator.answer_kinds`
(the typed spans it touches give its kind and its comparable form) or else a capitalised word that is
not a sentence-initial function word, or a number (kind ``other``, compared case- and diacritic-blind).
Two stretches whose values compare equal ("1,500" and "1500") are no difference.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cached_property

from rag_common.content_words import stop_words
from rag_common.languages import fold_diacritics
from rag_generator.answer_kinds import AnswerKind, ValueSpan, value_spans
from rag_generator.evidence import EvidenceUnit
from rag_generator.extractive_answerer import SentenceScore

__all__ = ["VALUE_KINDS", "CandidateSentence", "Difference", "differences"]

#: A word, a number with its separators inside ("1,500.25", "2014"), or one other visible character.
_TOKEN = re.compile(r"\w+(?:[.,'’]\w+)*|[^\w\s]")
#: Words a typed value may have and still be the value a change sits in ("$37.6 billion", "14 March 2014").
_VALUE_WORDS = 5
#: The kinds a conflict can be about (``rag_common.schemas.ValueKind``); the rest are "other".
VALUE_KINDS = {
    AnswerKind.PERSON: "person",
    AnswerKind.PLACE: "place",
    AnswerKind.DATE: "date",
    AnswerKind.NUMBER: "number",
    AnswerKind.ORGANISATION: "organisation",
}


@dataclass(frozen=True, slots=True)
class Difference:
    """One value two sentences disagree on: (value, normalised) on each side."""

    kind: str
    first: tuple[str, str]
    second: tuple[str, str]


class CandidateSentence:
    """A candidate with its tokens; its typed values are found on first use (most pairs never need them)."""

    def __init__(self, scored: SentenceScore, rank: int, language: str | None) -> None:
        self.scored = scored
        self.rank = rank
        self.unit = scored.unit
        self.language = scored.unit.passage.language or language
        self.tokens = [(m.group().casefold(), m.start(), m.end()) for m in _TOKEN.finditer(scored.unit.text)]
        self.words = {token for token, _, _ in self.tokens}

    @cached_property
    def spans(self) -> list[ValueSpan]:
        return value_spans(self.unit.text, self.language)


def differences(
    a: CandidateSentence, b: CandidateSentence, similarity: float, max_differences: int
) -> list[Difference]:
    """The values ``a`` and ``b`` differ in, when they are near duplicates (else ``[]``)."""
    if not a.words or not b.words or len(a.words & b.words) < similarity * min(len(a.words), len(b.words)):
        return []  # cheap bound first: most pairs share few words
    left, right = [t[0] for t in a.tokens], [t[0] for t in b.tokens]
    matcher = SequenceMatcher(None, left, right, autojunk=False)
    if matcher.ratio() < similarity:
        return []
    found: dict[tuple[str, str], Difference] = {}
    for i1, i2, j1, j2 in _replaced(matcher.get_opcodes(), left):
        first = _value_at(a, i1, i2)
        second = _value_at(b, j1, j2)
        if first is None or second is None or first[2] == second[2]:
            continue
        kind = first[0] if first[0] == second[0] else "other"
        # A value replaced everywhere it occurs is one difference, however many times it occurs.
        found.setdefault((first[2], second[2]), Difference(kind, first[1:], second[1:]))
    return list(found.values()) if len(found) <= max_differences else []


def _replaced(
    opcodes: Sequence[tuple[str, int, int, int, int]], left: Sequence[str]
) -> list[tuple[int, int, int, int]]:
    """The stretches replaced on both sides, those one punctuation mark apart joined ("23-16" for
    "26-13" is one stretch, not two); a word only one side has is wording, not a value."""
    stretches: list[tuple[int, int, int, int]] = []
    last_equal: tuple[int, int] | None = None
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "equal":
            last_equal = (i1, i2)
            continue
        if tag != "replace":
            last_equal = None
            continue
        joined = stretches and last_equal is not None and last_equal[0] == stretches[-1][1]
        if joined and last_equal[1] - last_equal[0] == 1 and not left[last_equal[0]].isalnum():
            stretches[-1] = (stretches[-1][0], i2, stretches[-1][2], j2)
        else:
            stretches.append((i1, i2, j1, j2))
        last_equal = None
    return stretches


def _value_at(sentence: CandidateSentence, i1: int, i2: int) -> tuple[str, str, str] | None:
    """(kind, text, normalised) of the value the tokens ``i1:i2`` change: the typed spans they touch,
    else the changed words themselves if they hold a name or a number; None for plain wording."""
    start, end = sentence.tokens[i1][1], sentence.tokens[i2 - 1][2]
    # The typed spans the change sits in ("$37.6 billion" for "37.6") or covers half of; a span far longer
    # than the change (a run of names over half the sentence) is not the value.
    touched = [span for span in sentence.spans
               if 2 * (min(end, span.end) - max(start, span.start)) >= span.end - span.start
               or (span.start <= start and end <= span.end and len(span.text.split()) <= _VALUE_WORDS)]
    if touched:
        kinds = {span.kind for span in touched}
        kind = VALUE_KINDS.get(touched[0].kind, "other") if len(kinds) == 1 else "other"
        # As the source words it: the changed words and the values they touch ("the West", "$37.6 billion").
        low, high = min(start, *(s.start for s in touched)), max(end, *(s.end for s in touched))
        text = sentence.unit.text[low:high]
        return kind, text, " ".join(span.normalised for span in touched)
    words = sentence.unit.text[start:end]
    if not any(ch.isdigit() for ch in words) and not _named(words.split(), sentence.language, first=i1 == 0):
        return None
    return "other", words, _folded(words)


def _named(words: Sequence[str], language: str | None, *, first: bool) -> bool:
    """A capitalised word among ``words``; the sentence's first word only if it is no function word
    ("Facebook acquired..." names Facebook, "In many parts..." names nothing)."""
    ignored = stop_words(language)
    return any(
        word[:1].isupper() and (n > 0 or not first or _folded(word.strip(".,;:")) not in ignored)
        for n, word in enumerate(words)
    )


def _folded(text: str) -> str:
    return " ".join(fold_diacritics(text).casefold().split())
