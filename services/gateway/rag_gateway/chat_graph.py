"""The chat request as a LangGraph state graph.

load_history → identify_language → refine ─┬─ rag ─────────── retrieve → rerank → generate ─┐
                                           ├─ chitchat ────── chitchat (canned reply) ──────┤
                                           ├─ meta ────────── meta (from the stored turns) ─┼→ save_turn
                                           └─ out_of_scope ── decline (abstains) ───────────┘

The branch is a conditional edge on the refiner's ``intent``: only ``rag`` reaches the retriever,
reranker and generator; the other three answer without any LLM call. Each node calls at most one
service over HTTP and records its own latency, and runs in its own span of the turn's trace
(:func:`traced_node`): the span of its service call, and that service's server span, are its children.

The question's language is named once per turn, by identify_language: the message's, else (when the
message is too short to tell, "Și la master?") the conversation's last language (stored with each
turn). It holds for the whole turn: the refiner, the retriever and the generator get it (a standalone
rewrite keeps the user's language, so it is not named again), the turn stores it, the response says
it, and every text the gateway writes itself (canned replies, the meta answer, the generator's
stand-in, a streamed error's ``message``) is in it, else in ``RAG_DEFAULT_LANGUAGE`` (``rag_common.messages``).

Failure policy (the table in docs/ARCHITECTURE.md; coded in the nodes below and nowhere else):

    stage               retried*   when it fails (down, slow, broken)
    refiner             yes        degrade: message + previous question, intent rag (stage_fallbacks)
    retriever           yes        fail: 503/504 naming "retriever"
    reranker            yes        degrade: the retriever's order
    generator           no         degrade: the best-matching sentence of the top passages, quoted
                                   (stage_fallbacks); not when it is "overloaded" (503 + Retry-After,
                                   its generative mode's promise) or "rejected" (4xx: our bug), nor
                                   once answer tokens have been streamed: those fail the request
    conversation_store  no         fail: 503 naming "conversation_store"
    * idempotent calls, when the stage was unreachable or answered 502/503 (rag_common.http)

A degrading node lists what failed and what stood in under ``degraded``; a failing node raises
:class:`DependencyFailed` naming its stage and the graph stops there, so ``save_turn`` (the only
writer) never runs for a failed request and the conversation is left untouched. Generation is
never retried: a second call after a lost answer could only race the first into a duplicate turn.

The state is typed (:class:`~rag_gateway.chat_state.ChatState`): the chat service puts the resolved
request in, each node returns an update of the fields it sets, and save_turn, the last node, builds
the one :class:`~rag_gateway.chat_state.ChatResult` the stored turn, the response and the query-log
record are all derived from. What the request does not say comes from the one
:class:`~rag_gateway.chat_policy.ChatPolicy`.

With ``stream`` set in the request, generate calls the generator's SSE endpoint and passes each
answer delta to LangGraph's custom stream (``{"token": text}``); the reply nodes pass their whole
answer the same way. ``graph.astream(..., stream_mode=["custom", "values"])`` then
yields the tokens as they come, and save_turn still runs only after the generator's final event.

With ``conversation_id`` None the graph is stateless (the OpenAI-compatible endpoint): the
conversation so far comes in ``transcript`` and nothing is read from or written to Redis.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from prometheus_client import Histogram

from rag_common import log_format
from rag_common.errors import DependencyFailed
from rag_common.history import cut_history
from rag_common.identity import identity_headers
from rag_common.http import ServiceClient
from rag_common.messages import LanguagePolicy, message
from rag_common.telemetry import tracer_provider
from rag_common.schemas import (
    GenerateRequest,
    GenerateResponse,
    HistoryTurn,
    Intent,
    RefineRequest,
    RefineResponse,
    RerankRequest,
    RerankResponse,
    SearchRequest,
    SearchResponse,
)
from rag_gateway.chat_models import Turn
from rag_gateway.chat_policy import ChatPolicy
from rag_gateway.chat_state import ChatResult, ChatState
from rag_gateway.conversation_access import ConversationAccess
from rag_gateway.conversation_store import ConversationStore, owned_conversation, source_of
from rag_gateway.generator_stream import Token, generation_events
from rag_gateway.stage_fallbacks import answer_without_generator, describe_failure, refine_without_refiner

logger = logging.getLogger(__name__)

STAGE_SECONDS = Histogram(
    "rag_gateway_stage_seconds",
    "Latency of each stage of a chat request as seen by the gateway",
    ["stage"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)


@dataclass
class ChatServices:
    refiner: ServiceClient
    retriever: ServiceClient
    reranker: ServiceClient
    generator: ServiceClient
    store: ConversationStore
    #: Earlier turns as the caller may see them now (an answer citing a document it can no longer
    #: read is withheld from the history the models get, as from what it is shown).
    access: ConversationAccess


#: The node each intent leads to after refine.
INTENT_ROUTES: dict[Intent, str] = {
    "rag": "retrieve",
    "chitchat": "chitchat",
    "meta": "meta",
    "out_of_scope": "decline",
}

#: A thank-you among the chitchat messages (English, and Romanian with or without its diacritics):
#: it gets the thanks reply, any other small talk the greeting.
_THANKS = re.compile(
    r"\b(thanks?|thank\s+you|thx|ty|cheers|appreciated?|mul[țţt]umesc|mul[țţt]umim|mul[țţt]umiri|mersi)\b",
    re.IGNORECASE,
)


def _history_for_llm(history: list[Turn]) -> list[HistoryTurn]:
    # The refined query is the standalone form of each past question: the best context to carry.
    return [HistoryTurn(question=t.refined_query, answer=t.answer) for t in history]


def describe_conversation(turns: list[Turn], language: str) -> str:
    """The deterministic answer of the meta branch, in ``language``: the user's earlier questions, in order.

    Small talk and earlier meta questions are left out; they are not what "what did I ask?" means.
    """
    questions = [t.message for t in turns if t.intent in ("rag", "out_of_scope")]
    if not questions:
        return message("meta_no_questions", language)
    lines = "\n".join(f"{i}. {q}" for i, q in enumerate(questions, 1))
    return message("meta_questions", language, questions=lines)


def conversation_language(language: LanguagePolicy, turns: list[Turn]) -> str | None:
    """The language of the newest of ``turns`` that has one: stored with it, or named from its message
    (a stateless transcript's turns, and turns stored before languages were named, have none stored)."""
    for turn in reversed(turns):
        named = turn.language or language.of_question(turn.message)
        if named is not None:
            return named
    return None


def _emit(text: str) -> None:
    """Pass answer text to the custom stream (a no-op unless the graph is being streamed)."""
    if text:
        get_stream_writer()({"token": text})


class _Timer:
    def __init__(self, stage: str) -> None:
        self.stage = stage

    def __enter__(self) -> _Timer:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self.started
        STAGE_SECONDS.labels(self.stage).observe(self.seconds)

    @property
    def ms(self) -> dict[str, float]:
        return {self.stage: round(self.seconds * 1000, 2)}


Node = Callable[[ChatState], Awaitable[dict[str, Any]]]


def traced_node(name: str, node: Node) -> Node:
    """``node`` run in a span ``chat.<name>`` of the gateway's trace (the service calls it makes are
    its children), with ``stage: <name>`` on its log lines and one line when it ends, with its
    ``duration_ms``. What it degraded is on the span (``rag.degraded``)."""
    tracer = tracer_provider("gateway").get_tracer(__name__)

    @functools.wraps(node)
    async def run(state: ChatState) -> dict[str, Any]:
        with tracer.start_as_current_span(f"chat.{name}", attributes={"rag.stage": name}) as span, log_format.stage(name):
            started = time.perf_counter()
            outcome = "failed"
            try:
                update = await node(state)
                outcome = "done"
            finally:
                duration_ms = round((time.perf_counter() - started) * 1000, 2)
                logger.info("stage %s %s", name, outcome, extra={"duration_ms": duration_ms})
            if update.get("degraded"):
                span.set_attribute("rag.degraded", list(update["degraded"]))
            return update

    return run


def conversation_key(state: ChatState) -> str:
    request = state.request
    if request.conversation_id is None:
        raise RuntimeError("a stateless chat request has no conversation in the store")
    return owned_conversation(request.identity.owner_key, request.conversation_id)


def build_chat_graph(services: ChatServices, policy: ChatPolicy) -> Any:
    """Compile the graph; ``await graph.ainvoke(ChatState(request=ChatInput(...)))``."""

    async def load_history(state: ChatState) -> dict[str, Any]:
        degraded: list[str] = []
        with _Timer("history") as timer:
            turns = policy.history.turns
            if state.request.conversation_id is None:
                recent = list(state.request.transcript[-turns:]) if turns else []
            elif turns:
                key = conversation_key(state)
                recent = await services.store.turns(key, last=turns)
                try:
                    recent = await services.access.visible(state.request.identity, key, recent)
                except DependencyFailed as exc:
                    # Degrades, fails closed: without the readable check no earlier answer that cites
                    # anything reaches the models (the retrieve node will say if the retriever is down).
                    recent = services.access.withheld(recent)
                    degraded.append(describe_failure(exc, "earlier answers with citations left out of the history"))
            else:
                recent = []
            history = cut_history(_history_for_llm(recent), policy.history)
            history_language = await asyncio.to_thread(conversation_language, policy.language, recent)
        return {"history": history, "history_language": history_language, "degraded": degraded, "timings_ms": timer.ms}

    async def identify_language(state: ChatState) -> dict[str, Any]:
        # Off the event loop: the identifier's model loads on its first use (about a second).
        language = await asyncio.to_thread(
            policy.language.of_question, state.request.message, history=state.history_language
        )
        return {"language": language}

    async def refine(state: ChatState) -> dict[str, Any]:
        degraded: list[str] = []
        with _Timer("refine") as timer:
            try:
                refined = await services.refiner.post(
                    "/v1/refine",
                    RefineRequest(
                        message=state.request.message,
                        history=state.history,
                        hyde=state.request.hyde,
                        language=state.language,
                    ),
                    RefineResponse,
                    idempotent=True,
                )
            except DependencyFailed as exc:
                logger.warning("refiner bypassed, appending the previous question: %s", exc)
                refined = refine_without_refiner(state.request.message, state.history)
                degraded.append(describe_failure(exc, "searched with the message and the previous question"))
        return {"refined": refined, "degraded": degraded, "timings_ms": timer.ms}

    def route_intent(state: ChatState) -> Intent:
        return state.refinement().intent

    async def retrieve(state: ChatState) -> dict[str, Any]:
        refined = state.refinement()
        # HyDE, decided here once: search with the hypothetical answer; rerank and generate keep the query.
        hyde = bool(refined.hyde_query)
        with _Timer("retrieve") as timer:
            result = await services.retriever.post(
                "/v1/search",
                SearchRequest(
                    query=refined.hyde_query if hyde else refined.query,
                    top_k=policy.search_depth(state.request.top_k),
                    mode=policy.search_mode,
                    include_embeddings=policy.pass_embeddings,
                    include_sentence_vectors=policy.pass_sentence_vectors,
                    language=state.language,
                ),
                SearchResponse,
                idempotent=True,
                headers=identity_headers(state.request.identity),
            )
        return {
            "candidates": result.passages,
            "query_embedding": result.query_embedding,
            "searched_hyde": hyde,
            "timings_ms": timer.ms,
        }

    async def rerank(state: ChatState) -> dict[str, Any]:
        candidates, top_k = state.candidates, state.request.top_k
        degraded: list[str] = []
        with _Timer("rerank") as timer:
            if not candidates:
                passages = []
            else:
                try:
                    result = await services.reranker.post(
                        "/v1/rerank",
                        RerankRequest(
                            query=state.refinement().query,
                            # The reranker has no use for sentence vectors: they wait here.
                            passages=[p.model_copy(update={"sentence_vectors": None}) for p in candidates],
                            top_k=top_k,
                            query_embedding=state.query_embedding,
                        ),
                        RerankResponse,
                        idempotent=True,
                    )
                    # The reranker answers ids and scores: our own candidates, in its order, keep their
                    # stored vectors (the generator scores sentences with them).
                    try:
                        passages = result.ranked_passages(candidates)
                    except ValueError as exc:  # an id not sent, or one twice: its order cannot be trusted
                        raise DependencyFailed("reranker", "bad_response", str(exc)) from exc
                except DependencyFailed as exc:
                    logger.warning("rerank bypassed, keeping the retriever's order: %s", exc)
                    passages = candidates[:top_k]
                    degraded.append(describe_failure(exc, "kept the retriever's order"))
                else:
                    degraded.extend(
                        f"reranker stage {r.name} failed: {r.reason}"[:300] for r in result.reports if r.status == "failed"
                    )
        return {"passages": passages, "degraded": degraded, "timings_ms": timer.ms}

    async def generate(state: ChatState) -> dict[str, Any]:
        refined = state.refinement()
        request = GenerateRequest(
            query=refined.query,
            # Stored vectors travel on: the generator then embeds only the sentences it scores. The
            # query's vector is the search's, so only when the search used the query (not HyDE).
            passages=state.passages,
            history=state.history,
            query_embedding=None if state.searched_hyde else state.query_embedding,
            language=state.language,
        )
        timings: dict[str, float] = {}
        with _Timer("generate") as timer:
            try:
                if state.request.stream:
                    generation = None
                    async for item in generation_events(services.generator, request):
                        if isinstance(item, Token):
                            if "first_token" not in timings:
                                timings["first_token"] = round((time.perf_counter() - timer.started) * 1000, 2)
                            _emit(item.text)
                        else:
                            generation = item
                    if generation is None:  # the stream client raises first; kept for safety under -O
                        raise DependencyFailed("generator", "bad_response", "the stream ended without a final event")
                else:
                    generation = await services.generator.post("/v1/generate", request, GenerateResponse)
            except DependencyFailed as exc:
                # Overloaded and rejected are answers, not outages; streamed tokens cannot be taken back.
                if exc.kind in ("overloaded", "rejected") or "first_token" in timings:
                    raise
                logger.warning("generator bypassed, quoting the top passages: %s", exc)
                generation = answer_without_generator(
                    refined.query, state.passages, texts=policy.language.of_texts(state.language),
                    language=state.language,
                )
                generation = generation.model_copy(
                    update={"degraded": [describe_failure(exc, "quoted the best-matching sentence of the top passages")]}
                )
                _emit(generation.answer)
        return {"generation": generation, "degraded": generation.degraded, "timings_ms": timer.ms | timings}

    async def chitchat(state: ChatState) -> dict[str, Any]:
        reply = "thanks" if _THANKS.search(state.request.message) else "chitchat"
        answer = policy.replies.text(reply, policy.language.of_texts(state.language))
        _emit(answer)
        return {"generation": GenerateResponse(answer=answer, citations=[], abstained=False)}

    async def meta(state: ChatState) -> dict[str, Any]:
        with _Timer("meta") as timer:
            if state.request.conversation_id is None:
                turns = list(state.request.transcript)
            else:
                turns = await services.store.turns(conversation_key(state))
        answer = describe_conversation(turns, policy.language.of_texts(state.language))
        _emit(answer)
        return {"generation": GenerateResponse(answer=answer, citations=[], abstained=False), "timings_ms": timer.ms}

    async def decline(state: ChatState) -> dict[str, Any]:
        answer = policy.replies.text("out_of_scope", policy.language.of_texts(state.language))
        _emit(answer)
        generation = GenerateResponse(answer=answer, citations=[], abstained=True, abstain_reason="out_of_scope")
        return {"generation": generation}

    async def save_turn(state: ChatState) -> dict[str, Any]:
        result = ChatResult.of(state)
        if state.request.conversation_id is None:
            return {"result": result}
        cited = {citation.chunk_id for citation in result.generation.citations}
        sources = [source_of(p) for p in state.passages if p.chunk_id in cited]
        with _Timer("save") as timer:
            index = await services.store.append(conversation_key(state), result.to_turn(), sources)
        return {"result": result.stored_at(index), "timings_ms": timer.ms}

    builder = StateGraph(ChatState)
    for name, node in [
        ("load_history", load_history),
        ("identify_language", identify_language),
        ("refine", refine),
        ("retrieve", retrieve),
        ("rerank", rerank),
        ("generate", generate),
        ("chitchat", chitchat),
        ("meta", meta),
        ("decline", decline),
        ("save_turn", save_turn),
    ]:
        builder.add_node(name, traced_node(name, node))
    builder.add_edge(START, "load_history")
    builder.add_edge("load_history", "identify_language")
    builder.add_edge("identify_language", "refine")
    builder.add_conditional_edges("refine", route_intent, INTENT_ROUTES)
    builder.add_edge("retrieve", "rerank")
    builder.add_edge("rerank", "generate")
    for last in ("generate", "chitchat", "meta", "decline"):
        builder.add_edge(last, "save_turn")
    builder.add_edge("save_turn", END)
    return builder.compile()
