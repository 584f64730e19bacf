"""The gateway assembled from its settings: the one place its parts are built.

``async with open_runtime(settings) as runtime`` connects Redis, opens one pooled client per
downstream service, compiles the chat graph and wraps it in the chat and document services; it
closes them all on exit. The app's lifespan and the benchmarks open it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from redis.asyncio import Redis

from rag_common.errors import DependencyFailed
from rag_common.http import RetryPolicy, ServiceClient
from rag_common.identity import ALL_SCOPES, Identity
from rag_common.telemetry import tracer_provider
from rag_gateway import redis_client
from rag_gateway.api_keys import ApiKeyStore
from rag_gateway.audit_log import AuditLog
from rag_gateway.authentication import Authenticator
from rag_gateway.bearer_tokens import ClaimMapping, JwtVerifier
from rag_gateway.chat_graph import ChatServices, build_chat_graph
from rag_gateway.chat_policy import ChatPolicy
from rag_gateway.chat_service import ChatService
from rag_gateway.conversation_access import ConversationAccess
from rag_gateway.conversation_store import ConversationStore
from rag_gateway.document_service import DocumentService
from rag_gateway.query_log import JsonlFileSink, NullSink, QueryLogSink, QueryLogWriter
from rag_gateway.rate_limits import RateLimits
from rag_gateway.settings import GatewaySettings

logger = logging.getLogger(__name__)

DOWNSTREAM = ("refiner", "retriever", "reranker", "generator")


@dataclass
class GatewayRuntime:
    settings: GatewaySettings
    store: ConversationStore
    clients: dict[str, ServiceClient]
    chat: ChatService
    documents: DocumentService
    authenticator: Authenticator
    rate_limits: RateLimits
    audit: AuditLog
    query_log: QueryLogWriter

    async def readiness(self) -> dict[str, str]:
        checks: dict[str, str] = {}
        try:
            checks["redis"] = "ok" if await self.store.ping() else "no PONG"
        except DependencyFailed as exc:
            checks["redis"] = exc.reason
        for name in DOWNSTREAM:
            checks[name] = await self.clients[name].is_healthy()
        return checks


def jwt_verifier(settings: GatewaySettings) -> JwtVerifier | None:
    """The bearer-token verifier when an issuer is configured; a half configuration fails at start."""
    if settings.jwt_issuer is None:
        return None
    if settings.jwt_audience is None:
        raise ValueError("GATEWAY_JWT_ISSUER is set but GATEWAY_JWT_AUDIENCE is not")
    return JwtVerifier(
        issuer=settings.jwt_issuer,
        audience=settings.jwt_audience,
        jwks_url=settings.jwt_jwks_url,
        public_key=settings.jwt_public_key,
        algorithms=settings.jwt_algorithms,
        claims=ClaimMapping.of(settings),
    )


def authenticator(settings: GatewaySettings, keys: ApiKeyStore) -> Authenticator:
    if settings.auth == "off":
        logger.warning(
            "GATEWAY_AUTH=off: every caller is %s/%s with every scope; do not expose this gateway",
            settings.auth_off_tenant,
            settings.auth_off_user,
        )
        anonymous = Identity(tenant=settings.auth_off_tenant, user=settings.auth_off_user, scopes=list(ALL_SCOPES))
        return Authenticator(keys, anonymous=anonymous)
    return Authenticator(keys, jwt_verifier(settings))


def query_log_sink(settings: GatewaySettings) -> QueryLogSink:
    """The sink GATEWAY_QUERY_LOG_SINK names (opensearch-py is imported only for the opensearch one)."""
    if settings.query_log_sink == "off":
        return NullSink()
    if settings.query_log_sink == "file":
        return JsonlFileSink(
            Path(settings.query_log_path),
            max_bytes=int(settings.query_log_max_mb * 1024 * 1024),
            backups=settings.query_log_backups,
        )
    from opensearchpy import AsyncOpenSearch

    from rag_gateway.query_log_opensearch import OpenSearchQueryLogSink

    password = settings.query_log_opensearch_password
    auth = (settings.query_log_opensearch_user, password.get_secret_value() if password else "") if settings.query_log_opensearch_user else None
    client = AsyncOpenSearch(
        hosts=[settings.query_log_opensearch_url],
        http_auth=auth,
        verify_certs=settings.query_log_opensearch_verify_certs,
        timeout=settings.query_log_opensearch_timeout_s,
    )
    return OpenSearchQueryLogSink(client, prefix=settings.query_log_index_prefix, chunk_size=settings.query_log_batch_size)


def query_log_writer(settings: GatewaySettings) -> QueryLogWriter:
    return QueryLogWriter(
        query_log_sink(settings),
        queue_size=settings.query_log_queue_size,
        batch_size=settings.query_log_batch_size,
        salt=settings.query_log_user_salt.get_secret_value(),
    )


@asynccontextmanager
async def open_runtime(settings: GatewaySettings | None = None) -> AsyncIterator[GatewayRuntime]:
    """Settings default to the ``GATEWAY_*`` environment."""
    settings = settings or GatewaySettings()
    async with AsyncExitStack() as stack:
        redis_options = redis_client.redis_options(settings.redis_timeout_s)
        redis = Redis.from_url(settings.redis_url, decode_responses=True, **redis_options)
        stack.push_async_callback(redis.aclose)
        store = ConversationStore(redis, max_turns=settings.conversation_max_turns, ttl_s=settings.conversation_ttl_s)
        token = settings.service_token
        # Only the calls marked idempotent (refine, search, rerank) use it; see rag_common.http.
        retry = RetryPolicy(attempts=settings.retry_attempts, max_wait_s=settings.retry_max_wait_s)
        # Every internal call is a client span of the gateway's trace, sending W3C traceparent.
        traced = {"service_token": token, "tracer_provider": tracer_provider("gateway")}
        clients = {
            "refiner": ServiceClient("refiner", settings.refiner_url, settings.refiner_timeout_s, retry=retry, **traced),
            "retriever": ServiceClient(
                "retriever", settings.retriever_url, settings.retriever_timeout_s, retry=retry, **traced
            ),
            # Ingestion of a large upload takes minutes: its own pool with its own timeout.
            "ingest": ServiceClient("retriever", settings.retriever_url, settings.ingest_timeout_s, **traced),
            "reranker": ServiceClient("reranker", settings.reranker_url, settings.reranker_timeout_s, retry=retry, **traced),
            "generator": ServiceClient("generator", settings.generator_url, settings.generator_timeout_s, **traced),
        }
        stack.push_async_callback(lambda: asyncio.gather(*(client.aclose() for client in clients.values())))
        documents = DocumentService(clients["ingest"], max_upload_mb=settings.max_upload_mb)
        policy = ChatPolicy.of(settings)
        access = ConversationAccess(store, documents, settings.withheld_answer_reply, policy.language.default)
        services = ChatServices(
            clients["refiner"], clients["retriever"], clients["reranker"], clients["generator"], store, access
        )
        graph = build_chat_graph(services, policy)
        query_log = query_log_writer(settings)
        query_log.start()
        stack.push_async_callback(query_log.close)
        limits = {"chat": settings.rate_limit_chat, "stream": settings.rate_limit_stream, "ingest": settings.rate_limit_ingest}
        yield GatewayRuntime(
            settings=settings,
            store=store,
            clients=clients,
            chat=ChatService(graph, store, policy=policy, access=access, query_log=query_log),
            documents=documents,
            authenticator=authenticator(settings, ApiKeyStore(redis)),
            rate_limits=RateLimits(
                settings.redis_url, {kind: spec for kind, spec in limits.items() if spec}, redis_options=redis_options
            ),
            audit=AuditLog(redis),
            query_log=query_log,
        )
