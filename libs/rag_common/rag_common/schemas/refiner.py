"""The refiner's request and response."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from rag_common.schemas.wire import Intent, LanguageCode, MAX_MESSAGE_CHARS, WireModel
from rag_common.schemas.passages import HistoryTurn


class RefineRequest(WireModel):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    history: list[HistoryTurn] = Field(default_factory=list)
    #: Also write a hypothetical answer (HyDE) to search with.
    hyde: bool = False
    #: The message's language as the caller named it (``rag_common.languages.identify_query``); None: unknown.
    language: LanguageCode | None = None


class RefineResponse(WireModel):
    query: str
    rewritten: bool
    #: ``passthrough`` (first message, or a non-rag intent: nothing to rewrite), ``llm`` (model rewrite accepted), ``context_append``
    #: (model rewrite rejected by the guard, context appended verbatim), ``fallback`` (model
    #: failed or timed out: raw message used).
    method: Literal["passthrough", "llm", "context_append", "fallback"]
    detail: str = ""
    intent: Intent = "rag"
    #: How the intent was decided: cheap ``rules`` / ``embedding`` classifier first, the ``llm`` only
    #: when those are unsure, ``fallback`` when the LLM was needed but failed (then ``rag``).
    intent_method: Literal["rules", "embedding", "llm", "fallback"] = "rules"
    #: The hypothetical answer to search with, when HyDE was asked for and succeeded.
    hyde_query: str | None = None
