"""After Redis restarts (a crash, ``kill -9``, a failover), the gateway's first request works: its
pooled connections to the old process are dead, and each client must reconnect instead of failing
the request that finds them. Real Redis, really killed."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from redis.asyncio import Redis

from rag_common.identity import Identity
from rag_gateway.chat_models import Turn
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


async def _append_then_kill_and_restart(redis: ManagedProcess, turns: int) -> tuple[ManagedProcess, dict[str, int]]:
    """Append ``turns`` turns over 8 conversations, SIGKILL Redis as soon as the last append was
    acknowledged, restart it; returns it and how many turns each conversation holds now."""
    client = Redis.from_url(redis.url, decode_responses=True, **redis_options(timeout_s=2.0))
    store = ConversationStore(client, max_turns=turns, ttl_s=3600)
    conversations = [f"acme/ann:c{i}" for i in range(8)]
    try:
        for i in range(turns):
            turn = Turn(message=f"question {i}", refined_query=f"question {i}", answer=f"answer {i}", created_at=float(i))
            await store.append(conversations[i % len(conversations)], turn)
        redis = _kill_and_restart(redis)
        return redis, {conversation: len(await store.turns(conversation)) for conversation in conversations}
    finally:
        await client.aclose()


async def test_every_acknowledged_turn_survives_a_kill_of_redis_with_the_append_only_file(tmp_path: Path) -> None:
    """With ``appendonly yes`` and ``appendfsync everysec`` (as ``ragctl up`` and compose run it), Redis
    writes each command to the append-only file before it replies, so a killed process loses no
    acknowledged write (an OS crash or power loss could lose up to the last second)."""
    redis = start_redis(free_port(), tmp_path / "data", tmp_path)
    try:
        redis, held = await _append_then_kill_and_restart(redis, 400)
        assert held == {f"acme/ann:c{i}": 50 for i in range(8)}
    finally:
        redis.stop()


async def test_without_the_append_only_file_the_same_kill_loses_the_turns(tmp_path: Path) -> None:
    """The control: what the test above would see if persistence were off."""
    redis = start_redis(free_port(), tmp_path / "data", tmp_path, persist=False)
    try:
        redis, held = await _append_then_kill_and_restart(redis, 400)
        assert sum(held.values()) == 0
    finally:
        redis.stop()
