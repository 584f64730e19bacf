"""Unicode normalisation every analysis starts from, so the same word is the same string.

Romanian writes ș and ț with a comma below; older fonts and keyboards produce the cedilla forms ş and
ţ, and the two are the same letters to a reader. Decomposed text (NFD) splits a letter from its mark,
and tantivy's tokenizer then cuts the word at the mark ("conversațiile" → "conversat", "iile").
"""

from __future__ import annotations

import unicodedata

__all__ = ["fold_diacritics", "normalise_text"]

_CEDILLA_TO_COMMA = str.maketrans({"ş": "ș", "Ş": "Ș", "ţ": "ț", "Ţ": "Ț"})


def normalise_text(text: str) -> str:
    """NFC, with Romanian's cedilla ş/ţ written as the comma-below ș/ț."""
    return unicodedata.normalize("NFC", text).translate(_CEDILLA_TO_COMMA)


def fold_diacritics(text: str) -> str:
    """``text`` without combining marks (ș → s, ă → a, ü → u), for comparisons that must not depend
    on whether the writer typed them; letters without a decomposition (ß, ł, Greek, Cyrillic) stay."""
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(ch for ch in decomposed if not unicodedata.combining(ch)))
