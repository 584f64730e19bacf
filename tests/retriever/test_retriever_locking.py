"""The readers-writer lock that keeps a document replacement invisible until it is complete."""

from __future__ import annotations

import asyncio

from rag_retriever.locking import ReadWriteLock


async def test_readers_share_and_a_writer_waits_for_them():
    lock, events = ReadWriteLock(), []

    async def reader(name: str, hold: float) -> None:
        async with lock.read():
            events.append(f"{name} in")
            await asyncio.sleep(hold)
            events.append(f"{name} out")

    async def writer() -> None:
        await asyncio.sleep(0.01)
        async with lock.write():
            events.append("writer in")
            await asyncio.sleep(0.02)
            events.append("writer out")

    async def late_reader() -> None:
        await asyncio.sleep(0.02)  # arrives while the writer waits: must not overtake it
        await reader("late", 0)

    await asyncio.gather(reader("a", 0.05), reader("b", 0.05), writer(), late_reader())
    assert events[:2] == ["a in", "b in"]
    assert events.index("writer in") > max(events.index("a out"), events.index("b out"))
    assert events.index("late in") > events.index("writer out")


async def test_a_cancelled_writer_does_not_block_readers():
    lock = ReadWriteLock()
    async with lock.read():
        waiting = asyncio.create_task(lock.write().__aenter__())
        await asyncio.sleep(0.01)
        waiting.cancel()
        await asyncio.gather(waiting, return_exceptions=True)
    async with asyncio.timeout(1):
        async with lock.read():
            pass
