"""Languages: which ones the product analyses (``registry``), how a text's language is named
(``identifier`` + ``py3langid_identifier``) and the normalisation every analysis starts from (``text``).

``identify_query`` and ``identify_document`` hold the fallbacks, so every service falls back the same way.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_common.languages.identifier import LanguageGuess, LanguageIdentifier
from rag_common.languages.registry import LANGUAGES, Language, UnsupportedLanguageError, language, languages
from rag_common.languages.text import fold_diacritics, normalise_text
from rag_common.settings import LanguageSettings

__all__ = [
    "LANGUAGES",
    "Language",
    "LanguageGuess",
    "LanguageIdentifier",
    "UnsupportedLanguageError",
    "fold_diacritics",
    "identifier_of",
    "identify_document",
    "identify_query",
    "language",
    "languages",
    "normalise_text",
]


def identifier_of(settings: LanguageSettings) -> LanguageIdentifier:
    from rag_common.languages.py3langid_identifier import Py3LangidIdentifier

    return Py3LangidIdentifier(
        min_confidence=settings.language_min_confidence, other_confidence=settings.language_other_confidence
    )


def identify_query(
    identifier: LanguageIdentifier, text: str, languages: Sequence[str], *, history: str | None = None
) -> LanguageGuess:
    """A question's language; when unsure, ``history`` (its conversation's last confident language,
    if it is one of ``languages``), else neutral. A confidently other language stays neutral: the
    user switched to a language we do not analyse, and the history would mislead the analysis."""
    guess = identifier.identify(text, languages)
    if guess.reason == "unsure" and history in languages:
        return LanguageGuess(history, guess.confidence, "history")
    return guess


def identify_document(
    identifier: LanguageIdentifier, text: str, languages: Sequence[str], *, declared: str | None = None
) -> LanguageGuess:
    """A document's language: ``declared`` (by the uploader or a crawl config) when it is one of
    ``languages``; a declared language that is not stays neutral (the uploader knows better than a
    guess); undeclared, identified from ``text`` (its first few thousand characters are plenty)."""
    if declared is not None:
        return LanguageGuess(declared if declared in languages else None, 1.0, "declared")
    return identifier.identify(text[:4000], languages)
