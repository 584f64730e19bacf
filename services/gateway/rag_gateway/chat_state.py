"""What one chat request is as data: what goes in, what the graph carries, what comes out.

- :class:`ChatInput`: the request as the chat service resolved it (who asks, which conversation,
  the message, and ``top_k``/HyDE with the policy's defaults applied);
- :class:`ChatState`: the LangGraph state, typed: each node reads its fields and returns an update
  of the ones it sets (``degraded`` and ``timings_ms`` accumulate across nodes);
- :class:`ChatResult`: the finished turn, built once by the graph's last node. The stored
  :class:`Turn`, the :class:`ChatResponse` and the query-log record (``query_log.turn_record``) are
  all derived from it, so the three always say the same thing.
"""

from __future__ import annotations

import operator
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any

from rag_common.identity import Identity
from rag_common.schemas import GenerateResponse, HistoryTurn, Passage, RefineResponse
from rag_gateway.chat_models import ChatResponse, Turn


@dataclass(frozen=True)
class ChatInput:
    """The request as the graph gets it: resolved once by the chat service, read by every node."""

    #: Who asks: sent to the retriever (``X-RAG-Identity``), which searches only what it may read;
    #: its ``owner_key`` is part of the conversation's Redis key.
    identity: Identity
    #: None: stateless (no Redis read or write); the conversation so far is ``transcript``.
    conversation_id: str | None
    message: str
    top_k: int
    hyde: bool
    #: Stream the generation (custom stream events ``{"token": text}``).
    stream: bool
    transcript: tuple[Turn, ...]


@dataclass
class ChatState:
    """The graph's state. Not frozen: LangGraph builds each node's copy from its channels; nodes never
    mutate it, they return updates."""

    request: ChatInput
    #: What the refiner and generator get: the recent turns that fit the token budget.
    history: list[HistoryTurn] = field(default_factory=list)
    #: The conversation's last named language (of its recent turns), for a message that cannot tell.
    history_language: str | None = None
    #: The question's language, named once per turn (None: neither it nor the conversation tells): sent
    #: to the refiner, retriever and generator, and the language of the gateway's own texts.
    language: str | None = None
    refined: RefineResponse | None = None
    #: Decided once, by retrieve: the search used the refiner's hypothetical answer (HyDE), so its
    #: query embedding is not the query's and generate sends none.
    searched_hyde: bool = False
    candidates: list[Passage] = field(default_factory=list)
    query_embedding: list[float] | None = None
    passages: list[Passage] = field(default_factory=list)
    generation: GenerateResponse | None = None
    #: Set by save_turn, the last node.
    result: ChatResult | None = None
    degraded: Annotated[list[str], operator.add] = field(default_factory=list)
    timings_ms: Annotated[dict[str, float], operator.or_] = field(default_factory=dict)

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> ChatState:
        """The state from LangGraph's values (``ainvoke``'s output, a ``values`` stream event)."""
        return cls(**values)

    def refinement(self) -> RefineResponse:
        """The refiner's answer (or its stand-in): every node after refine has it."""
        if self.refined is None:
            raise RuntimeError("the chat state has no refined query yet: refine has not run")
        return self.refined

    def answer(self) -> GenerateResponse:
        """The answer of the branch taken: save_turn has it."""
        if self.generation is None:
            raise RuntimeError("the chat state has no answer yet: no answering node has run")
        return self.generation

    def finished(self) -> ChatResult:
        """The result save_turn built (after the graph has run)."""
        if self.result is None:
            raise RuntimeError("the chat graph ended without a result: save_turn has not run")
        return self.result

    def timings_with_total(self, started: float) -> dict[str, float]:
        """Per-stage milliseconds and ``total``, since ``started`` (``time.perf_counter``)."""
        return {**self.timings_ms, "total": round((time.perf_counter() - started) * 1000, 2)}


@dataclass(frozen=True)
class ChatResult:
    """One finished chat turn: the one source of the stored turn, the response and the log record."""

    identity: Identity
    conversation_id: str | None
    message: str
    refined: RefineResponse
    generation: GenerateResponse
    degraded: tuple[str, ...]
    #: Names the turn in the store and in the query log (its record, and any feedback record, share it).
    turn_id: str
    created_at: float
    #: Where the turn was stored (0-based, as GET /v1/conversations/{id} lists them); None if not stored.
    turn_index: int | None = None
    #: The question's language (``ChatState.language``).
    language: str | None = None

    @classmethod
    def of(cls, state: ChatState) -> ChatResult:
        """The turn as it ends: a fresh id, stamped now."""
        return cls(
            identity=state.request.identity,
            conversation_id=state.request.conversation_id,
            message=state.request.message,
            refined=state.refinement(),
            generation=state.answer(),
            degraded=tuple(state.degraded),
            turn_id=uuid.uuid4().hex,
            created_at=time.time(),
            language=state.language,
        )

    def stored_at(self, turn_index: int) -> ChatResult:
        return replace(self, turn_index=turn_index)

    def to_turn(self) -> Turn:
        return Turn(
            message=self.message,
            refined_query=self.refined.query,
            answer=self.generation.answer,
            citations=self.generation.citations,
            abstained=self.generation.abstained,
            intent=self.refined.intent,
            created_at=self.created_at,
            turn_id=self.turn_id,
            language=self.language,
            answer_span=self.generation.answer_span,
            conflict=self.generation.conflict,
        )

    def to_response(self, timings_ms: Mapping[str, float]) -> ChatResponse:
        generation = self.generation
        return ChatResponse(
            conversation_id=self.conversation_id or "",
            answer=generation.answer,
            citations=generation.citations,
            refined_query=self.refined.query,
            abstained=generation.abstained,
            timings_ms=dict(timings_ms),
            degraded=list(self.degraded),
            intent=self.refined.intent,
            citation_precision=generation.citation_precision,
            answer_mode=generation.mode,
            answerability=generation.answerability,
            claims_dropped=generation.claims_dropped,
            abstain_reason=generation.abstain_reason if generation.abstained else "",
            language=self.language,
            answer_span=generation.answer_span,
            conflict=generation.conflict,
        )
