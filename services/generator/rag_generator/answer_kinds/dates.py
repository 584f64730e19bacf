"""Dates in a sentence: numeric (2019-01-01, 01.01.2019, 1/2/2019), with month names in any of the
17 languages ("1 ianuarie 2019", "am 1. Januar 2019", "January 1, 2019", "1er janvier", "1 de enero
de 2019", "2019. január 1."), month and year ("März 2019"), and centuries ("19th century", "secolul
al XIX-lea", "19. Jahrhundert", "siglo XIX", "XIXe siècle"). A month name counts only next to a day
or a year: alone, "mai" is Romanian for "more" and "May" an English modal. Bare years and decades
are :mod:`.quantities`'s. Numeric day/month order is month first in English, day first elsewhere.
"""

from __future__ import annotations

import re
from functools import cache

from .calendar_words import month_names
from .folding import folded_same_length
from .kinds import AnswerKind, ValueSpan
from .question_words import QUESTION_WORDS
from .roman import roman_value

__all__ = ["date_spans"]

_ISO = re.compile(r"(?<![\d.])(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_NUMERIC = re.compile(r"(?<![\d.,/])(\d{1,2})([./-])(\d{1,2})\2(\d{4})(?!\d)")
_CENTURY = re.compile(
    r"(?<!\w)(?:(\d{1,2})(?:st|nd|rd|th)?[\s-]+century|(\d{1,2})\.\s+jahrhundert\w*|secolul\s+(?:al\s+)?([xvi]+|\d{1,2})(?:-lea)?"
    r"|siglo\s+([xvi]+)|([xvi]+)(?:e|eme)\s+siecle|(\d{1,2})(?:e|eme)\s+siecle|([xvi]+)\s+secolo|seculo\s+([xvi]+))(?!\w)"
)

#: Languages that capitalise month names, where a lowercase one is another word ("may", "march").
_CAPITALISED_MONTHS = frozenset({"en", "de"})


@cache
def _patterns(codes: tuple[str, ...]) -> tuple[re.Pattern[str], ...]:
    names = sorted(month_names(codes), key=len, reverse=True)
    month = "(?P<month>" + "|".join(re.escape(name) for name in names) + r")\.?"
    year = r"(?P<year>\d{4})(?!\d)"
    return (
        # 2019. január 1. (Hungarian)
        re.compile(rf"(?<![\w.,])(?P<year>\d{{4}})\.\s+{month}\s+(?P<day>\d{{1,2}})\.?(?!\d)"),
        # 1 January 2019, 1. Januar 2019, 1er janvier 2019, 1 de enero de 2019, 1 января 2019
        re.compile(rf"(?<![\w.,])(?P<day>\d{{1,2}})(?:\.|st|nd|rd|th|er|o|º)?\s+(?:de\s+|of\s+)?{month}(?!\w)"
                   rf"(?:,?\s+(?:de\s+|del\s+)?{year})?"),
        # January 1, 2019
        re.compile(rf"(?<!\w){month}\s+(?P<day>\d{{1,2}})(?:st|nd|rd|th)?(?!\d)(?:,?\s+{year})?"),
        # January 2019, enero de 2019
        re.compile(rf"(?<!\w){month}\s+(?:de\s+|of\s+|del\s+)?{year}"),
    )


def _normalised(year: int | None, month: int | None, day: int | None) -> str | None:
    if month is not None and not 1 <= month <= 12 or day is not None and not 1 <= day <= 31:
        return None
    if year is None:
        return f"--{month:02d}-{day:02d}"
    if day is None:
        return f"{year:04d}-{month:02d}"
    return f"{year:04d}-{month:02d}-{day:02d}"


def date_spans(sentence: str, language: str | None) -> list[ValueSpan]:
    """Dates and centuries of ``sentence`` (NFC text), non-overlapping, in order."""
    folded = folded_same_length(sentence)
    codes = (language,) if language in QUESTION_WORDS else tuple(QUESTION_WORDS)
    months = month_names(codes)
    found: list[ValueSpan] = []

    def add(start: int, end: int, normalised: str | None) -> None:
        if normalised and not any(span.start < end and start < span.end for span in found):
            found.append(ValueSpan(AnswerKind.DATE, start, end, sentence[start:end], normalised))

    for match in _ISO.finditer(folded):
        add(*match.span(), _normalised(int(match[1]), int(match[2]), int(match[3])))
    for match in _NUMERIC.finditer(folded):
        first, second = int(match[1]), int(match[3])
        month, day = (first, second) if language == "en" and first <= 12 else (second, first)
        add(*match.span(), _normalised(int(match[4]), month, day))
    for pattern in _patterns(codes):
        for match in pattern.finditer(folded):
            if language in _CAPITALISED_MONTHS and not sentence[match.start("month")].isupper():
                continue  # "they may 5 times"
            groups = match.groupdict()
            month = months[match["month"]]
            day = int(groups["day"]) if groups.get("day") else None
            year = int(groups["year"]) if groups.get("year") else None
            add(*match.span(), _normalised(year, month, day))
    for match in _CENTURY.finditer(folded):
        numeral = next(group for group in match.groups() if group)
        value = int(numeral) if numeral.isdigit() else roman_value(numeral)
        if value and 1 <= value <= 21:
            add(*match.span(), f"century {value}")
    return sorted(found, key=lambda span: span.start)
