"""The gateway's logic behind ``/v1/chat``, independent of HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from redis.exceptions import RedisError

from rag_common.http import DownstreamError
from rag_common.schemas import ChatRequest, ChatResponse, ConversationOut
from rag_common.service import ServiceError
from rag_gateway.conversation_store import ConversationStore


class ConversationNotFound(ServiceError):
    def __init__(self, conversation_id: str) -> None:
        super().__init__(404, f"conversation {conversation_id!r} not found (it may have expired or been deleted)")


def downstream_to_service_error(exc: DownstreamError) -> ServiceError:
    """504 when a stage timed out; 503 when it was down or answered badly; the stage is named."""
    if exc.kind == "timeout":
        return ServiceError(504, f"{exc.stage} timed out: {exc.message}", stage=exc.stage)
    if exc.kind == "rejected":
        # A downstream 4xx on input the gateway already validated is a contract problem, not the user's.
        return ServiceError(503, f"{exc.stage} rejected the request: {exc.message}", stage=exc.stage)
    return ServiceError(503, f"{exc.stage} unavailable: {exc.message}", stage=exc.stage)


def _store_unavailable(exc: Exception) -> ServiceError:
    return ServiceError(503, f"conversation_store unavailable: {exc}", stage="conversation_store")


@contextmanager
def _store_errors() -> Iterator[None]:
    try:
        yield
    except (RedisError, OSError) as exc:
        raise _store_unavailable(exc) from exc


class ChatService:
    def __init__(self, graph: Any, store: ConversationStore, *, default_top_k: int) -> None:
        self._graph = graph
        self._store = store
        self._default_top_k = default_top_k

    async def chat(self, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        try:
            if request.conversation_id is None:
                conversation_id = self._store.new_id()
            else:
                conversation_id = request.conversation_id
                if not await self._store.exists(conversation_id):
                    raise ConversationNotFound(conversation_id)
            state = await self._graph.ainvoke(
                {
                    "conversation_id": conversation_id,
                    "message": request.message,
                    "top_k": request.top_k or self._default_top_k,
                    "timings_ms": {},
                    "degraded": [],
                }
            )
        except DownstreamError as exc:
            raise downstream_to_service_error(exc) from exc
        except (RedisError, OSError) as exc:
            raise _store_unavailable(exc) from exc
        timings = dict(state["timings_ms"])
        timings["total"] = round((time.perf_counter() - started) * 1000, 2)
        generation = state["generation"]
        return ChatResponse(
            conversation_id=conversation_id,
            answer=generation.answer,
            citations=generation.citations,
            refined_query=state["refined"].query,
            abstained=generation.abstained,
            timings_ms=timings,
            degraded=state.get("degraded", []),
        )

    async def conversation(self, conversation_id: str) -> ConversationOut:
        with _store_errors():
            turns = await self._store.turns(conversation_id)
        if not turns:
            raise ConversationNotFound(conversation_id)
        return ConversationOut(conversation_id=conversation_id, turns=turns)

    async def delete_conversation(self, conversation_id: str) -> None:
        with _store_errors():
            deleted = await self._store.delete(conversation_id)
        if not deleted:
            raise ConversationNotFound(conversation_id)
