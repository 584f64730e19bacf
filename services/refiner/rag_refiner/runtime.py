"""The refiner assembled from its settings: the one place its parts are built.

``async with open_runtime(settings, llm_settings) as runtime`` is used by the app's lifespan, the
eval harness and the benchmarks alike.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from langchain_core.language_models import BaseChatModel

from rag_common.llm import build_chat_model, llm_admission, llm_readiness
from rag_common.llm_admission import LLMAdmission
from rag_common.settings import LLMSettings
from rag_refiner.query_refiner import QueryRefiner
from rag_refiner.rewrite_prompt import REWRITE_MAX_TOKENS
from rag_refiner.settings import RefinerSettings


@dataclass
class RefinerRuntime:
    refiner: QueryRefiner
    llm_settings: LLMSettings

    async def readiness(self) -> dict[str, str]:
        return {"llm": await llm_readiness(self.llm_settings)}


def build_query_refiner(
    settings: RefinerSettings, chat_model: BaseChatModel, admission: LLMAdmission | None = None
) -> QueryRefiner:
    """Fits the intent classifier on the shipped examples (well under a second). ``admission`` is the
    one queue every model call of the process waits in (rag_common/llm_admission.py)."""
    return QueryRefiner.of(settings, chat_model, admission=admission)


@asynccontextmanager
async def open_runtime(
    settings: RefinerSettings | None = None, llm_settings: LLMSettings | None = None
) -> AsyncIterator[RefinerRuntime]:
    """Settings default to the ``REFINER_*`` and ``LLM_*`` environment."""
    settings = settings or RefinerSettings()
    llm_settings = llm_settings or LLMSettings()
    chat_model = build_chat_model(llm_settings, max_tokens=REWRITE_MAX_TOKENS)
    admission = llm_admission("refiner", llm_settings)
    yield RefinerRuntime(build_query_refiner(settings, chat_model, admission), llm_settings)
