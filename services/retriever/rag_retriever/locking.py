"""An asyncio readers-writer lock: searches share the index, a document replacement has it alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ReadWriteLock:
    """Many readers or one writer. Waiting writers block new readers, so ingestion is not starved."""

    def __init__(self) -> None:
        self._condition = asyncio.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        async with self._condition:
            await self._condition.wait_for(lambda: not self._writing and self._writers_waiting == 0)
            self._readers += 1
        try:
            yield
        finally:
            async with self._condition:
                self._readers -= 1
                self._condition.notify_all()

    @asynccontextmanager
    async def write(self) -> AsyncIterator[None]:
        async with self._condition:
            self._writers_waiting += 1
            try:
                await self._condition.wait_for(lambda: not self._writing and self._readers == 0)
            finally:
                self._writers_waiting -= 1
                # A cancelled writer may have been the only thing holding readers back.
                self._condition.notify_all()
            self._writing = True
        try:
            yield
        finally:
            async with self._condition:
                self._writing = False
                self._condition.notify_all()
