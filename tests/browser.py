"""Debian's Chromium driven by Playwright, for the web UI's browser tests. Playwright's own browser
download cannot work on these machines; `make test` installs the `chromium` package when it is
missing (scripts/ensure_chromium.sh)."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("RAG_CHROMIUM", "/usr/bin/chromium")
#: Headless, with nothing that reaches out of the machine (its network is closed).
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@asynccontextmanager
async def launched_chromium() -> AsyncIterator[object]:
    """A Playwright ``Browser`` on Debian's Chromium; the test fails, naming what to install, without it."""
    playwright_api = pytest.importorskip("playwright.async_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; make test does)")
    async with playwright_api.async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


def final_chat_event(body: str) -> dict:
    """The ``final`` event's data in the whole body of a chat stream (``POST /v1/chat/stream``) the page
    received, as Playwright's ``Response.text()`` gives it once the stream ended."""
    for block in body.replace("\r\n", "\n").split("\n\n"):
        lines = block.split("\n")
        if "event: final" in lines:
            return json.loads("\n".join(line.removeprefix("data: ") for line in lines if line.startswith("data: ")))
    raise AssertionError(f"no final event in the chat stream {body!r}")
