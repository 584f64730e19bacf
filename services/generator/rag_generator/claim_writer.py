"""Ask the LLM for claims: one structured-output call, one repair call for an invalid reply.

``json_schema`` is asked for first and ``function_calling`` used for good once the endpoint refuses
it (``structured_method.py``). A dead endpoint or one past the time budget raises
``DependencyFailed("llm", ...)``; a reply that stays invalid after the repair, or is cut off at
``max_tokens``, is *not* an outage: :class:`Draft` says why and carries no claims.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from rag_common.errors import DependencyFailed
from rag_common.llm_admission import LLMAdmission, LLMBusy
from rag_common.schemas import HistoryTurn
from rag_generator.claim_prompt import build_claim_messages
from rag_generator.claim_reply import ClaimReply, InvalidModelOutput, ReplyLimits
from rag_generator.claim_schema import build_claim_schema
from rag_generator.conflicts import DetectedConflict
from rag_generator.evidence import EvidenceUnit
from rag_generator.repair_prompt import build_repair_messages
from rag_generator.structured_method import StructuredMethod, function_schema, rejects_json_schema

logger = logging.getLogger(__name__)

#: The model replied but the reply was cut off (or filtered): an output problem, not an outage.
_CUT_OFF = (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError)


@dataclass(frozen=True)
class Draft:
    """The model's validated claims, or None with the reason it gave none usable."""

    reply: ClaimReply | None
    invalid_reason: str = ""
    repaired: bool = False


@dataclass(frozen=True)
class _Reply:
    parsed: Mapping[str, Any] | None
    text: str
    truncated: bool

    @property
    def output(self) -> Mapping[str, Any] | str | None:
        # The raw text first, parsed strictly: langchain's JSON parser is lenient (it closes open
        # strings and brackets), and broken JSON must go to repair, not be half-trusted.
        return self.text if self.text.strip() else self.parsed


