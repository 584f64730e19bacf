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
from redis.exceptions import RedisError, WatchError

from rag_common.errors import DependencyFailed
from rag_common.schemas import Feedback, Turn

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

    async def append(self, conversation_id: str, turn: Turn) -> int:
        """Store ``turn`` last; its 0-based index in the conversation as :meth:`turns` lists it."""
        key = self._key(conversation_id)
        with _redis_failures():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, turn.model_dump_json())
                pipe.ltrim(key, -self._max_turns, -1)
                pipe.expire(key, self._ttl_s)
                length, *_ = await pipe.execute()
        return min(int(length), self._max_turns) - 1

    async def set_feedback(self, conversation_id: str, index: int, feedback: Feedback) -> Turn | None:
        """Put ``feedback`` on the turn at ``index`` (0-based, as :meth:`turns` lists them) and return
        the updated turn; None if the conversation has no such turn. Read and write are one
        optimistic transaction (WATCH, LINDEX, MULTI LSET): any write to the conversation in between
        (a new turn, other feedback) makes it start over, so neither write is lost."""
        key = self._key(conversation_id)
        with _redis_failures():
            async with self._redis.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        await pipe.watch(key)
                        raw = await pipe.lindex(key, index)
                        if raw is None:
                            return None
                        turn = Turn.model_validate_json(raw).model_copy(update={"feedback": feedback})
                        pipe.multi()
                        pipe.lset(key, index, turn.model_dump_json())
                        await pipe.execute()
                        return turn
                    except WatchError:
                        continue

    async def delete(self, conversation_id: str) -> bool:
        with _redis_failures():
            return bool(await self._redis.delete(self._key(conversation_id)))

    async def ttl(self, conversation_id: str) -> int:
        with _redis_failures():
            return int(await self._redis.ttl(self._key(conversation_id)))

    async def ping(self) -> bool:
        with _redis_failures():
            return bool(await self._redis.ping())
