from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from fastapi.testclient import TestClient
from redis.asyncio import Redis

from rag_gateway.app import create_app
from ragctl.in_process import serve_in_thread

from .fake_services import build_fake_services
from .support import gateway_settings


@pytest.fixture
async def redis_client(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    await client.flushdb()
    yield client
    await client.aclose()


@pytest.fixture(scope="session")
def fake_services() -> Iterator[tuple[str, list]]:
    """The four downstream fakes on one real HTTP port, and the list of calls they received."""
    calls: list[tuple[str, dict]] = []
    with serve_in_thread(build_fake_services(calls)) as url:
        yield url, calls


@pytest.fixture
def client(redis_url: str, fake_services) -> Iterator[TestClient]:
    url, calls = fake_services
    calls.clear()
    with TestClient(create_app(gateway_settings(redis_url, url))) as test_client:
        yield test_client
