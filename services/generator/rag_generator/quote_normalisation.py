"""Text normalisation for matching a model's quote against its source.

Both sides are folded the same way: Unicode compatibility forms (NFKC), case (``casefold``),
typographic quotes and dashes to their ASCII forms, and every run of whitespace to one space.
``normalise_with_offsets`` also keeps, for each character of the folded text, the index of the
original character it came from, so a match found in folded text maps back to the passage's own
words.
"""

from __future__ import annotations

import unicodedata

_QUOTES = {c: "'" for c in "\u2018\u2019\u201a\u201b\u2032\u0060\u00b4"} | {
    c: '"' for c in "\u201c\u201d\u201e\u201f\u2033\u00ab\u00bb"
}
_DASHES = {c: "-" for c in "\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d"}
_FOLD = str.maketrans(_QUOTES | _DASHES)
#: Stripped from both ends of a quote: models often wrap the quote in quotation marks.
_ENCLOSING = " \"'"


def normalise_with_offsets(text: str) -> tuple[str, list[int]]:
    """The folded text and, per folded character, the index of its source character in ``text``."""
    chars: list[str] = []
    origins: list[int] = []
    pending_space = False
    for index, char in enumerate(text):
        if char.isspace():
            pending_space = bool(chars)
            continue
        folded = unicodedata.normalize("NFKC", char).casefold().translate(_FOLD)
        if not folded.strip():
            continue
        if pending_space:
            chars.append(" ")
            origins.append(index)
            pending_space = False
        for piece in folded:
            if piece.isspace():  # NFKC can expand to spaces (e.g. "¼" stays, "\u2002" is caught above)
                piece = " "
            chars.append(piece)
            origins.append(index)
    return "".join(chars), origins


def normalise(text: str) -> str:
    return normalise_with_offsets(text)[0]


def normalise_quote(quote: str) -> str:
    """The folded quote without enclosing quotation marks; ``""`` if nothing quotable is left."""
    folded = normalise(quote).strip(_ENCLOSING)
    return folded if any(char.isalnum() for char in folded) else ""
