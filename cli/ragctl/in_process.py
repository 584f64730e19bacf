"""Run an ASGI app inside the current process: over real HTTP on a loopback port, or through
httpx's ASGI transport on the caller's event loop. Used by the test suite and benchmarks."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import httpx
import uvicorn

from ragctl.stack import free_port


@contextmanager
def serve_in_thread(app: Any, *, start_timeout_s: float = 60.0) -> Iterator[str]:
    """Serve ``app`` with uvicorn in a daemon thread; yields its base URL, stops it on exit."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout_s
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the app did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@asynccontextmanager
async def asgi_client(app: Any, base_url: str) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client bound to ``app`` with its lifespan run, on the caller's event loop.

    Unlike TestClient (its own loop), this keeps clients cached per event loop by the app (such as
    langchain-openai's) on one loop.
    """
    async with app.router.lifespan_context(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url) as client:
            yield client
