"""Conversations in Redis: one list per conversation, bounded, with a sliding TTL.

An append is one MULTI/EXEC transaction (RPUSH + LTRIM + EXPIRE, plus the owner's index and the
cited sources below), so concurrent turns of the same conversation never interleave half-written and
the bound and TTL always hold.

Beside each conversation list, for the web chat:

- ``rag:conversations:<owner>``: a sorted set of the owner's conversation ids scored by their last
  turn's time (entries older than the TTL are trimmed on each append and ignored when listed);
- ``rag:conversation-sources:<owner>:<id>``: a hash chunk id → the cited chunk as it was when the
  answer cited it (its text, title, section, page), so the citation offsets always point into the
  text they were computed on, even after the document is re-ingested or deleted. Same TTL.

Every Redis failure leaves this module as ``DependencyFailed("conversation_store", "unavailable")``:
the one place where Redis errors are translated, whoever called the store.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from redis.asyncio import Redis
from redis.exceptions import RedisError, WatchError

from rag_common.errors import DependencyFailed
from rag_common.schemas import Passage
from rag_gateway.chat_models import ConversationSummary, Feedback, SourceChunk, Turn

KEY_PREFIX = "rag:conversation:"
INDEX_PREFIX = "rag:conversations:"
SOURCES_PREFIX = "rag:conversation-sources:"
STAGE = "conversation_store"
#: Characters of the first question kept as a conversation's title in the list.
TITLE_CHARS = 80


def owned_conversation(owner: str, conversation_id: str) -> str:
    """The store's name for ``conversation_id`` of ``owner`` (``tenant/user``): another caller asking
    for the same id names another, absent, conversation, so it gets the 404 of an unknown id."""
    return f"{owner}:{conversation_id}"


def split_owned(owned: str) -> tuple[str, str]:
    """``(owner, conversation_id)`` of a name made by :func:`owned_conversation` (ids hold no ``:``)."""
    owner, _, conversation_id = owned.rpartition(":")
    return owner, conversation_id


def source_of(passage: Passage) -> SourceChunk:
    return SourceChunk(
        chunk_id=passage.chunk_id,
        doc_id=passage.doc_id,
        title=passage.title,
        source=passage.source,
        page=passage.page,
        section_path=passage.section_path,
        text=passage.text,
    )


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

    async def append(self, conversation_id: str, turn: Turn, sources: Sequence[SourceChunk] = ()) -> int:
        """Store ``turn`` last, with the chunks its citations point to, and move the conversation to the
        top of its owner's list; all in one transaction. Returns the turn's 0-based index in the
        conversation as :meth:`turns` lists it."""
        key = self._key(conversation_id)
        owner, public_id = split_owned(conversation_id)
        index = INDEX_PREFIX + owner
        now = time.time()
        with _redis_failures():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.rpush(key, turn.model_dump_json())
                pipe.ltrim(key, -self._max_turns, -1)
                pipe.expire(key, self._ttl_s)
                if sources:
                    sources_key = SOURCES_PREFIX + conversation_id
                    pipe.hset(sources_key, mapping={s.chunk_id: s.model_dump_json() for s in sources})
                    pipe.expire(sources_key, self._ttl_s)
                pipe.zadd(index, {public_id: now})
                pipe.zremrangebyscore(index, "-inf", now - self._ttl_s)
                pipe.expire(index, self._ttl_s)
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
        owner, public_id = split_owned(conversation_id)
        with _redis_failures():
            async with self._redis.pipeline(transaction=True) as pipe:
                pipe.delete(self._key(conversation_id))
                pipe.delete(SOURCES_PREFIX + conversation_id)
                pipe.zrem(INDEX_PREFIX + owner, public_id)
                deleted, *_ = await pipe.execute()
        return bool(deleted)

    async def sources(self, conversation_id: str) -> dict[str, SourceChunk]:
        """Every chunk the conversation's turns cited, by chunk id."""
        with _redis_failures():
            raw = await self._redis.hgetall(SOURCES_PREFIX + conversation_id)
        return {chunk_id: SourceChunk.model_validate_json(value) for chunk_id, value in raw.items()}

    async def source(self, conversation_id: str, chunk_id: str) -> SourceChunk | None:
        """The chunk ``chunk_id`` as a turn of the conversation cited it; None if no turn did."""
        with _redis_failures():
            raw = await self._redis.hget(SOURCES_PREFIX + conversation_id, chunk_id)
        return None if raw is None else SourceChunk.model_validate_json(raw)

    async def list_owned(self, owner: str, limit: int = 100) -> list[ConversationSummary]:
        """The owner's live conversations, the most recent first: id, title (the first question, cut),
        turns and the time of the last turn. Ids whose conversation expired are skipped (and trimmed by
        the next append)."""
        index = INDEX_PREFIX + owner
        with _redis_failures():
            entries = await self._redis.zrevrangebyscore(
                index, "+inf", time.time() - self._ttl_s, start=0, num=limit, withscores=True
            )
            async with self._redis.pipeline(transaction=False) as pipe:
                for public_id, _ in entries:
                    key = self._key(owned_conversation(owner, public_id))
                    pipe.lindex(key, 0)
                    pipe.llen(key)
                found = await pipe.execute()
        summaries = []
        for (public_id, updated_at), first, turns in zip(entries, found[::2], found[1::2]):
            if first is None:
                continue
            question = Turn.model_validate_json(first).message.strip()
            title = question if len(question) <= TITLE_CHARS else question[: TITLE_CHARS - 1].rstrip() + "…"
            summaries.append(
                ConversationSummary(conversation_id=public_id, title=title, turns=int(turns), updated_at=float(updated_at))
            )
        return summaries

    async def ttl(self, conversation_id: str) -> int:
        with _redis_failures():
            return int(await self._redis.ttl(self._key(conversation_id)))

    async def ping(self) -> bool:
        with _redis_failures():
            return bool(await self._redis.ping())
