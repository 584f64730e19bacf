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


async def test_a_writer_lets_readers_in_for_what_they_cannot_see_then_has_the_lock_alone():
    lock, events = ReadWriteLock(), []
    prepared, read_during, committing = asyncio.Event(), asyncio.Event(), asyncio.Event()

    async def writer() -> None:
        async with lock.write():
            async with lock.readers_in():
                events.append("preparing")
                prepared.set()
                await read_during.wait()  # a reader got in while the writer prepares
            events.append("committing")  # readers_in waited for that reader to leave
            committing.set()
            await asyncio.sleep(0.01)
            events.append("committed")

    async def reader_during() -> None:
        await prepared.wait()
        async with lock.read():
            events.append("read during")
            read_during.set()
            await asyncio.sleep(0.01)
            events.append("read during done")

    async def reader_after() -> None:
        await committing.wait()  # the writer has the lock alone again: this reader waits for it
        async with lock.read():
            events.append("read after")

    async with asyncio.timeout(5):
        await asyncio.gather(writer(), reader_during(), reader_after())
    assert events.index("read during") > events.index("preparing")
    assert events.index("committing") > events.index("read during done")
    assert events.index("read after") > events.index("committed")


async def test_readers_in_is_for_the_writer_only():
    lock = ReadWriteLock()
    try:
        async with lock.readers_in():
            raise AssertionError("entered without holding write()")
    except RuntimeError:
        pass
