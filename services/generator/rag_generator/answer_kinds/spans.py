"""The typed values of a sentence, and the kind of a bare value (a gold answer, an extracted span)."""

from __future__ import annotations

from rag_common.languages.text import normalise_text

from .calendar_words import month_names
from .dates import date_spans
from .folding import fold_key, folded_same_length
from .kinds import AnswerKind, ValueSpan
from .names import name_spans
from .quantities import number_spans
from .question_words import QUESTION_WORDS

__all__ = ["value_kind", "value_spans"]

#: Share of a bare value's characters one kind's spans must cover for the value to be of that kind.
_MIN_COVER = 0.5
#: A value of this many words or more that is no single typed value is a description.
_DESCRIPTION_WORDS = 6
#: A short value holding a number or date is a quantity or date ("340 miles", "mayores de 18 años").
_QUANTITY_WORDS = 4
_NAMES = (AnswerKind.PERSON, AnswerKind.PLACE, AnswerKind.ORGANISATION)
_YES_NO = frozenset(
    "yes no da nu ja nein si sí non oui sim não nao ja nee nej ja nei kyllä ei igen nem evet hayır hayir "
    "да нет ναι όχι نعم لا".split()
)


def _overlaps(span: ValueSpan, others: list[ValueSpan]) -> bool:
    return any(span.start < other.end and other.start < span.end for other in others)


def _spans(text: str, language: str | None, sentence_start: bool) -> list[ValueSpan]:
    spans = date_spans(text, language)
    spans += [span for span in number_spans(text, language) if not _overlaps(span, spans)]
    spans += [span for span in name_spans(text, language, sentence_start) if not _overlaps(span, spans)]
    return sorted(spans, key=lambda span: (span.start, span.end))


def value_spans(sentence: str, language: str | None) -> list[ValueSpan]:
    """Every typed value in ``sentence``: dates and years, numbers, names (person, place,
    organisation), non-overlapping, in order. ``language`` is an ISO code of the registry or ``None``
    (every language's month names; no number words; no language's decimal separator).
    Offsets are into ``normalise_text(sentence)``, which is ``sentence`` itself for NFC text."""
    return _spans(normalise_text(sentence), language, sentence_start=True)


def value_kind(text: str, language: str | None) -> AnswerKind:
    """The kind of a bare value: the kind whose spans cover at least half of it ("Denver Broncos",
    "February 7, 2016", "1.500 lei"), a yes/no word, a description when it is a longer phrase of
    no single kind, else ``UNKNOWN``."""
    text = normalise_text(text).strip().strip(".,;:!?\"'“”„«»()")
    if not text:
        return AnswerKind.UNKNOWN
    if fold_key(text) in _YES_NO:
        return AnswerKind.YES_NO
    codes = (language,) if language in QUESTION_WORDS else tuple(QUESTION_WORDS)
    if folded_same_length(text) in month_names(codes):
        return AnswerKind.DATE  # a bare month ("March", "martie"); in a sentence one needs a number
    spans = _spans(text, language, sentence_start=False)
    cover: dict[AnswerKind, int] = {}
    for span in spans:
        group = AnswerKind.PERSON if span.kind in _NAMES else span.kind
        cover[group] = cover.get(group, 0) + span.end - span.start
    if cover:
        kind, covered = max(cover.items(), key=lambda item: item[1])
        if covered >= _MIN_COVER * len(text):
            return _name_kind(spans) if kind is AnswerKind.PERSON else kind
    words = len(text.split())
    quantities = [span.kind for span in spans if span.kind in (AnswerKind.NUMBER, AnswerKind.DATE)]
    if quantities and words <= _QUANTITY_WORDS:
        return quantities[0]
    return AnswerKind.DESCRIPTION if words >= _DESCRIPTION_WORDS else AnswerKind.UNKNOWN


def _name_kind(spans: list[ValueSpan]) -> AnswerKind:
    """Names together ("Novgorod and Pskov", "Africa de Nord și Vest"): a place or an organisation
    among them names the group; a person is only what the rules could not place."""
    cover: dict[AnswerKind, int] = {}
    for span in spans:
        if span.kind in _NAMES:
            cover[span.kind] = cover.get(span.kind, 0) + span.end - span.start
    known = {kind: chars for kind, chars in cover.items() if kind is not AnswerKind.PERSON}
    return max(known.items(), key=lambda item: item[1])[0] if known else AnswerKind.PERSON
