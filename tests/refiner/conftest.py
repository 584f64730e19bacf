from __future__ import annotations

import pytest
from langchain_openai import ChatOpenAI

from rag_common.llm import build_chat_model
from rag_common.settings import LLMSettings
from rag_refiner.rewrite_prompt import REWRITE_MAX_TOKENS


@pytest.fixture(scope="session")
def llm_settings(llm_base_url: str) -> LLMSettings:
    return LLMSettings(base_url=llm_base_url, timeout_s=180.0)


@pytest.fixture(scope="session")
def chat_model(llm_settings: LLMSettings) -> ChatOpenAI:
    return build_chat_model(llm_settings, max_tokens=REWRITE_MAX_TOKENS)
