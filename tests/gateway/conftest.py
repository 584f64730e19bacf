from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()
