"""Numbers in a sentence: digits (either separator), number words, percentages, money, quantities
with units, bare years.

"1.500,50 lei" is 1500.5 RON in Romanian; "1,500.50" 1500.5 anywhere; with one kind of separator
followed by three digits ("1.500", "1,500") the language's decimal separator decides (CLDR: "." for
English, "," for Romanian, German, Spanish...); with no language three digits are a thousands group.
A number right after a reference word ("art. 5", "nr. 1/2011", "§ 3") is a reference, not a value.
A four-digit integer from 1000 to 2099 with nothing attached (no currency, percent, multiplier or
unit of ours) is a year (``DATE``), as is a decade ("1990s", "1990er"). Ordinals ("55th", "al
55-lea", "5e") are numbers with the ordinal's value. Roman numerals right after a capitalised word
("Super Bowl LV", "World War II") are numbers too, up to 100 and never the pronoun "I".
"""

from __future__ import annotations

import re
from functools import cache

from .folding import folded_same_length
from .kinds import AnswerKind, ValueSpan
from .number_words import (
    CURRENCIES,
    MULTIPLIERS,
    PERCENT_WORDS,
    REFERENCE_WORDS,
    UNITS,
    decimal_separator,
    number_words,
)
from .question_words import QUESTION_WORDS
from .roman import roman_value

__all__ = ["format_number", "number_spans", "parse_number"]

_GROUPED = r"(?<![\w.,/])(?:\d{1,3}(?:(?P<sep>[.,\u00a0\u202f\u2009'’%s])\d{3})(?:(?P=sep)\d{3})*(?:[.,]\d+)?|\d+(?:[.,]\d+)?)"
_END = r"(?![\d/]|[.,]\d)"
#: A plain space groups thousands too ("1 160 000", "587 000": the SI style of the other languages'
#: texts); never in English, where "3 100-metre races" are three races.
_DIGITS = re.compile(_GROUPED % " " + _END)
_DIGITS_EN = re.compile(_GROUPED % "" + _END)
_ORDINAL_SUFFIX = re.compile(r"(?:st|nd|rd|th|er|ere|eme|e|º|ª|o|a|-lea|-a)(?!\w)|\.(?=\s+\w)")
_ORDINAL_PREFIX = re.compile(r"(?:\bal|\ba)\s+$")
_DECADE = re.compile(r"(?:'?s|er(?:jahre)?n?)(?!\w)")
_ROMAN = re.compile(r"(?<=[^\W\d_] )(?:[IVXL]{2,7}|[VXL])(?![\w-])")
_SPACE = r"[\s\u00a0\u202f]*"
#: Languages that write ordinals with a period ("der 55. Super Bowl"), up to three digits as in
#: rag_common.sentences: "im Jahr 2019. Danach" ends a sentence with a year.
_PERIOD_ORDINALS = frozenset({"de", "da", "no", "fi", "hu", "tr"})
_YEARS = range(1000, 2100)


def parse_number(raw: str, decimal: str | None) -> float:
    """The value of digits with separators; ``decimal`` is the language's decimal separator, or None."""
    raw = re.sub(r"[ \u00a0\u202f\u2009'’]", "", raw)
    if "." in raw and "," in raw:
        point = "." if raw.rfind(".") > raw.rfind(",") else ","
    elif "." in raw or "," in raw:
        sep = "." if "." in raw else ","
        parts = raw.split(sep)
        grouped = len(parts) > 2 or (len(parts[1]) == 3 and decimal != sep)
        point = "" if grouped else sep
    else:
        point = ""
    thousands = {".": ",", ",": "."}.get(point, "")
    cleaned = raw.replace(thousands, "") if thousands else raw.replace(".", "").replace(",", "")
    return float(cleaned.replace(",", ".")) if point else float(cleaned)


def format_number(value: float) -> str:
    """The shortest decimal of ``value``: 1500.0 → "1500", 1500.5 → "1500.5"."""
    return str(int(value)) if value == int(value) else f"{value:.6f}".rstrip("0").rstrip(".")


def _alternation(words) -> str:
    return "|".join(re.escape(word) for word in sorted(words, key=len, reverse=True))


