"""Conversations in Redis: one list per conversation, bounded, with a sliding TTL.

An append is one MULTI/EXEC transaction (RPUSH + LTRIM + EXPIRE), so concurrent turns of the
same conversation never interleave half-written and the bound and TTL always hold.

Every Redis failure leaves this module as ``DependencyFailed("conversation_store", "unavailable")``:
the one place where Redis errors are translated, whoever called the store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from redis.asyncio import Redis
from redis.exceptions import RedisError

from rag_common.errors import DependencyFailed
from rag_common.schemas import Turn

KEY_PREFIX = "rag:conversation:"
STAGE = "conversation_store"


def owned_conversation(owner: str, conversation_id: str) -> str:
    """The store's name for ``conversation_id`` of ``owner`` (``tenant/user``): another caller asking
    for the same id names another, absent, conversation, so it gets the 404 of an unknown id."""
    return f"{owner}:{conversation_id}"


@contextmanager
def _redis_failures() -> Iterator[None]:
    try:
        yield
    except (RedisError, OSError) as exc:
        raise DependencyFailed(STAGE, "unavailable", f"redis: {type(exc).__name__}: {exc}") from exc


class ConversationStore:
    def __init__(self, redis: Redis, *, max_turns: int, ttl_s: int) -> None:
        self._redis = redis
        self._max_turns = max_turns
        self._ttl_s = ttl_s

    @staticmethod
    def new_id() -> str:
        return uuid.uuid4().hex

    @staticmethod
    def _key(conversation_id: str) -> str:
        return KEY_PREFIX + conversation_id

    async def exists(self, conversation_id: str) -> bool:
        with _redis_failures():
            return bool(await self._redis.exists(self._key(conversation_id)))

    async def turns(self, conversation_id: str, last: int | None = None) -> list[Turn]:
        start = -last if last else 0
        with _redis_failures():
            raw = await self._redis.lrange(self._key(conversation_id), start, -1)
        return [Turn.model_validate_json(item) for item in raw]

    async def append(self, conversation_id: str, turn: Turn) -> None:
        key = self._key(conversation_id)
        with _redis_failures():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, turn.model_dump_json())
                pipe.ltrim(key, -self._max_turns, -1)
                pipe.expire(key, self._ttl_s)
                await pipe.execute()

    async def delete(self, conversation_id: str) -> bool:
        with _redis_failures():
            return bool(await self._redis.delete(self._key(conversation_id)))

    async def ttl(self, conversation_id: str) -> int:
        with _redis_failures():
            return int(await self._redis.ttl(self._key(conversation_id)))

    async def ping(self) -> bool:
        with _redis_failures():
            return bool(await self._redis.ping())
