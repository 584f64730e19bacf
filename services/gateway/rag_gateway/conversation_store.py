"""Conversations in Redis: one list per conversation, bounded, with a sliding TTL.

An append is one MULTI/EXEC transaction (RPUSH + LTRIM + EXPIRE), so concurrent turns of the
same conversation never interleave half-written and the bound and TTL always hold.
"""

from __future__ import annotations

import uuid

from redis.asyncio import Redis

from rag_common.schemas import Turn

KEY_PREFIX = "rag:conversation:"


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
        return bool(await self._redis.exists(self._key(conversation_id)))

    async def turns(self, conversation_id: str, last: int | None = None) -> list[Turn]:
        start = -last if last else 0
        raw = await self._redis.lrange(self._key(conversation_id), start, -1)
        return [Turn.model_validate_json(item) for item in raw]

    async def append(self, conversation_id: str, turn: Turn) -> None:
        key = self._key(conversation_id)
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, turn.model_dump_json())
            pipe.ltrim(key, -self._max_turns, -1)
            pipe.expire(key, self._ttl_s)
            await pipe.execute()

    async def delete(self, conversation_id: str) -> bool:
        return bool(await self._redis.delete(self._key(conversation_id)))

    async def ttl(self, conversation_id: str) -> int:
        return int(await self._redis.ttl(self._key(conversation_id)))

    async def ping(self) -> bool:
        return bool(await self._redis.ping())
