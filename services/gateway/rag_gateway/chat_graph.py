"""The chat request as a LangGraph state graph.

load_history → refine → retrieve → rerank → generate → save_turn

Each node calls one service over HTTP and records its own latency. A node that fails raises
:class:`DownstreamError` naming its stage; the graph stops there, so ``save_turn`` (the only
writer) never runs for a failed request and the conversation is left untouched. The one
exception is rerank: ranking quality is not worth a lost request, so a reranker that is down,
slow or broken leaves the retriever's order in place and the response lists it in ``degraded``.
"""

from __future__ import annotations

import logging
import operator
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from prometheus_client import Histogram
from redis.exceptions import RedisError

from rag_common.http import DownstreamError, ServiceClient
from rag_common.schemas import (
    GenerateRequest,
    GenerateResponse,
    HistoryTurn,
    Passage,
    RefineRequest,
    RefineResponse,
    RerankRequest,
    RerankResponse,
    SearchMode,
    SearchRequest,
    SearchResponse,
    Turn,
)
from rag_gateway.conversation_store import ConversationStore

logger = logging.getLogger(__name__)

STAGE_SECONDS = Histogram(
    "rag_gateway_stage_seconds",
    "Latency of each stage of /v1/chat as seen by the gateway",
    ["stage"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
)


class ChatState(TypedDict, total=False):
    conversation_id: str
    message: str
    top_k: int
    history: list[Turn]
    refined: RefineResponse
    candidates: list[Passage]
    passages: list[Passage]
    query_embedding: list[float] | None
    rerank_stages: list[str]
    degraded: Annotated[list[str], operator.add]
    generation: GenerateResponse
    turn: Turn
    timings_ms: Annotated[dict[str, float], operator.or_]


@dataclass
class ChatServices:
    refiner: ServiceClient
    retriever: ServiceClient
    reranker: ServiceClient
    generator: ServiceClient
    store: ConversationStore


@dataclass
class ChatPolicy:
    history_turns: int
    retrieval_candidates: int
    search_mode: SearchMode
    #: Ask the retriever for stored embeddings and hand them to the reranker (diffusion and gMMR
    #: need them; otherwise the reranker re-embeds every candidate).
    pass_embeddings: bool = True


def _history_for_llm(history: list[Turn]) -> list[HistoryTurn]:
    # The refined query is the standalone form of each past question: the best context to carry.
    return [HistoryTurn(question=t.refined_query, answer=t.answer) for t in history]


class _Timer:
    def __init__(self, stage: str) -> None:
        self.stage = stage

    def __enter__(self) -> _Timer:
        self._start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.seconds = time.perf_counter() - self._start
        STAGE_SECONDS.labels(self.stage).observe(self.seconds)

    @property
    def ms(self) -> dict[str, float]:
        return {self.stage: round(self.seconds * 1000, 2)}


@contextmanager
def _store_stage() -> Iterator[None]:
    """Any Redis failure inside a node is the conversation store being unavailable."""
    try:
        yield
    except (RedisError, OSError) as exc:
        raise DownstreamError("conversation_store", "unavailable", f"redis: {type(exc).__name__}: {exc}") from exc


def build_chat_graph(services: ChatServices, policy: ChatPolicy) -> Any:
    """Compile the graph; ``await graph.ainvoke({"conversation_id", "message", "top_k"})``."""

    async def load_history(state: ChatState) -> dict[str, Any]:
        with _Timer("history") as timer:
            with _store_stage():
                history = await services.store.turns(state["conversation_id"], last=policy.history_turns)
        return {"history": history, "timings_ms": timer.ms}

    async def refine(state: ChatState) -> dict[str, Any]:
        with _Timer("refine") as timer:
            refined = await services.refiner.post(
                "/v1/refine",
                RefineRequest(message=state["message"], history=_history_for_llm(state["history"])),
                RefineResponse,
            )
        return {"refined": refined, "timings_ms": timer.ms}

    async def retrieve(state: ChatState) -> dict[str, Any]:
        with _Timer("retrieve") as timer:
            result = await services.retriever.post(
                "/v1/search",
                SearchRequest(
                    query=state["refined"].query,
                    top_k=max(policy.retrieval_candidates, state["top_k"]),
                    mode=policy.search_mode,
                    include_embeddings=policy.pass_embeddings,
                ),
                SearchResponse,
            )
        return {"candidates": result.passages, "query_embedding": result.query_embedding, "timings_ms": timer.ms}

    async def rerank(state: ChatState) -> dict[str, Any]:
        candidates, top_k = state["candidates"], state["top_k"]
        degraded: list[str] = []
        with _Timer("rerank") as timer:
            if not candidates:
                passages, stages = [], []
            else:
                try:
                    result = await services.reranker.post(
                        "/v1/rerank",
                        RerankRequest(
                            query=state["refined"].query,
                            passages=candidates,
                            top_k=top_k,
                            query_embedding=state.get("query_embedding"),
                        ),
                        RerankResponse,
                    )
                except DownstreamError as exc:
                    logger.warning("rerank bypassed, keeping the retriever's order: %s", exc)
                    passages, stages = candidates[:top_k], []
                    degraded.append(f"reranker {exc.kind}: {exc.message}"[:300])
                else:
                    passages, stages = result.passages, result.stages
                    degraded.extend(
                        f"reranker stage {r.name} failed: {r.reason}"[:300] for r in result.reports if r.status == "failed"
                    )
        # The generator needs text, not vectors.
        passages = [p.model_copy(update={"embedding": None}) if p.embedding is not None else p for p in passages]
        return {"passages": passages, "rerank_stages": stages, "degraded": degraded, "timings_ms": timer.ms}

    async def generate(state: ChatState) -> dict[str, Any]:
        with _Timer("generate") as timer:
            generation = await services.generator.post(
                "/v1/generate",
                GenerateRequest(
                    query=state["refined"].query,
                    passages=state["passages"],
                    history=_history_for_llm(state["history"]),
                ),
                GenerateResponse,
            )
        return {"generation": generation, "timings_ms": timer.ms}

    async def save_turn(state: ChatState) -> dict[str, Any]:
        generation = state["generation"]
        turn = Turn(
            message=state["message"],
            refined_query=state["refined"].query,
            answer=generation.answer,
            citations=generation.citations,
            abstained=generation.abstained,
            created_at=time.time(),
        )
        with _Timer("save") as timer:
            with _store_stage():
                await services.store.append(state["conversation_id"], turn)
        return {"turn": turn, "timings_ms": timer.ms}

    builder = StateGraph(ChatState)
    steps = [
        ("load_history", load_history),
        ("refine", refine),
        ("retrieve", retrieve),
        ("rerank", rerank),
        ("generate", generate),
        ("save_turn", save_turn),
    ]
    previous = START
    for name, node in steps:
        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder.compile()
