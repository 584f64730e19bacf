"""Roman numerals ("Super Bowl LV", "secolul al XIX-lea", "Henry VIII")."""

from __future__ import annotations

import re

__all__ = ["roman_value"]

_VALID = re.compile(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})", re.IGNORECASE)
_VALUES = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100, "d": 500, "m": 1000}


def roman_value(text: str) -> int | None:
    """The value of a well-formed Roman numeral (either case), else ``None`` ("IIII", "IC", "" are not)."""
    if not text or _VALID.fullmatch(text) is None:
        return None
    digits = [_VALUES[char] for char in text.lower()]
    return sum(-value if value < following else value for value, following in zip(digits, digits[1:] + [0]))
