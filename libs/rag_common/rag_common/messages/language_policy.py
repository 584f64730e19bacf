"""The one rule for which language a question is in and which language the service's texts take.

The gateway names the question's language once per turn (with its conversation's last language as the
fallback when unsure) and sends it on; the generator names it itself only when a caller sent none.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_common.languages import LanguageIdentifier, identifier_of, identify_query
from rag_common.settings import LanguageSettings

__all__ = ["LanguagePolicy"]


@dataclass(frozen=True)
class LanguagePolicy:
    #: Names a text's language (its model loads on first use).
    identifier: LanguageIdentifier
    #: ``RAG_LANGUAGES``: the languages a question may be named in.
    languages: tuple[str, ...]
    #: ``RAG_DEFAULT_LANGUAGE``: the texts' language when neither the question nor its conversation says.
    default: str

    @classmethod
    def of(cls, settings: LanguageSettings | None = None) -> LanguagePolicy:
        """The policy of the ``RAG_LANGUAGES`` / ``RAG_LANGUAGE_*`` / ``RAG_DEFAULT_LANGUAGE`` settings."""
        settings = settings or LanguageSettings()
        return cls(identifier_of(settings), tuple(settings.languages), settings.default_language)

    def of_question(self, text: str, *, history: str | None = None) -> str | None:
        """``text``'s language among ``languages``; when unsure, ``history`` (the conversation's last
        language); None when neither tells (the neutral analysis)."""
        return identify_query(self.identifier, text, self.languages, history=history).code

    def of_texts(self, question_language: str | None) -> str:
        """The language of the texts answering a question in ``question_language`` (None: unknown)."""
        return question_language or self.default
