from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import Field

from rag_common.schemas import Passage
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.runtime import build_answer_generator
from rag_generator.settings import GeneratorSettings

PASSAGES = [
    Passage(
        chunk_id="zorblax#0",
        doc_id="zorblax",
        title="Zorblax Aerospace",
        source="handbook/zorblax.md",
        section_path=["Company", "History"],
        score=0.91,
        text="Zorblax Aerospace is a maker of small satellite launchers headquartered in Tromsø, Norway. "
        "The company was founded in 1987 by the engineer Ingrid Halvorsen. "
        "Its best-known rocket, the Fjord-2, first flew in 2004.",
    ),
    Passage(
        chunk_id="quillfeather#0",
        doc_id="quillfeather",
        title="Quillfeather Library",
        source="handbook/quillfeather.md",
        page=3,
        score=0.55,
        text="The Quillfeather Library is a public library in Dunedin that specialises in maritime maps. "
        "It opened in 1923 and holds 40,000 charts.",
    ),
    Passage(
        chunk_id="basil#0",
        doc_id="basil",
        title="Growing basil",
        source="garden/basil.md",
        score=0.32,
        text="Basil needs six hours of sun a day and soil kept moist but not wet. "
        "Pinch the flowers off to keep the leaves tender.",
    ),
]


@pytest.fixture
def passages() -> list[Passage]:
    return [passage.model_copy() for passage in PASSAGES]


@pytest.fixture(scope="session")
def llm_settings(llm_base_url: str) -> LLMSettings:
    return LLMSettings(base_url=llm_base_url, timeout_s=180.0)


@pytest.fixture(scope="session")
def generator(llm_settings: LLMSettings) -> AnswerGenerator:
    return build_answer_generator(GeneratorSettings(), llm_settings)


class ScriptedChatOpenAI(ChatOpenAI):
    """The real ChatOpenAI client against the test endpoint, recording every call it makes.

    ``scripted`` replies, if any, are returned (in order) instead of calling the endpoint: the only
    way to force output the grammar-constrained server never produces (invalid JSON, a cut-off
    reply). Once they are used up, calls go to the real model.
    """

    scripted: list[AIMessage] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        if self.scripted:
            return ChatResult(generations=[ChatGeneration(message=self.scripted.pop(0))])
        return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)

    async def _astream(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        self.calls.append(list(messages))
        if self.scripted:
            message = self.scripted.pop(0)
            text = str(message.content)
            for start in range(0, len(text), 4):
                yield ChatGenerationChunk(message=AIMessageChunk(content=text[start : start + 4]))
            yield ChatGenerationChunk(message=AIMessageChunk(content="", response_metadata=message.response_metadata))
            return
        async for chunk in super()._astream(messages, stop=stop, run_manager=run_manager, **kwargs):
            yield chunk


@pytest.fixture
def scripted_model(llm_settings: LLMSettings) -> Callable[..., ScriptedChatOpenAI]:
    """``scripted_model(*replies)``: the generator's chat model (same settings as the app's) with scripted first replies."""
    settings = GeneratorSettings()

    def build(*replies: AIMessage) -> ScriptedChatOpenAI:
        return ScriptedChatOpenAI(
            base_url=llm_settings.base_url,
            model=llm_settings.model,
            api_key=llm_settings.api_key,
            temperature=llm_settings.temperature,
            max_tokens=settings.max_tokens,
            frequency_penalty=settings.frequency_penalty,
            timeout=llm_settings.timeout_s,
            max_retries=0,
            scripted=list(replies),
        )

    return build
