"""Explicit constraints of a question (a year, a range of years, a date, a named edition) and whether
a sentence contradicts them.

An edition is a name with a number or year right next to it: "Super Bowl LV", "Super Bowl 50", "the
55th Super Bowl", "the 2018 Winter Olympics", "Wimbledon 2019", "Wimbledon in 2019". A question's
loose years count unless attributive or an inequality ("a 2016 film", "before 2000"; ``_YEAR_NOT_ASKED``).
A sentence contradicts the question when (precision over recall):

- it names an edition of the same event (same name, or one name's words inside the other's) of the
  same sort (year with year, number with number) but a different one, and not the asked one; or
- the question asks about years, the sentence gives years, none of them is asked (or inside an
  asked range), and one is within ``NEAR_YEARS`` of an asked one. A far year is usually another
  fact (a birth, a founding) about the right event, not the wrong edition of it.

Days are kept in ``Constraints.dates`` for callers, but a different day of the asked year is never a
contradiction here: events span days and sources round them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from rag_common.languages.text import normalise_text

from .folding import folded_same_length
from .kinds import AnswerKind, ValueSpan
from .spans import value_spans

__all__ = ["NEAR_YEARS", "Constraints", "Edition", "contradicts", "editions", "question_constraints"]

#: A sentence year this close to an asked year (and not asked) contradicts the question.
NEAR_YEARS = 5
#: Characters between a name and its number in an edition ("Super Bowl LV": one space); a name may
#: also be followed by a short preposition and a year ("Wimbledon in 2019", "Super Bowl din 2022").
_ADJACENT = 1
_NAME_IN_YEAR = 4
#: Words before a year in a question that keep it from being a constraint: an article makes it
#: attributive in English and German ("a 2016 Indian film", "the 1063 invasion" describe another hop
#: of a multi-hop question), and "before/after/since/until 2000" are not an equality.
_YEAR_NOT_ASKED = re.compile(
    r"(?<!\w)(?:a|an|the|der|die|das|den|dem|des|ein|eine|einem|einer|eines|before|after|since|until|by|"
    r"inainte de|dupa|pana in|de la|vor|nach|seit|bis|antes de|despues de|desde|hasta|avant|apres|depuis|jusqu'en)"
    r"\s+$"
)
_ORDINAL = re.compile(r"\d+(?:st|nd|rd|th|\.|-lea|-a|e|er|eme|º|ª)$|^al? \d+", re.IGNORECASE)
_NUMERAL = re.compile(r"\d+|[IVXLC]+")
_YEAR = re.compile(r"\d{4}")
_NAMES = (AnswerKind.PERSON, AnswerKind.ORGANISATION, AnswerKind.PLACE)
_RANGE = re.compile(
    r"(?<!\d)(\d{4})\s*[-–—/]\s*(\d{4})(?!\d)|"
    r"(?<!\w)(?:between|from|intre|din|de la|zwischen|von|entre|de|desde|tra|fra|mellan|tussen|van|mezi)\s+(\d{4})\s+"
    r"(?:and|to|until|si|pana in|pana la|la|bis|und|y|a|hasta|et|e|og|och|en|tot|ate)\s+(\d{4})(?!\d)"
)


@dataclass(frozen=True, slots=True)
class Edition:
    """An event and the number or year naming one edition of it."""

    event: str  # the name's normalised form: "super bowl"
    kind: AnswerKind  # DATE for a year ("2018 Winter Olympics"), NUMBER for a numeral or ordinal
    value: str  # "2018", "55"


@dataclass(frozen=True, slots=True)
class Constraints:
    """What a question fixes explicitly; empty when it fixes nothing."""

    years: frozenset[int] = frozenset()
    year_ranges: tuple[tuple[int, int], ...] = ()
    dates: frozenset[str] = frozenset()  # full dates as ValueSpan.normalised: "2019-01-01"
    editions: tuple[Edition, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.years or self.year_ranges or self.dates or self.editions)


def _year(span: ValueSpan) -> int | None:
    if span.kind is AnswerKind.DATE and _YEAR.match(span.normalised):
        return int(span.normalised[:4])
    return None


def editions(spans: Sequence[ValueSpan]) -> list[Edition]:
    """Editions among a sentence's spans: a name next to a plain year or a number."""
    found: list[Edition] = []
    ordered = sorted(spans, key=lambda span: span.start)
    for before, after in zip(ordered, ordered[1:]):
        gap = after.start - before.end
        if gap > _NAME_IN_YEAR or gap > _ADJACENT and not (before.kind in _NAMES and after.kind is AnswerKind.DATE):
            continue
        for name, number, name_first in ((before, after, True), (after, before, False)):
            if name.kind not in _NAMES or not number.normalised.isdigit():
                continue
            if number.kind is AnswerKind.DATE:
                found.append(Edition(name.normalised, AnswerKind.DATE, number.normalised))
            elif number.kind is AnswerKind.NUMBER and gap <= _ADJACENT and (
                _NUMERAL.fullmatch(number.text) if name_first else _ORDINAL.search(number.text)
            ):
                # "Super Bowl 50", "Super Bowl LV"; "the 55th Super Bowl", "der 55. Super Bowl" (not "5 Sacks")
                found.append(Edition(name.normalised, AnswerKind.NUMBER, number.normalised))
    return found


def question_constraints(question: str, language: str | None) -> Constraints:
    """The years, ranges of years, full dates and editions ``question`` names."""
    spans = value_spans(question, language)
    ranges = []
    for match in _RANGE.finditer(folded_same_length(normalise_text(question))):
        low, high = (int(group) for group in match.groups() if group)
        if low <= high:
            ranges.append((low, high))
    ranges += [(int(span.normalised[:4]), int(span.normalised[:4]) + 9) for span in spans
               if span.kind is AnswerKind.DATE and span.normalised.endswith("s")]
    in_range = {year for low, high in ranges for year in (low, high)}
    folded = folded_same_length(normalise_text(question))
    years = {
        year for span in spans
        if (year := _year(span)) is not None and year not in in_range
        and not _YEAR_NOT_ASKED.search(folded, max(0, span.start - 16), span.start)
    }
    dates = {span.normalised for span in spans if span.kind is AnswerKind.DATE and len(span.normalised) == 10}
    return Constraints(frozenset(years), tuple(ranges), frozenset(dates), tuple(editions(spans)))


def _same_event(first: str, second: str) -> bool:
    a, b = set(first.split()), set(second.split())
    return a <= b or b <= a


def _asked(year: int, constraints: Constraints) -> bool:
    return year in constraints.years or any(low <= year <= high for low, high in constraints.year_ranges)


def contradicts(sentence_spans: Sequence[ValueSpan], constraints: Constraints) -> bool:
    """Whether a sentence (its ``value_spans``) names another year or edition than the question's
    constraints ask for, and not the asked one."""
    if not constraints:
        return False
    found = editions(sentence_spans)
    for asked in constraints.editions:
        same = [edition for edition in found if edition.kind is asked.kind and _same_event(edition.event, asked.event)]
        if same and all(edition.value != asked.value for edition in same):
            return True
    if not (constraints.years or constraints.year_ranges):
        return False
    years = {year for span in sentence_spans if (year := _year(span)) is not None}
    if not years or any(_asked(year, constraints) for year in years):
        return False
    bounds = [*constraints.years, *(bound for pair in constraints.year_ranges for bound in pair)]
    return any(abs(year - bound) <= NEAR_YEARS for year in years for bound in bounds)
