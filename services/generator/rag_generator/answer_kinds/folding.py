"""Text folded for matching: case and diacritics do not matter, and offsets stay those of the text.

Interrogatives, month names and lexicon entries are matched on folded text so that "cand" finds
"când" and "MÄRZ" finds "März". ``folded_same_length`` keeps one character per character (a letter
whose folded form would be longer, like ß → ss under case folding, is only lowercased), so a match
in the folded text is a span of the original.
"""

from __future__ import annotations

import re
from functools import cache

from rag_common.languages.text import fold_diacritics, normalise_text

__all__ = ["fold_key", "folded_same_length"]

_SPACES = re.compile(r"\s+")


@cache
def _fold_char(char: str) -> str:
    folded = fold_diacritics(char.lower())
    return folded if len(folded) == 1 else char.lower() if len(char.lower()) == 1 else char


def folded_same_length(text: str) -> str:
    """``text`` lowercased and without diacritics, character for character (same length, same offsets).

    The text is expected NFC-normalised (``normalise_text``); a decomposed text keeps its marks.
    """
    return "".join(_fold_char(char) for char in text)


def fold_key(text: str) -> str:
    """The comparable form of a word or name: NFC, case-folded, diacritics folded, spaces collapsed."""
    return _SPACES.sub(" ", fold_diacritics(normalise_text(text).casefold())).strip()
