"""The gateway's logic behind the chat endpoints, independent of HTTP.

``chat`` answers in one piece; ``stream`` yields :class:`StreamEvent`s (``meta``, ``token``...,
then ``final`` or ``error``) for the SSE and OpenAI-compatible streaming endpoints. Both run the
same graph (rag_gateway/chat_graph.py). ``complete`` / ``complete_stream`` are the stateless
variants: the conversation so far comes with the request and nothing is stored. Every path builds
its response and its query-log record from the graph's one :class:`ChatResult`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Literal

from rag_common.errors import DependencyFailed, NotFound, RagError
from rag_common.identity import Identity
from rag_common.messages import message
from rag_gateway.chat_models import (
    ChatRequest,
    ChatResponse,
    ConversationList,
    ConversationOut,
    Feedback,
    FeedbackOut,
    FeedbackRequest,
    SourceChunk,
    Turn,
)
from rag_gateway.chat_policy import ChatPolicy
from rag_gateway.chat_state import ChatInput, ChatResult, ChatState
from rag_gateway.conversation_access import ConversationAccess
from rag_gateway.conversation_store import ConversationStore, owned_conversation
from rag_gateway.query_log import Endpoint, QueryLogWriter, feedback_record, turn_record

logger = logging.getLogger(__name__)


class ConversationNotFound(NotFound):
    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} not found (it may have expired or been deleted)")


class TurnNotFound(NotFound):
    def __init__(self, conversation_id: str, turn_index: int) -> None:
        super().__init__(f"conversation {conversation_id!r} has no turn {turn_index} (turns are counted from 0)")


@dataclass(frozen=True)
class StreamEvent:
    """One event of a streamed answer: ``data`` is the JSON payload (``final``: a ChatResponse), or,
    for ``error``, the domain error (the HTTP layer gives it its status) and ``told`` what the user
    reads of it, in the question's language (:func:`told_to_user`)."""

    name: Literal["meta", "token", "final", "error"]
    data: dict[str, Any] | ChatResponse | RagError
    told: str | None = None


def told_to_user(error: RagError, language: str) -> str:
    """What a user reads of ``error``, in ``language`` (the error's own message is the operator's):
    a stage too slow, a stage busy, a stage down, or anything else."""
    if isinstance(error, DependencyFailed):
        key = {"timeout": "error_timeout", "overloaded": "error_busy"}.get(error.kind, "error_unavailable")
    else:
        key = "error_internal"
    return message(key, language)


