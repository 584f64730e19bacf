from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from langchain_openai import ChatOpenAI

from rag_common.llm import build_chat_model
from rag_common.settings import LLMSettings
from rag_refiner.rewrite_prompt import REWRITE_MAX_TOKENS


@pytest.fixture(scope="session")
def llm_settings(llm_base_url: str) -> LLMSettings:
    return LLMSettings(base_url=llm_base_url, timeout_s=30.0)


@pytest.fixture(scope="session")
def chat_model(llm_settings: LLMSettings) -> ChatOpenAI:
    return build_chat_model(llm_settings, max_tokens=REWRITE_MAX_TOKENS)


@pytest.fixture
def dead_llm_settings() -> LLMSettings:
    """An endpoint on a port nothing listens on: every call is refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", timeout_s=5.0, max_retries=0)


@pytest.fixture
def hung_llm_settings() -> Iterator[LLMSettings]:
    """An endpoint that accepts connections (kernel backlog) and never answers: a hung LLM."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        port = server.getsockname()[1]
        yield LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", timeout_s=30.0, max_retries=0)
