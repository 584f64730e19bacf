"""An asyncio readers-writer lock: searches share the index, a document replacement has it alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class ReadWriteLock:
    """Many readers or one writer. Waiting writers block new readers, so ingestion is not starved.

    The writer may let readers back in for a part of its work that they cannot see (``readers_in``):
    the embedded index prepares a replacement (its new vectors added to the graph out of sight of
    searches, which took seconds for a document of 8,000 chunks) and only its commit needs the lock
    alone (issue 29)."""

    def __init__(self) -> None:
        self._condition = asyncio.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0
        self._readers_in = False

    @asynccontextmanager
    async def read(self) -> AsyncIterator[None]:
        async with self._condition:
            await self._condition.wait_for(
                lambda: self._readers_in or (not self._writing and self._writers_waiting == 0)
            )
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

    @asynccontextmanager
    async def readers_in(self) -> AsyncIterator[None]:
        """For the holder of ``write()``: readers may come in until this exits, which then waits for
        them to leave, so what follows has the lock alone again. Only for work readers cannot see."""
        async with self._condition:
            if not self._writing:
                raise RuntimeError("readers_in() is for the holder of write()")
            self._readers_in = True
            self._condition.notify_all()
        try:
            yield
        finally:
            async with self._condition:
                self._readers_in = False
                await self._condition.wait_for(lambda: self._readers == 0)