class ClaimWriter:
    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        max_claims: int,
        claim_max_chars: int,
        llm_timeout_s: float,
        structured_method: StructuredMethod = "json_schema",
        admission: LLMAdmission | None = None,
    ) -> None:
        self._chat_model = chat_model
        self._admission = admission
        self._max_claims = max_claims
        self._claim_max_chars = claim_max_chars
        self.llm_timeout_s = llm_timeout_s
        #: ``json_schema`` until the endpoint refuses it, then ``function_calling`` for good.
        self.structured_method: StructuredMethod = structured_method

    async def write(
        self,
        question: str,
        units: Sequence[EvidenceUnit],
        history: Sequence[HistoryTurn],
        language: str | None = None,
        *,
        conflict: DetectedConflict | None = None,
    ) -> Draft:
        """The model's claims about ``units``, asked for in ``language`` (the question's; None: not said),
        told about ``conflict`` when the sources disagree; raises DependencyFailed if the LLM is down or too slow."""
        messages = build_claim_messages(question, units, history, language, conflict=conflict)
        ids = [unit.id for unit in units]
        schema = build_claim_schema(ids, max_claims=self._max_claims, claim_max_chars=self._claim_max_chars)
        limits = ReplyLimits(self._max_claims, self._claim_max_chars, frozenset(ids))
        deadline = asyncio.get_running_loop().time() + self.llm_timeout_s
        try:
            reply = await self._invoke(schema, messages, deadline)
        except _CUT_OFF as exc:
            return Draft(None, f"reply unusable ({type(exc).__name__})")
        except (TimeoutError, openai.APIError) as exc:
            raise self._failure(exc) from exc
        if reply.truncated:
            # langchain's lenient parser "repairs" a cut-off reply: that is not an answer.
            return Draft(None, "reply cut off at max_tokens")
        try:
            return Draft(ClaimReply.from_model_output(reply.output, limits))
        except InvalidModelOutput as exc:
            logger.info("invalid model output (%s); one repair attempt", exc)
            return await self._repair(schema, messages, reply.text, str(exc), limits, deadline, language)

    async def _repair(
        self,
        schema: dict[str, Any],
        messages: list[BaseMessage],
        invalid_text: str,
        error: str,
        limits: ReplyLimits,
        deadline: float,
        language: str | None = None,
    ) -> Draft:
        try:
            repair = build_repair_messages(messages, invalid_text, error, language)
            reply = await self._invoke(schema, repair, deadline)
        except LLMBusy as exc:
            return Draft(None, f"repair call refused: {exc.message}", repaired=True)
        except (TimeoutError, openai.OpenAIError) as exc:
            return Draft(None, f"repair call failed: {type(exc).__name__}", repaired=True)
        if reply.truncated:
            return Draft(None, "repair reply cut off at max_tokens", repaired=True)
        try:
            return Draft(ClaimReply.from_model_output(reply.output, limits), repaired=True)
        except InvalidModelOutput as exc:
            return Draft(None, f"invalid output after repair: {exc}"[:300], repaired=True)

    async def _invoke(self, schema: dict[str, Any], messages: list[BaseMessage], deadline: float) -> _Reply:
        """One model call (two if the endpoint refuses json_schema) in one admitted slot; raises LLMBusy
        at once when the admission control expects no slot before the deadline."""
        if self._admission is None:
            return await self._invoke_admitted(schema, messages, deadline)
        async with self._admission.slot(deadline - asyncio.get_running_loop().time()):
            return await self._invoke_admitted(schema, messages, deadline)

    async def _invoke_admitted(self, schema: dict[str, Any], messages: list[BaseMessage], deadline: float) -> _Reply:
        method = self.structured_method
        try:
            async with asyncio.timeout_at(deadline):
                return _reply_of(await self._structured(schema, method).ainvoke(messages))
        except openai.APIStatusError as exc:
            if method != "json_schema" or not rejects_json_schema(exc):
                raise
            logger.warning(
                "endpoint refused json_schema structured output (HTTP %s: %s); using function_calling from now on",
                exc.status_code,
                exc.message[:200],
            )
            self.structured_method = "function_calling"
        async with asyncio.timeout_at(deadline):
            return _reply_of(await self._structured(schema, "function_calling").ainvoke(messages))

    def _structured(self, schema: dict[str, Any], method: StructuredMethod) -> Runnable:
        if method == "json_schema":
            return self._chat_model.with_structured_output(schema, method="json_schema", include_raw=True)
        return self._chat_model.with_structured_output(
            function_schema(schema), method="function_calling", include_raw=True
        )

    def _failure(self, exc: BaseException) -> DependencyFailed:
        if isinstance(exc, (TimeoutError, openai.APITimeoutError)):
            return DependencyFailed("llm", "timeout", f"no answer within {self.llm_timeout_s:g}s")
        if isinstance(exc, openai.APIStatusError):
            kind = "rejected" if 400 <= exc.status_code < 500 else "unavailable"
            return DependencyFailed("llm", kind, f"HTTP {exc.status_code}: {exc.message}"[:280], exc.status_code)
        return DependencyFailed("llm", "unavailable", f"{type(exc).__name__}: {exc}"[:280])


def _reply_of(result: Mapping[str, Any]) -> _Reply:
    """A ``with_structured_output(include_raw=True)`` result as a ``_Reply``."""
    raw = result.get("raw")
    truncated = getattr(raw, "response_metadata", {}).get("finish_reason") == "length"
    parsed = result.get("parsed") if result.get("parsing_error") is None else None
    return _Reply(parsed if isinstance(parsed, Mapping) else None, _message_text(raw), truncated)


def _message_text(message: Any) -> str:
    """The reply's text: its (first) tool call's arguments, else its content."""
    # A forced tool call carries the reply; text next to it (some servers add a preamble) is not it.
    for call in getattr(message, "tool_calls", None) or []:
        return json.dumps(call.get("args"))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        return str(call.get("args") or "")
    content = getattr(message, "content", None)
    return content if isinstance(content, str) else ""
