from __future__ import annotations

import asyncio
import time

from redis.asyncio import Redis

from rag_gateway.chat_models import Feedback, Turn
from rag_gateway.conversation_store import ConversationStore


def _turn(i: int) -> Turn:
    return Turn(message=f"q{i}", refined_query=f"q{i}", answer=f"a{i}", created_at=time.time())


async def test_append_keeps_order_bound_and_ttl(redis_client: Redis) -> None:
    store = ConversationStore(redis_client, max_turns=3, ttl_s=100)
    cid = store.new_id()
    assert not await store.exists(cid)
    for i in range(5):
        await store.append(cid, _turn(i))
    turns = await store.turns(cid)
    assert [t.message for t in turns] == ["q2", "q3", "q4"]
    assert [t.message for t in await store.turns(cid, last=2)] == ["q3", "q4"]
    assert 90 < await store.ttl(cid) <= 100


async def test_concurrent_appends_are_atomic(redis_client: Redis) -> None:
    store = ConversationStore(redis_client, max_turns=10, ttl_s=100)
    cid = store.new_id()
    await asyncio.gather(*(store.append(cid, _turn(i)) for i in range(60)))
    turns = await store.turns(cid)
    assert len(turns) == 10
    assert len({t.message for t in turns}) == 10


async def test_delete(redis_client: Redis) -> None:
    store = ConversationStore(redis_client, max_turns=10, ttl_s=100)
    cid = store.new_id()
    await store.append(cid, _turn(0))
    assert await store.delete(cid)
    assert not await store.delete(cid)
    assert await store.turns(cid) == []


async def test_append_returns_the_index_the_turn_is_listed_at(redis_client: Redis) -> None:
    store = ConversationStore(redis_client, max_turns=3, ttl_s=100)
    cid = store.new_id()
    assert [await store.append(cid, _turn(i)) for i in range(5)] == [0, 1, 2, 2, 2]  # trimmed to the last 3


async def test_concurrent_feedback_on_every_turn_loses_none_and_keeps_the_ttl(redis_client: Redis) -> None:
    store = ConversationStore(redis_client, max_turns=20, ttl_s=100)
    cid = store.new_id()
    for i in range(8):
        await store.append(cid, _turn(i))
    await redis_client.expire(store._key(cid), 50)
    verdicts = [Feedback(rating="down" if i % 2 else "up", comment=f"c{i}", created_at=float(i)) for i in range(8)]
    # Every write races the others on the same key: WATCH makes the losers start over, none is lost.
    updated = await asyncio.gather(*(store.set_feedback(cid, i, verdicts[i]) for i in range(8)))
    assert [t.message for t in updated] == [f"q{i}" for i in range(8)]
    turns = await store.turns(cid)
    assert [t.feedback for t in turns] == verdicts
    assert [t.message for t in turns] == [f"q{i}" for i in range(8)]
    assert 40 < await store.ttl(cid) <= 50
    assert await store.set_feedback(cid, 8, verdicts[0]) is None
    assert await store.set_feedback(store.new_id(), 0, verdicts[0]) is None

