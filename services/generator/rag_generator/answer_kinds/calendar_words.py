"""Month names per language, from Babel's copy of the Unicode CLDR (babel is pinned in constraints.txt).

Both CLDR contexts are kept: the "format" forms are the genitives some languages write in a date
("1 января", "1. tammikuuta", "1 Ιανουαρίου"), the "stand-alone" forms the nominatives ("январь");
abbreviations too ("Jan.", "ian."), those shorter than three letters excepted. Names are folded
(case and diacritics), so "Marz" and "martie" are found as well as "März".
"""

from __future__ import annotations

from functools import cache

from babel import Locale

from .folding import folded_same_length

__all__ = ["day_names", "month_names"]

_CONTEXTS = ("format", "stand-alone")
_WIDTHS = ("wide", "abbreviated")


@cache
def month_names(codes: tuple[str, ...]) -> dict[str, int]:
    """Folded month name → month number (1–12), over the languages ``codes``."""
    names: dict[str, int] = {}
    for code in codes:
        months = Locale.parse(code).months
        for context in _CONTEXTS:
            for width in _WIDTHS:
                for number, name in months[context][width].items():
                    folded = folded_same_length(name.strip().rstrip("."))
                    if len(folded) >= 3 and not folded.isdigit():
                        names.setdefault(folded, number)
    return names


@cache
def day_names(codes: tuple[str, ...]) -> frozenset[str]:
    """Folded weekday names (wide, both contexts) over the languages ``codes``."""
    return frozenset(
        folded_same_length(name)
        for code in codes
        for context in _CONTEXTS
        for name in Locale.parse(code).days[context]["wide"].values()
    )
