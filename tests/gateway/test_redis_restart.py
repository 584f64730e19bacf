"""After Redis restarts (a crash, ``kill -9``, a failover), the gateway's first request works: its
pooled connections to the old process are dead, and each client must reconnect instead of failing
the request that finds them. Real Redis, really killed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from redis.asyncio import Redis

from rag_common.identity import Identity
from rag_gateway.conversation_store import ConversationStore
from rag_gateway.rate_limits import RateLimits
from rag_gateway.redis_client import redis_options
from ragctl.stack import ManagedProcess, free_port, start_redis

CALLER = Identity(tenant="acme", user="ann", scopes=["chat"])


def _kill_and_restart(redis: ManagedProcess) -> ManagedProcess:
    os.kill(redis.process.pid, signal.SIGKILL)
    redis.process.wait(timeout=10)
    assert redis.respawn is not None
    return redis.respawn()


async def test_rate_limits_and_the_conversation_store_work_on_the_first_call_after_a_restart(tmp_path: Path) -> None:
    redis = start_redis(free_port(), tmp_path / "data", tmp_path)
    limits = RateLimits(redis.url, {"chat": "100/minute"})
    client = Redis.from_url(redis.url, decode_responses=True, **redis_options(timeout_s=2.0))
    store = ConversationStore(client, max_turns=10, ttl_s=60)
    try:
        await limits.hit("chat", CALLER)
        assert await store.turns("acme/ann:c1") == []
        redis = _kill_and_restart(redis)
        await limits.hit("chat", CALLER)  # raised DependencyFailed("rate_limits") before the fix
        assert await store.turns("acme/ann:c1") == []
    finally:
        await client.aclose()
        redis.stop()
