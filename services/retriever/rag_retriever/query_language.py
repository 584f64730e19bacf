"""A query's language, and what it changes in a search: which lexical fields and analyzers the
backend queries (``Searcher.search_bm25``'s ``language``) and how far hybrid fusion trusts the dense
list (``EMBEDDER_LANGUAGES``).

The caller may name the language (the gateway does, with the conversation's history to fall back
on: ``SearchRequest.language``); otherwise it is identified here from the query alone. A language
outside ``RAG_LANGUAGES``, or one that cannot be told, is searched as "unsure": the neutral field
plus every configured language's field, which never scored below the neutral field alone
(docs/languages.md).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from rag_common.languages import LanguageIdentifier, identify_query
from rag_common.settings import EmbedderSettings, LanguageSettings
from rag_retriever.backends.base import FusionSettings
from rag_retriever.settings import RetrieverSettings

@dataclass(frozen=True, slots=True)
class QueryLanguages:
    """What the service needs to name a query's language and weigh its dense list; no defaults of its
    own: ``of(settings, language_settings, embedder_settings, identifier)``."""

    identifier: LanguageIdentifier
    #: ``RAG_LANGUAGES``: the languages with a field (and analyzer) of their own in the index.
    analysed: tuple[str, ...]
    #: ``EMBEDDER_LANGUAGES``: which languages the embedder was trained for.
    embedder: EmbedderSettings
    dense_weight: float
    dense_weight_other_language: float

    @classmethod
    def of(
        cls,
        settings: RetrieverSettings,
        languages: LanguageSettings,
        embedder: EmbedderSettings,
        identifier: LanguageIdentifier,
    ) -> QueryLanguages:
        return cls(
            identifier=identifier,
            analysed=tuple(languages.languages),
            embedder=embedder,
            dense_weight=settings.hybrid_dense_weight,
            dense_weight_other_language=settings.hybrid_dense_weight_other_language,
        )

    def fixed(self, dense_weight: float) -> QueryLanguages:
        """The same, with ``dense_weight`` for every query whatever its language (an evaluation run
        that names its weight)."""
        return replace(self, dense_weight=dense_weight, dense_weight_other_language=dense_weight)

    def language_of(self, query: str, declared: str | None) -> str | None:
        """The language to analyse ``query`` in: ``declared`` (the caller's) when it is analysed here,
        else identified; None when it cannot be told or is not analysed here (unsure)."""
        if declared is not None:
            return declared if declared in self.analysed else None
        return identify_query(self.identifier, query, self.analysed).code

    def knows(self, language: str | None) -> bool:
        """Whether the embedder was trained for ``language`` (None: unknown, so not known to be)."""
        return self.embedder.covers(language)

    def fusion_for(self, fusion: FusionSettings, language: str | None) -> FusionSettings:
        """``fusion`` (the configured one) with the dense weight for a query in ``language``."""
        weight = self.dense_weight if self.knows(language) else self.dense_weight_other_language
        return fusion if weight == fusion.dense_weight else fusion.with_dense_weight(weight)