class ChatService:
    def __init__(
        self,
        graph: Any,
        store: ConversationStore,
        *,
        policy: ChatPolicy,
        access: ConversationAccess,
        query_log: QueryLogWriter | None = None,
    ) -> None:
        self._graph = graph
        self._store = store
        self._access = access
        self._policy = policy
        self._query_log = query_log

    async def start_conversation(self, identity: Identity, conversation_id: str | None) -> str:
        """A new id when ``conversation_id`` is None; else the id, if ``identity`` has that conversation (404 if not)."""
        if conversation_id is None:
            return self._store.new_id()
        if not await self._store.exists(owned_conversation(identity.owner_key, conversation_id)):
            raise ConversationNotFound(conversation_id)
        return conversation_id

    def _input(
        self,
        identity: Identity,
        conversation_id: str | None,
        message: str,
        top_k: int | None,
        hyde: bool | None,
        *,
        transcript: Sequence[Turn] = (),
        stream: bool = False,
    ) -> ChatState:
        request = ChatInput(
            identity=identity,
            conversation_id=conversation_id,
            message=message,
            top_k=self._policy.top_k(top_k),
            hyde=self._policy.hyde(hyde),
            stream=stream,
            transcript=tuple(transcript),
        )
        return ChatState(request=request)

    async def chat(self, identity: Identity, request: ChatRequest) -> ChatResponse:
        started = time.perf_counter()
        conversation_id = await self.start_conversation(identity, request.conversation_id)
        state = self._input(identity, conversation_id, request.message, request.top_k, request.hyde)
        return await self._run(state, started, "chat")

    async def stream(self, identity: Identity, request: ChatRequest, conversation_id: str) -> AsyncIterator[StreamEvent]:
        """Events for a request whose conversation was already resolved by :meth:`start_conversation`."""
        started = time.perf_counter()
        state = self._input(identity, conversation_id, request.message, request.top_k, request.hyde, stream=True)
        async for event in self._stream(state, started, "chat_stream"):
            yield event

    async def complete(
        self,
        identity: Identity,
        message: str,
        transcript: list[Turn],
        *,
        top_k: int | None = None,
        hyde: bool | None = None,
    ) -> ChatResponse:
        """Stateless: answer ``message`` given the conversation so far; nothing is read from or written to Redis."""
        started = time.perf_counter()
        state = self._input(identity, None, message, top_k, hyde, transcript=transcript)
        return await self._run(state, started, "completions")

    async def complete_stream(
        self,
        identity: Identity,
        message: str,
        transcript: list[Turn],
        *,
        top_k: int | None = None,
        hyde: bool | None = None,
    ) -> AsyncIterator[StreamEvent]:
        started = time.perf_counter()
        state = self._input(identity, None, message, top_k, hyde, transcript=transcript, stream=True)
        async for event in self._stream(state, started, "completions_stream"):
            yield event

    async def _run(self, state_in: ChatState, started: float, endpoint: Endpoint) -> ChatResponse:
        return self._finish(ChatState.of(await self._graph.ainvoke(state_in)), started, endpoint)

    def _finish(self, state: ChatState, started: float, endpoint: Endpoint) -> ChatResponse:
        """The response of the graph's final ``state``, its query-log record queued: both from its one result."""
        result = state.finished()
        timings = state.timings_with_total(started)
        response = result.to_response(timings)
        self._log_turn(result, timings, endpoint)
        return response

    def _log_turn(self, result: ChatResult, timings_ms: dict[str, float], endpoint: Endpoint) -> None:
        """Queue the turn's query-log record. Never raises and never waits: the answer is what counts."""
        if self._query_log is None:
            return
        try:
            record = turn_record(result, endpoint=endpoint, timings_ms=timings_ms, salt=self._query_log.salt)
        except Exception:  # noqa: BLE001 - a log record must not cost the user the answer
            logger.exception("query log: the turn's record could not be built")
            self._query_log.drop_unbuildable()
            return
        self._query_log.submit(record)

    async def _stream(self, state_in: ChatState, started: float, endpoint: Endpoint) -> AsyncIterator[StreamEvent]:
        """Run the graph streamed: ``meta`` once refine is done, ``token`` per answer delta, then
        always one of ``final`` (after the turn is saved) or ``error`` (nothing saved, unless the
        failure came after the save). Only a client that hung up gets neither."""
        state = state_in
        try:
            async with aclosing(self._graph.astream(state_in, stream_mode=["custom", "values"])) as events:
                async for mode, chunk in events:
                    if mode == "custom":
                        yield StreamEvent("token", {"text": chunk["token"]})
                        continue
                    refined_before = state.refined
                    state = ChatState.of(chunk)
                    # The state after refine's step comes before any token of the step that answers.
                    if refined_before is None and state.refined is not None:
                        yield StreamEvent(
                            "meta",
                            {
                                "conversation_id": state.request.conversation_id,
                                "refined_query": state.refined.query,
                                "intent": state.refined.intent,
                                "language": state.language,
                            },
                        )
            # Built inside the try: a failure here, after the headers went out, is an error event too.
            final = self._finish(state, started, endpoint)
        except RagError as exc:
            yield self._error_event(exc, state)
            return
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or task.cancelling():
                raise  # the client hung up (or the server is stopping): there is nobody to tell
            # Cancelled from inside (a graph task), with the client still listening: say so.
            logger.exception("chat stream cancelled from inside")
            yield self._error_event(RagError("internal error: the answer was cancelled"), state)
            return
        except Exception as exc:  # noqa: BLE001 - the stream has started: report, never hang up silently
            logger.exception("chat stream failed")
            yield self._error_event(RagError(f"internal error: {type(exc).__name__}"), state)
            return
        yield StreamEvent("final", final)

    def _error_event(self, error: RagError, state: ChatState) -> StreamEvent:
        """The ``error`` event, told in the language the graph named (if it got that far)."""
        return StreamEvent("error", error, told_to_user(error, self._policy.language.of_texts(state.language)))

    async def conversation(self, identity: Identity, conversation_id: str) -> ConversationOut:
        """The caller's stored turns. A turn that cites a document the caller may no longer read (its
        ACL changed, or it was deleted) comes back with its answer withheld and no citations: what a
        conversation shows of the documents follows the documents' access now, not when it was asked."""
        key = owned_conversation(identity.owner_key, conversation_id)
        turns = await self._store.turns(key)
        if not turns:
            raise ConversationNotFound(conversation_id)
        return ConversationOut(conversation_id=conversation_id, turns=await self._access.visible(identity, key, turns))

    async def conversations(self, identity: Identity) -> ConversationList:
        return ConversationList(conversations=await self._store.list_owned(identity.owner_key))

    async def source(self, identity: Identity, conversation_id: str, chunk_id: str) -> SourceChunk:
        """A chunk cited in one of the caller's conversations, as it was cited, if the caller may still
        read its document (404 otherwise, as for a chunk never cited: nothing says which it was)."""
        found = await self._store.source(owned_conversation(identity.owner_key, conversation_id), chunk_id)
        if found is None or not await self._access.readable_source(identity, found):
            raise NotFound(f"no source {chunk_id!r} of conversation {conversation_id!r} is readable by you")
        return found

    async def give_feedback(
        self, identity: Identity, conversation_id: str, turn_index: int, request: FeedbackRequest
    ) -> FeedbackOut:
        """Store ``request`` on turn ``turn_index`` (0-based) of the caller's conversation, replacing any
        earlier feedback, and queue a feedback record. 404 if the caller has no such conversation or turn."""
        key = owned_conversation(identity.owner_key, conversation_id)
        feedback = Feedback(rating=request.rating, comment=request.comment, created_at=time.time())
        turn = await self._store.set_feedback(key, turn_index, feedback)
        if turn is None:
            if not await self._store.exists(key):
                raise ConversationNotFound(conversation_id)
            raise TurnNotFound(conversation_id, turn_index)
        if self._query_log is not None:
            try:
                record = feedback_record(identity, conversation_id, turn_index, turn, feedback, salt=self._query_log.salt)
            except Exception:  # noqa: BLE001 - the feedback is stored; its log record is best effort
                logger.exception("query log: the feedback record could not be built")
                self._query_log.drop_unbuildable()
            else:
                self._query_log.submit(record)
        return FeedbackOut(conversation_id=conversation_id, turn_index=turn_index, turn_id=turn.turn_id, feedback=feedback)

    async def delete_conversation(self, identity: Identity, conversation_id: str) -> None:
        deleted = await self._store.delete(owned_conversation(identity.owner_key, conversation_id))
        if not deleted:
            raise ConversationNotFound(conversation_id)

