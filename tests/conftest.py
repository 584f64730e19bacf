"""Session fixtures that start real infrastructure: a redis-server and a llama.cpp LLM server.

Nothing here is mocked: the same launcher code as ``make run`` (``ragctl.stack``) starts them.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

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
