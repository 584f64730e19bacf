"""The generator assembled from its settings: the one place its parts are built.

``async with open_runtime(settings, llm_settings) as runtime`` is used by the app's lifespan, the
eval harness and the benchmarks alike, so what they measure is what the service runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from langchain_openai import ChatOpenAI

from rag_common.llm import build_chat_model, llm_readiness
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.settings import GeneratorSettings


@dataclass
class GeneratorRuntime:
    generator: AnswerGenerator
    llm_settings: LLMSettings

    async def readiness(self) -> dict[str, str]:
        return {"llm": await llm_readiness(self.llm_settings)}


def build_answer_model(llm_settings: LLMSettings, settings: GeneratorSettings) -> ChatOpenAI:
    """The shared chat model with the generator's own token budget and sampling."""
    model = build_chat_model(llm_settings, max_tokens=settings.max_tokens)
    return model.model_copy(update={"frequency_penalty": settings.frequency_penalty})


def build_answer_generator(settings: GeneratorSettings, llm_settings: LLMSettings) -> AnswerGenerator:
    return AnswerGenerator(
        build_answer_model(llm_settings, settings),
        max_passages=settings.max_passages,
        max_passage_chars=settings.max_passage_chars,
        answer_max_chars=settings.answer_max_chars,
        max_citations=settings.max_citations,
        llm_timeout_s=settings.llm_timeout_s,
        quote_match_threshold=settings.quote_match_threshold,
    )


@asynccontextmanager
async def open_runtime(
    settings: GeneratorSettings | None = None, llm_settings: LLMSettings | None = None
) -> AsyncIterator[GeneratorRuntime]:
    """Settings default to the ``GENERATOR_*`` and ``LLM_*`` environment."""
    settings = settings or GeneratorSettings()
    llm_settings = llm_settings or LLMSettings()
    yield GeneratorRuntime(build_answer_generator(settings, llm_settings), llm_settings)
