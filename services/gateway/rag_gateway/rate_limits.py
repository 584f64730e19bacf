"""Per-caller rate limits, counted in Redis by the ``limits`` library (sliding-window counters), so
every gateway replica shares one count per caller.

A caller is a tenant and a user (an API key's or a token's identity). Each kind of request has its
own limit (``GATEWAY_RATE_LIMIT_CHAT``, ``…_STREAM``, ``…_INGEST``, in the ``limits`` notation such as
``30/minute``); past it the request is refused with 429 and ``Retry-After`` (seconds until the window
has room again) before any work is done.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from limits import RateLimitItem, parse
from limits.aio.storage import RedisStorage
from limits.aio.strategies import SlidingWindowCounterRateLimiter
from redis.exceptions import RedisError

from rag_common.errors import DependencyFailed, RateLimited
from rag_common.identity import Identity
from rag_gateway import redis_client

RequestKind = Literal["chat", "stream", "ingest"]


class RateLimits:
    def __init__(
        self,
        redis_url: str,
        limits: dict[RequestKind, str],
        *,
        key_prefix: str = "rag:ratelimit",
        redis_options: dict[str, Any] | None = None,
    ) -> None:
        """``limits``: request kind → ``limits`` notation; a kind without an entry is not limited.
        ``redis_options``: the Redis client's (``rag_gateway.redis_client``), passed through ``limits``."""
        self._items: dict[str, RateLimitItem] = {kind: parse(spec) for kind, spec in limits.items()}
        self._storage = RedisStorage(
            redis_url.replace("redis://", "async+redis://", 1),
            implementation="redispy",
            key_prefix=key_prefix,
            **(redis_options or redis_client.redis_options(timeout_s=2.0)),
        )
        self._limiter = SlidingWindowCounterRateLimiter(self._storage)

    async def hit(self, kind: RequestKind, identity: Identity) -> None:
        """Count one request of ``kind`` for ``identity``; raises RateLimited when over the limit."""
        item = self._items.get(kind)
        if item is None:
            return
        try:
            if await self._limiter.hit(item, kind, identity.tenant, identity.user):
                return
            stats = await self._limiter.get_window_stats(item, kind, identity.tenant, identity.user)
        except RedisError as exc:
            raise DependencyFailed("rate_limits", "unavailable", f"Redis: {type(exc).__name__}") from exc
        retry_after = max(1.0, stats.reset_time - time.time())
        raise RateLimited(f"rate limit of {item} for {kind} requests reached", retry_after_s=retry_after)