_MULTIPLIER = re.compile(rf"{_SPACE}({_alternation(MULTIPLIERS)})(?![\w.])|{_SPACE}({_alternation(MULTIPLIERS)})(?!\w)")
_PERCENT_AFTER = re.compile(rf"{_SPACE}(?:%|‰|(?:{_alternation(PERCENT_WORDS)})(?!\w))")
_PERCENT_BEFORE = re.compile(r"(?:%|\byuzde)\s*$")
_CURRENCY_AFTER = re.compile(rf"{_SPACE}({_alternation(CURRENCIES)})(?!\w)")
_CURRENCY_BEFORE = re.compile(rf"({_alternation(CURRENCIES)}){_SPACE}$")
_UNIT_AFTER = re.compile(rf"{_SPACE}({_alternation(UNITS)})(?![\w/²])")
_REFERENCE_BEFORE = re.compile(rf"(?:^|[\s(])(?:{_alternation(REFERENCE_WORDS)}){_SPACE}\(?$")


@cache
def _word_pattern(codes: tuple[str, ...]) -> tuple[re.Pattern[str] | None, dict[str, int]]:
    words: dict[str, int] = {}
    for code in codes:
        words.update(number_words(code))
    if not words:
        return None, words
    return re.compile(rf"(?<![\w-])({_alternation(words)})(?![\w-])"), words


def _extend(folded: str, start: int, end: int, value: float) -> tuple[int, int, str, bool]:
    """Attach a multiplier, a percent sign or word, a currency or a unit around ``[start, end)``:
    (start, end, normalised value, whether anything was attached)."""
    attached = False
    match = _MULTIPLIER.match(folded, end)
    if match:
        value *= MULTIPLIERS[match.group(1) or match.group(2)]
        end, attached = match.end(), True
    text = format_number(value)
    if (match := _PERCENT_AFTER.match(folded, end)) or _PERCENT_BEFORE.search(folded, 0, start):
        if match:
            end = match.end()
        else:
            start = _PERCENT_BEFORE.search(folded, 0, start).start()
        return start, end, f"{text}%", True
    if match := _CURRENCY_AFTER.match(folded, end):
        return start, match.end(), f"{text} {CURRENCIES[match.group(1)]}", True
    if match := _CURRENCY_BEFORE.search(folded, max(0, start - 12), start):
        return match.start(), end, f"{text} {CURRENCIES[match.group(1)]}", True
    if match := _UNIT_AFTER.match(folded, end):
        return start, match.end(), f"{text} {UNITS[match.group(1)]}", True
    return start, end, text, attached


def number_spans(sentence: str, language: str | None) -> list[ValueSpan]:
    """Numbers and bare years of ``sentence`` (NFC text), in order; dates are :mod:`.dates`'s."""
    folded = folded_same_length(sentence)
    decimal = decimal_separator(language) if language in QUESTION_WORDS else None
    spans: list[ValueSpan] = []
    for match in (_DIGITS_EN if language == "en" else _DIGITS).finditer(folded):
        start, end = match.span()
        if _REFERENCE_BEFORE.search(folded, max(0, start - 14), start):
            continue
        raw = match.group()
        value = parse_number(raw, decimal)
        if raw.isdigit() and int(raw) in _YEARS and (decade := _DECADE.match(folded, end)) and raw.endswith("0"):
            spans.append(ValueSpan(AnswerKind.DATE, start, decade.end(), sentence[start:decade.end()], f"{raw}s"))
            continue
        suffix = _ORDINAL_SUFFIX.match(folded, end) if raw.isdigit() else None
        if suffix is not None and (suffix.group() != "." or language in _PERIOD_ORDINALS and len(raw) <= 3):
            prefix = _ORDINAL_PREFIX.search(folded, max(0, start - 4), start)
            first = prefix.start() if prefix else start
            spans.append(ValueSpan(AnswerKind.NUMBER, first, suffix.end(), sentence[first:suffix.end()], raw))
            continue
        first, last, normalised, attached = _extend(folded, start, end, value)
        if raw.isdigit() and int(raw) in _YEARS and not attached:
            spans.append(ValueSpan(AnswerKind.DATE, start, end, raw, raw))
        else:
            spans.append(ValueSpan(AnswerKind.NUMBER, first, last, sentence[first:last], normalised))
    pattern, words = _word_pattern((language,) if language in QUESTION_WORDS else ())
    if pattern is not None:
        for match in pattern.finditer(folded):
            first, last, normalised, _ = _extend(folded, match.start(), match.end(), float(words[match.group(1)]))
            spans.append(ValueSpan(AnswerKind.NUMBER, first, last, sentence[first:last], normalised))
    for match in _ROMAN.finditer(sentence):
        value = roman_value(match.group())
        if value is not None and value <= 100:
            spans.append(ValueSpan(AnswerKind.NUMBER, match.start(), match.end(), match.group(), str(value)))
    return sorted(spans, key=lambda span: span.start)
