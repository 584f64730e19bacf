"""A document's language at ingestion: the one it declares (``DocumentIn.language``, or an upload's
``language`` field), else the one identified from its text; None when neither names one of
``RAG_LANGUAGES`` (then its chunks are analysed language-neutrally).

Identification reads the first few thousand characters (``rag_common.languages.identify_document``):
enough for a confident answer on any real document, and a bounded cost per document whatever its size.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_common.languages import LanguageIdentifier, identify_document


@dataclass(frozen=True, slots=True)
class DocumentLanguages:
    identifier: LanguageIdentifier
    #: ``RAG_LANGUAGES``: the languages analysed in their own right.
    analysed: tuple[str, ...]

    def language_of(self, text: str, declared: str | None) -> str | None:
        """``declared`` when it is analysed here, else identified from ``text`` (``identify_document``)."""
        return identify_document(self.identifier, text, self.analysed, declared=declared).code

    def languages_of(self, texts: Sequence[str], declared: Sequence[str | None]) -> list[str | None]:
        return [self.language_of(text, language) for text, language in zip(texts, declared, strict=True)]
