"""Write a cited answer from ranked passages, or abstain."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import openai
from langchain_core.language_models import BaseChatModel

from rag_common.schemas import GenerateRequest, GenerateResponse, HistoryTurn, Passage
from rag_common.service import ServiceError
from rag_generator.answer_prompt import build_answer_messages, number_sources
from rag_generator.answer_schema import build_answer_schema
from rag_generator.citation_selection import select_citations, strip_unbacked_markers
from rag_generator.llm_response import InvalidModelOutput, LLMResponse, ResponseLimits

logger = logging.getLogger(__name__)

#: The one answer a user sees whenever the generator abstains, whatever the reason.
ABSTAIN_MESSAGE = "I could not find this in the documents."
#: Past questions are standalone queries; this only guards against an oversized history entry.
HISTORY_QUESTION_CHARS = 400


class AnswerGenerator:
    """One structured-output call per request; bad model output abstains, a dead model is a 503, a slow one a 504."""

    def __init__(
        self,
        chat_model: BaseChatModel,
        *,
        max_passages: int = 6,
        max_passage_chars: int = 1200,
        answer_max_chars: int = 1000,
        max_citations: int = 4,
        history_turns: int = 2,
        history_answer_chars: int = 200,
        llm_timeout_s: float = 90.0,
    ):
        self._chat_model = chat_model
        self._max_passages = max_passages
        self._max_passage_chars = max_passage_chars
        self._limits = ResponseLimits(answer_max_chars=answer_max_chars, max_citations=max_citations)
        self._history_turns = history_turns
        self._history_answer_chars = history_answer_chars
        self._llm_timeout_s = llm_timeout_s

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        if not request.passages:
            return abstention("no_passages")
        sources = number_sources(request.passages, self._max_passages)
        messages = build_answer_messages(
            request.query, sources, self._prompt_history(request.history), max_passage_chars=self._max_passage_chars
        )
        schema = build_answer_schema(
            sources, answer_max_chars=self._limits.answer_max_chars, max_citations=self._limits.max_citations
        )
        structured = self._chat_model.with_structured_output(schema, method="json_schema", include_raw=True)
        try:
            async with asyncio.timeout(self._llm_timeout_s):
                result: dict[str, Any] = await structured.ainvoke(messages)
        except (openai.LengthFinishReasonError, openai.ContentFilterFinishReasonError) as exc:
            # The model answered but its reply was cut off: an output problem, not an outage.
            logger.info("abstaining: model reply unusable (%s)", type(exc).__name__)
            return abstention("invalid_output")
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise ServiceError(504, f"llm timed out: no answer within {self._llm_timeout_s:g}s") from exc
        except openai.APIStatusError as exc:
            raise ServiceError(503, f"llm unavailable: HTTP {exc.status_code}: {exc.message}"[:300]) from exc
        except openai.APIError as exc:
            raise ServiceError(503, f"llm unavailable: {type(exc).__name__}: {exc}"[:300]) from exc
        return answer_from_model_output(_model_output(result), sources, self._limits)

    def _prompt_history(self, history: Sequence[HistoryTurn]) -> list[HistoryTurn]:
        if self._history_turns <= 0:
            return []
        return [
            HistoryTurn(question=turn.question[:HISTORY_QUESTION_CHARS], answer=turn.answer[: self._history_answer_chars])
            for turn in history[-self._history_turns :]
        ]


def answer_from_model_output(
    output: Mapping[str, Any] | str | None, sources: Mapping[int, Passage], limits: ResponseLimits = ResponseLimits()
) -> GenerateResponse:
    """The response for one model reply (parsed object or raw JSON text); never raises."""
    try:
        reply = LLMResponse.from_model_output(output, limits)
    except InvalidModelOutput as exc:
        logger.info("abstaining: invalid model output (%s)", exc)
        return abstention("invalid_output")
    if reply.abstained:
        return abstention("model_abstained")
    if not reply.answer.strip():
        return abstention("invalid_output")
    citations = select_citations(reply.citations, sources, max_citations=limits.max_citations)
    if not citations:
        return abstention("no_valid_citation")
    answer = strip_unbacked_markers(reply.answer, {citation.id for citation in citations})
    return GenerateResponse(answer=answer, citations=citations, abstained=False)


def abstention(reason: str) -> GenerateResponse:
    return GenerateResponse(answer=ABSTAIN_MESSAGE, citations=[], abstained=True, abstain_reason=reason)


def _model_output(result: Mapping[str, Any]) -> Mapping[str, Any] | str | None:
    raw = result.get("raw")
    if getattr(raw, "response_metadata", {}).get("finish_reason") == "length":
        return None  # a truncated reply "repaired" by the lenient JSON parser is not an answer
    if result.get("parsing_error") is None and result.get("parsed") is not None:
        return result["parsed"]
    content = getattr(raw, "content", None)
    return content if isinstance(content, str) else None
