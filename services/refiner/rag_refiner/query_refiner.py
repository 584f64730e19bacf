"""Turn the latest chat message into the query the retriever should search for."""

from __future__ import annotations

import asyncio
import logging

from langchain_core.language_models import BaseChatModel

from rag_common.schemas import HistoryTurn, RefineRequest, RefineResponse
from rag_refiner.rewrite_guard import check_rewrite
from rag_refiner.standalone_rewriter import StandaloneQuestionRewriter, UnusableRewrite

logger = logging.getLogger(__name__)


class QueryRefiner:
    """First message: used as is. Follow-up: a guarded model rewrite, else a deterministic one.

    ``refine`` never raises: a refiner failure must not stop the chat, and the raw message is
    always a usable (if weaker) query.
    """

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        history_turns: int = 3,
        history_answer_chars: int = 300,
        max_query_chars: int = 400,
        llm_timeout_s: float = 20.0,
    ):
        self._rewriter = StandaloneQuestionRewriter(chat_model)
        self._history_turns = history_turns
        self._history_answer_chars = history_answer_chars
        self._max_query_chars = max_query_chars
        self._llm_timeout_s = llm_timeout_s

    async def refine(self, request: RefineRequest) -> RefineResponse:
        message = request.message
        if not request.history:
            return RefineResponse(query=message, rewritten=False, method="passthrough", detail="no history")

        history = self.prompt_history(request.history)
        try:
            async with asyncio.timeout(self._llm_timeout_s):
                rewrite = await self._rewriter.rewrite(message, history)
        except UnusableRewrite as exc:
            return self._append_context(message, history, f"model output unusable: {exc}")
        except TimeoutError:
            logger.warning("rewrite timed out after %ss; using the raw message", self._llm_timeout_s)
            return RefineResponse(
                query=message, rewritten=False, method="fallback", detail=f"llm timed out after {self._llm_timeout_s:g}s"
            )
        except Exception as exc:  # noqa: BLE001 - any model failure degrades to the raw message
            logger.warning("rewrite failed (%s); using the raw message", type(exc).__name__)
            return RefineResponse(
                query=message, rewritten=False, method="fallback", detail=f"llm error: {type(exc).__name__}: {exc}"[:300]
            )

        verdict = check_rewrite(rewrite, message, history, max_query_chars=self._max_query_chars)
        if not verdict.accepted:
            return self._append_context(message, history, f"guard rejected rewrite ({verdict.failed_check}): {verdict.detail}")
        return RefineResponse(query=rewrite, rewritten=rewrite != message, method="llm")

    def prompt_history(self, history: list[HistoryTurn]) -> list[HistoryTurn]:
        """The window of turns the model sees, cut so the prompt stays small for a small model."""
        return [
            HistoryTurn(
                question=turn.question[: self._max_query_chars],
                answer=turn.answer[: self._history_answer_chars],
            )
            for turn in history[-self._history_turns :]
        ]

    @staticmethod
    def _append_context(message: str, history: list[HistoryTurn], detail: str) -> RefineResponse:
        # The last question is already standalone, so it carries the subject the message leaves out;
        # the user's own words stay first because lexical retrieval weighs them most.
        query = f"{message} ({history[-1].question})"
        return RefineResponse(query=query, rewritten=True, method="context_append", detail=detail)
