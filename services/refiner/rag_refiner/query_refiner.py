"""Turn the latest chat message into what the gateway needs: intent, search query, optional HyDE text."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from langchain_core.language_models import BaseChatModel

from rag_common.history import append_context
from rag_common.llm_admission import LLMAdmission
from rag_common.schemas import HistoryTurn, RefineRequest, RefineResponse
from rag_refiner.hyde_writer import HydeWriter
from rag_refiner.intent_router import IntentDecision, IntentRouter
from rag_refiner.llm_call import LLMRefused, LLMUnavailable, UnusableOutput, bounded_llm_call
from rag_refiner.rewrite_guard import check_rewrite
from rag_refiner.standalone_rewriter import StandaloneQuestionRewriter

if TYPE_CHECKING:
    from rag_refiner.settings import RefinerSettings


@dataclass(frozen=True)
class _Rewrite:
    query: str
    rewritten: bool
    method: Literal["passthrough", "llm", "context_append", "fallback"]
    detail: str = ""
    #: Set when the model did not answer, so the request's later model calls are skipped.
    llm_failure: str | None = None


class QueryRefiner:
    """Route the intent, then (for ``rag``) rewrite a follow-up and optionally write a HyDE passage.

    Steps, each with at most one model call:

    1. Intent (``IntentRouter``): rules, then the classifier, the LLM only when unsure.
    2. Rewrite, only for ``rag``: first message used as is; follow-up gets a guarded model rewrite,
       else a deterministic one (``context_append``).
    3. HyDE, only when asked for and the intent is ``rag``.

    ``refine`` never raises: the raw message is always a usable (if weaker) query, ``rag`` a safe
    intent and no HyDE a safe search. Once a model call failed (refused, timed out), the request's
    later calls are skipped instead of each waiting out its own timeout.

    The request's ``language`` (the message's, when the caller named it) picks the intent rules'
    tables and the guard's words, and the rewrite and the HyDE passage are asked for in it.
    """

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        max_query_chars: int,
        llm_timeout_s: float,
        intent_router: IntentRouter,
        hyde_max_tokens: int,
        admission: LLMAdmission | None = None,
    ):
        """The limits are the settings' (``of``, the one source of their defaults)."""
        self._rewriter = StandaloneQuestionRewriter(chat_model)
        self._router = intent_router
        self._hyde = HydeWriter(chat_model, max_tokens=hyde_max_tokens)
        self._max_query_chars = max_query_chars
        self._llm_timeout_s = llm_timeout_s
        self._admission = admission

    @classmethod
    def of(
        cls,
        settings: RefinerSettings,
        chat_model: BaseChatModel,
        *,
        admission: LLMAdmission | None = None,
        intent_router: IntentRouter | None = None,
    ) -> QueryRefiner:
        """The refiner the settings configure; its intent router too unless one is given, waiting in
        the same ``admission`` queue."""
        return cls(
            chat_model,
            max_query_chars=settings.max_query_chars,
            llm_timeout_s=settings.llm_timeout_s,
            intent_router=intent_router or IntentRouter.of(settings, chat_model, admission=admission),
            hyde_max_tokens=settings.hyde_max_tokens,
            admission=admission,
        )

    async def refine(self, request: RefineRequest) -> RefineResponse:
        message, language = request.message, request.language
        decision = await self._router.route(message, language)
        llm_failure = decision.llm_failure
        details = [f"intent: {decision.detail}"] if decision.detail else []

        if decision.intent != "rag":
            # Nothing will be searched: no rewrite, no HyDE, no model call.
            rewrite = _Rewrite(message, False, "passthrough", f"not rewritten: intent {decision.intent}")
        elif not request.history:
            rewrite = _Rewrite(message, False, "passthrough", "no history")
        elif llm_failure:
            rewrite = _Rewrite(message, False, "fallback", f"rewrite skipped, {llm_failure} earlier in this request")
        else:
            rewrite = await self._rewrite(message, request.history, language)
            llm_failure = llm_failure or rewrite.llm_failure
        details.insert(0, rewrite.detail)

        hyde_query = None
        if request.hyde:
            hyde_query, hyde_detail = await self._hyde_query(rewrite.query, language, decision, llm_failure)
            if hyde_detail:
                details.append(f"hyde: {hyde_detail}")

        return RefineResponse(
            query=rewrite.query,
            rewritten=rewrite.rewritten,
            method=rewrite.method,
            detail="; ".join(part for part in details if part),
            intent=decision.intent,
            intent_method=decision.method,
            hyde_query=hyde_query,
        )

    async def _rewrite(self, message: str, history: list[HistoryTurn], language: str | None) -> _Rewrite:
        # The history arrives cut by the gateway (rag_common.history); the model sees it as received.
        try:
            rewrite = await bounded_llm_call(
                "rewrite", self._rewriter.rewrite(message, history, language), self._llm_timeout_s, self._admission
            )
        except UnusableOutput as exc:
            return self._append_context(message, history, f"model output unusable: {exc}")
        except LLMRefused as exc:
            # Refused at once, so there is time for the deterministic rewrite (which retrieval-wise
            # matched the model's in the refiner benchmark) rather than the bare message.
            return replace(self._append_context(message, history, str(exc)), llm_failure=str(exc))
        except LLMUnavailable as exc:
            return _Rewrite(message, False, "fallback", str(exc), llm_failure=str(exc))

        verdict = check_rewrite(rewrite, message, history, max_query_chars=self._max_query_chars, language=language)
        if not verdict.accepted:
            return self._append_context(message, history, f"guard rejected rewrite ({verdict.failed_check}): {verdict.detail}")
        return _Rewrite(rewrite, rewrite != message, "llm")

    async def _hyde_query(
        self, query: str, language: str | None, decision: IntentDecision, llm_failure: str | None
    ) -> tuple[str | None, str]:
        """``(hyde_query, why not)``: the search text, or ``None`` and the reason."""
        if decision.intent != "rag":
            return None, f"skipped, intent {decision.intent} is not searched"
        if llm_failure:
            return None, f"skipped, {llm_failure} earlier in this request"
        try:
            passage = await bounded_llm_call(
                "hyde", self._hyde.write(query, language), self._llm_timeout_s, self._admission
            )
        except (UnusableOutput, LLMUnavailable) as exc:
            return None, str(exc)
        return HydeWriter.search_text(query, passage), ""

    @staticmethod
    def _append_context(message: str, history: list[HistoryTurn], detail: str) -> _Rewrite:
        return _Rewrite(append_context(message, history), True, "context_append", detail)
