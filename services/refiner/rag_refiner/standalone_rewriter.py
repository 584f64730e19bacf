"""Ask the chat model for a standalone form of a follow-up message."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel

from rag_common.schemas import HistoryTurn
from rag_refiner.llm_call import UnusableOutput
from rag_refiner.rewrite_prompt import REWRITE_SCHEMA, build_rewrite_messages


class UnusableRewrite(UnusableOutput):
    """The model answered, but not with a ``{"query": str}`` object."""


class StandaloneQuestionRewriter:
    """One structured-output call; transport errors propagate, malformed replies raise ``UnusableRewrite``."""

    def __init__(self, chat_model: BaseChatModel):
        # Grammar-constrained JSON measured more faithful with SmolLM2 than free text, which
        # tends to answer the question instead of restating it (see docs/refiner.md).
        self._structured = chat_model.with_structured_output(REWRITE_SCHEMA, method="json_schema", include_raw=True)

    async def rewrite(self, message: str, history: Sequence[HistoryTurn], language: str | None = None) -> str:
        """The standalone question, in ``language`` when it is known."""
        result: dict[str, Any] = await self._structured.ainvoke(build_rewrite_messages(message, history, language))
        parsed = result.get("parsed")
        if result.get("parsing_error") is not None or not isinstance(parsed, dict):
            raise UnusableRewrite(f"unparseable model output: {_raw_text(result)[:120]!r}")
        query = parsed.get("query")
        if not isinstance(query, str):
            raise UnusableRewrite(f"model output has no string 'query': {parsed!r:.120}")
        return " ".join(query.split())


def _raw_text(result: dict[str, Any]) -> str:
    raw = result.get("raw")
    content = getattr(raw, "content", "")
    return content if isinstance(content, str) else str(content)
