"""The gateway assembled from its settings: the one place its parts are built.

``async with open_runtime(settings) as runtime`` connects Redis, opens one pooled client per
downstream service, compiles the chat graph and wraps it in the chat and document services; it
closes them all on exit. The app's lifespan and the benchmarks open it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

from redis.asyncio import Redis

from rag_common.errors import DependencyFailed
from rag_common.http import ServiceClient
from rag_gateway.chat_graph import ChatPolicy, ChatServices, Replies, build_chat_graph
from rag_gateway.chat_service import ChatService
from rag_gateway.conversation_store import ConversationStore
from rag_gateway.document_service import DocumentService
from rag_gateway.settings import GatewaySettings

DOWNSTREAM = ("refiner", "retriever", "reranker", "generator")


@dataclass
class GatewayRuntime:
    settings: GatewaySettings
    store: ConversationStore
    clients: dict[str, ServiceClient]
    chat: ChatService
    documents: DocumentService

    async def readiness(self) -> dict[str, str]:
        checks: dict[str, str] = {}
        try:
            checks["redis"] = "ok" if await self.store.ping() else "no PONG"
        except DependencyFailed as exc:
            checks["redis"] = exc.reason
        for name in DOWNSTREAM:
            checks[name] = await self.clients[name].is_healthy()
        return checks


def chat_policy(settings: GatewaySettings) -> ChatPolicy:
    return ChatPolicy(
        history=settings.history_window(),
        retrieval_candidates=settings.retrieval_candidates,
        search_mode=settings.search_mode,
        pass_embeddings=settings.pass_embeddings,
        replies=Replies(
            chitchat=settings.chitchat_reply,
            thanks=settings.thanks_reply,
            out_of_scope=settings.out_of_scope_reply,
        ),
    )


@asynccontextmanager
async def open_runtime(settings: GatewaySettings | None = None) -> AsyncIterator[GatewayRuntime]:
    """Settings default to the ``GATEWAY_*`` environment."""
    settings = settings or GatewaySettings()
    async with AsyncExitStack() as stack:
        redis = Redis.from_url(
            settings.redis_url,
            decode_responses=True,
            socket_timeout=settings.redis_timeout_s,
            socket_connect_timeout=settings.redis_timeout_s,
        )
        stack.push_async_callback(redis.aclose)
        store = ConversationStore(redis, max_turns=settings.conversation_max_turns, ttl_s=settings.conversation_ttl_s)
        clients = {
            "refiner": ServiceClient("refiner", settings.refiner_url, settings.refiner_timeout_s),
            "retriever": ServiceClient("retriever", settings.retriever_url, settings.retriever_timeout_s),
            # Ingestion of a large upload takes minutes: its own pool with its own timeout.
            "ingest": ServiceClient("retriever", settings.retriever_url, settings.ingest_timeout_s),
            "reranker": ServiceClient("reranker", settings.reranker_url, settings.reranker_timeout_s),
            "generator": ServiceClient("generator", settings.generator_url, settings.generator_timeout_s),
        }
        stack.push_async_callback(lambda: asyncio.gather(*(client.aclose() for client in clients.values())))
        services = ChatServices(clients["refiner"], clients["retriever"], clients["reranker"], clients["generator"], store)
        graph = build_chat_graph(services, chat_policy(settings))
        yield GatewayRuntime(
            settings=settings,
            store=store,
            clients=clients,
            chat=ChatService(graph, store, default_top_k=settings.default_top_k, hyde_default=settings.hyde_default),
            documents=DocumentService(clients["ingest"], max_upload_mb=settings.max_upload_mb),
        )
