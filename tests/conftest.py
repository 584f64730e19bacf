"""Session fixtures that start real infrastructure: a redis-server and a llama.cpp LLM server.

Nothing here is mocked: the same launcher code as ``make run`` (``ragctl.stack``) starts them.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from rag_common.settings import LLMSettings
from ragctl.stack import free_port, start_llm_server, start_redis

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO_ROOT = Path(__file__).resolve().parents[1]
DATASETS_DIR = Path(os.environ.get("RAG_DATASETS_DIR", REPO_ROOT.parent / "shared" / "datasets"))


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root = tmp_path_factory.mktemp("redis")
    proc = start_redis(free_port(), root / "data", root, persist=False)
    yield proc.url
    proc.stop()


@pytest.fixture(scope="session")
def llm_base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An OpenAI-compatible endpoint serving SmolLM2-135M through llama.cpp."""
    root = tmp_path_factory.mktemp("llm")
    proc = start_llm_server(free_port(), root)
    yield proc.url
    proc.stop()


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on: connecting is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def black_hole_port() -> Iterator[int]:
    """A listener that accepts connections and never answers: a hung service."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept_forever() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(conn)
            except OSError:
                continue

    thread = threading.Thread(target=accept_forever, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=2)
    for conn in accepted:
        conn.close()
    server.close()


@pytest.fixture
def dead_llm_settings(closed_port: int) -> LLMSettings:
    """An LLM endpoint nothing listens on: every call is refused at once."""
    return LLMSettings(base_url=f"http://127.0.0.1:{closed_port}/v1", timeout_s=5.0, max_retries=0)


@pytest.fixture
def hung_llm_settings(black_hole_port: int) -> LLMSettings:
    """An LLM endpoint that accepts connections and never answers."""
    return LLMSettings(base_url=f"http://127.0.0.1:{black_hole_port}/v1", timeout_s=30.0, max_retries=0)
