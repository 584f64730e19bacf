"""Write a cited answer from ranked passages, or abstain.

One structured-output call per request (``json_schema``, or ``function_calling`` once the endpoint
has refused ``json_schema``); a reply that is not a valid answer object gets exactly one repair
call; every citation is then verified against its source. Bad model output abstains, a dead model
is a 503, a slow one a 504. ``stream`` does the same with the answer text streamed as generated.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.runnables import Runnable

from rag_common.schemas import GenerateRequest, GenerateResponse, HistoryTurn, Passage
from rag_common.errors import DependencyFailed
from rag_generator.answer_assembly import ABSTAIN_MESSAGE, abstention, answer_from_model_output, answer_from_reply
from rag_generator.answer_prompt import build_answer_messages, number_sources
from rag_generator.answer_schema import build_answer_schema
from rag_generator.answer_text_stream import AnswerTextStream
from rag_generator.citation_verifier import DEFAULT_QUOTE_MATCH_THRESHOLD, CitationVerifier
from rag_generator.llm_response import InvalidModelOutput, LLMResponse, ResponseLimits
from rag_generator.repair_prompt import build_repair_messages
from rag_generator.stream_events import ErrorEvent, FinalEvent, StreamEvent, TokenEvent
from rag_generator.structured_method import StructuredMethod, function_schema, rejects_json_schema

__all__ = ["ABSTAIN_MESSAGE", "AnswerGenerator", "abstention", "answer_from_model_output"]

logger = logging.getLogger(__name__)

#: The model replied but the reply was cut off (or filtered): an output problem, not an outage.
_CUT_OFF = (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError)


@dataclass(frozen=True)
class _Prompt:
    sources: dict[int, Passage]
    messages: list[BaseMessage]
    schema: dict[str, Any]


@dataclass(frozen=True)
class _Reply:
    """One model reply: the object the client parsed (if any), its raw text, and whether it was cut off."""

    parsed: Mapping[str, Any] | None
    text: str
    truncated: bool

    @property
    def output(self) -> Mapping[str, Any] | str | None:
        # The raw text first, parsed strictly: langchain's JSON parser is lenient (it closes open
        # strings and brackets), and broken JSON must go to repair, not be half-trusted.
        return self.text if self.text.strip() else self.parsed


class AnswerGenerator:
    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        max_passages: int = 6,
        max_passage_chars: int = 1200,
        answer_max_chars: int = 1000,
        max_citations: int = 4,
        llm_timeout_s: float = 90.0,
        quote_match_threshold: float = DEFAULT_QUOTE_MATCH_THRESHOLD,
        structured_method: StructuredMethod = "json_schema",
    ):
        self._chat_model = chat_model
        self._max_passages = max_passages
        self._max_passage_chars = max_passage_chars
        self._limits = ResponseLimits(answer_max_chars=answer_max_chars, max_citations=max_citations)
        self._llm_timeout_s = llm_timeout_s
        self._verifier = CitationVerifier(quote_match_threshold)
        #: ``json_schema`` until the endpoint refuses it, then ``function_calling`` for good.
        self.structured_method: StructuredMethod = structured_method

    # ------------------------------------------------------------------ one response

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        if not request.passages:
            return abstention("no_passages")
        prompt = self._prompt(request)
        deadline = self._deadline()
        try:
            result = await self._invoke(prompt, prompt.messages, deadline)
        except _CUT_OFF as exc:
            logger.info("abstaining: model reply unusable (%s)", type(exc).__name__)
            return abstention("invalid_output")
        except (TimeoutError, openai.APIError) as exc:
            raise self._llm_failure(exc) from exc
        return await self._conclude(prompt, _reply_of(result), deadline)

    # ------------------------------------------------------------------ streamed response

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamEvent]:
        """Answer-text deltas as the model writes them, then the verified response (or an error)."""
        if not request.passages:
            yield FinalEvent(abstention("no_passages"))
            return
        prompt = self._prompt(request)
        deadline = self._deadline()
        answer_text = AnswerTextStream()
        truncated = False
        try:
            async for piece, finish_reason in self._stream_reply(prompt, deadline):
                truncated = truncated or finish_reason == "length"
                if delta := answer_text.feed(piece):
                    yield TokenEvent(delta)
        except _CUT_OFF as exc:
            logger.info("streamed reply unusable (%s)", type(exc).__name__)
            truncated = True
        except (TimeoutError, openai.APIError) as exc:
            yield ErrorEvent(self._llm_failure(exc))
            return
        response = await self._conclude(prompt, _Reply(None, answer_text.raw, truncated), deadline)
        yield FinalEvent(response)

    # ------------------------------------------------------------------ shared steps

    def _prompt(self, request: GenerateRequest) -> _Prompt:
        sources = number_sources(request.passages, self._max_passages)
        messages = build_answer_messages(
            # The history arrives cut by the gateway (rag_common.history): shown as received.
            request.query, sources, request.history, max_passage_chars=self._max_passage_chars
        )
        schema = build_answer_schema(
            sources, answer_max_chars=self._limits.answer_max_chars, max_citations=self._limits.max_citations
        )
        return _Prompt(sources, messages, schema)

    def _deadline(self) -> float:
        return asyncio.get_running_loop().time() + self._llm_timeout_s

    async def _conclude(self, prompt: _Prompt, reply: _Reply, deadline: float) -> GenerateResponse:
        """Validate the reply (repairing it once if needed) and verify its citations; never raises."""
        if reply.truncated:
            # langchain's lenient JSON parser "repairs" a cut-off reply: that is not an answer.
            logger.info("abstaining: model reply cut off at max_tokens")
            return abstention("invalid_output")
        try:
            validated = LLMResponse.from_model_output(reply.output, self._limits)
        except InvalidModelOutput as exc:
            logger.info("invalid model output (%s); one repair attempt", exc)
            repaired = await self._repair(prompt, reply.text, str(exc), deadline)
            if repaired is None:
                return abstention("invalid_output")
            return answer_from_reply(repaired, prompt.sources, self._limits, self._verifier, repaired=True)
        return answer_from_reply(validated, prompt.sources, self._limits, self._verifier)

    async def _repair(self, prompt: _Prompt, invalid_text: str, error: str, deadline: float) -> LLMResponse | None:
        messages = build_repair_messages(prompt.messages, invalid_text, error)
        try:
            reply = _reply_of(await self._invoke(prompt, messages, deadline))
        except (TimeoutError, openai.OpenAIError) as exc:
            logger.info("repair call failed: %s: %s", type(exc).__name__, exc)
            return None
        if reply.truncated:
            logger.info("repair reply cut off at max_tokens")
            return None
        try:
            return LLMResponse.from_model_output(reply.output, self._limits)
        except InvalidModelOutput as exc:
            logger.info("repair reply invalid too (%s)", exc)
            return None

    async def _invoke(self, prompt: _Prompt, messages: list[BaseMessage], deadline: float) -> dict[str, Any]:
        method = self.structured_method
        try:
            async with asyncio.timeout_at(deadline):
                return await self._structured(prompt.schema, method).ainvoke(messages)
        except openai.APIStatusError as exc:
            if method != "json_schema" or not rejects_json_schema(exc):
                raise
            self._fall_back(exc)
        async with asyncio.timeout_at(deadline):
            return await self._structured(prompt.schema, "function_calling").ainvoke(messages)

    def _structured(self, schema: dict[str, Any], method: StructuredMethod) -> Runnable:
        if method == "json_schema":
            return self._chat_model.with_structured_output(schema, method="json_schema", include_raw=True)
        return self._chat_model.with_structured_output(
            function_schema(schema), method="function_calling", include_raw=True
        )

    async def _stream_reply(self, prompt: _Prompt, deadline: float) -> AsyncIterator[tuple[str, str | None]]:
        """(text piece, finish reason) per streamed chunk, falling back like ``_invoke``."""
        method = self.structured_method
        started = False
        try:
            async for item in self._stream_once(prompt, method, deadline):
                started = True
                yield item
            return
        except openai.APIStatusError as exc:
            if started or method != "json_schema" or not rejects_json_schema(exc):
                raise
            self._fall_back(exc)
        async for item in self._stream_once(prompt, "function_calling", deadline):
            yield item

    async def _stream_once(
        self, prompt: _Prompt, method: StructuredMethod, deadline: float
    ) -> AsyncIterator[tuple[str, str | None]]:
        # The same request with_structured_output makes, without its whole-reply parser.
        if method == "json_schema":
            model = self._chat_model.bind(response_format={"type": "json_schema", "json_schema": prompt.schema})
        else:
            tool = function_schema(prompt.schema)
            model = self._chat_model.bind_tools([tool], tool_choice=tool["name"], parallel_tool_calls=False)
        chunks = model.astream(prompt.messages).__aiter__()
        try:
            while True:
                try:
                    # Bounded per chunk rather than around the loop: no timeout scope spans a yield.
                    async with asyncio.timeout_at(deadline):
                        chunk = await anext(chunks)
                except StopAsyncIteration:
                    return
                yield _chunk_text(chunk), chunk.response_metadata.get("finish_reason")
        finally:
            await chunks.aclose()

    def _fall_back(self, exc: openai.APIStatusError) -> None:
        logger.warning(
            "endpoint refused json_schema structured output (HTTP %s: %s); using function_calling from now on",
            exc.status_code,
            exc.message[:200],
        )
        self.structured_method = "function_calling"

    def _llm_failure(self, exc: BaseException) -> DependencyFailed:
        if isinstance(exc, (TimeoutError, openai.APITimeoutError)):
            return DependencyFailed("llm", "timeout", f"no answer within {self._llm_timeout_s:g}s")
        if isinstance(exc, openai.APIStatusError):
            return DependencyFailed("llm", "unavailable", f"HTTP {exc.status_code}: {exc.message}"[:280], exc.status_code)
        return DependencyFailed("llm", "unavailable", f"{type(exc).__name__}: {exc}"[:280])


def _reply_of(result: Mapping[str, Any]) -> _Reply:
    """A ``with_structured_output(include_raw=True)`` result as a ``_Reply``."""
    raw = result.get("raw")
    truncated = getattr(raw, "response_metadata", {}).get("finish_reason") == "length"
    parsed = result.get("parsed") if result.get("parsing_error") is None else None
    return _Reply(parsed if isinstance(parsed, Mapping) else None, _message_text(raw), truncated)


def _message_text(message: Any) -> str:
    """The reply's text: its content, else its (first) tool call's arguments."""
    content = getattr(message, "content", None)
    if isinstance(content, str) and content.strip():
        return content
    for call in getattr(message, "tool_calls", None) or []:
        return json.dumps(call.get("args"))
    for call in getattr(message, "invalid_tool_calls", None) or []:
        return str(call.get("args") or "")
    return ""


def _chunk_text(chunk: AIMessageChunk) -> str:
    tool_args = "".join(c.get("args") or "" for c in chunk.tool_call_chunks if c.get("index") in (None, 0))
    content = chunk.content if isinstance(chunk.content, str) else ""
    return content + tool_args
