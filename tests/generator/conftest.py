"""Shared fixtures of the generator tests: the passages, the real embedder, the real gate, the real
SmolLM2 endpoint, and ``ScriptedChatOpenAI`` for the paths the real (grammar-constrained) model never
takes on its own."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_openai import ChatOpenAI
from pydantic import Field

from rag_common.embedders.base import Embedder
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.messages import LanguagePolicy
from rag_common.schemas import GenerateResponse, Passage
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator, GeneratorMode
from rag_generator.answerability import DEFAULT_GATE_PATH, AnswerabilityGate
from rag_generator.claim_schema import build_claim_schema
from rag_generator.claim_support import ClaimSupport
from rag_generator.claim_writer import ClaimWriter
from rag_generator.extractive_answerer import ExtractiveAnswerer
from rag_generator.settings import GeneratorSettings

FOUNDER_QUESTION = "Who founded Zorblax Aerospace?"
OFF_TOPIC_QUESTION = "What is the capital of Peru?"
#: Sentence ``1.2``: the one that answers FOUNDER_QUESTION.
FOUNDER_SENTENCE = "The company was founded in 1987 by the engineer Ingrid Halvorsen."
#: Sentence ``1.1``.
HEADQUARTERS_SENTENCE = "Zorblax Aerospace is a maker of small satellite launchers headquartered in Tromsø, Norway."

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
    return [passage.model_copy(deep=True) for passage in PASSAGES]


@pytest.fixture(scope="session")
def llm_settings(llm_base_url: str) -> LLMSettings:
    return LLMSettings(base_url=llm_base_url, timeout_s=180.0, max_retries=0)


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    """The real all-MiniLM-L6-v2, loaded once for the whole session."""
    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


@dataclass
class CountingEmbedder:
    """Delegates to the real embedder and records every batch it is given: (kind, texts)."""

    inner: SentenceTransformerEmbedder
    calls: list[tuple[str, list[str]]] = field(default_factory=list)

    @property
    def batch_sizes(self) -> list[tuple[str, int]]:
        return [(kind, len(texts)) for kind, texts in self.calls]

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def max_seq_length(self) -> int:
        return self.inner.max_seq_length

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    def warm_up(self) -> None:
        self.inner.warm_up()

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("queries", list(texts)))
        return self.inner.encode_queries(texts)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.calls.append(("documents", list(texts)))
        return self.inner.encode_documents(texts)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


@pytest.fixture
def counting_embedder(embedder: SentenceTransformerEmbedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


@pytest.fixture(scope="session")
def gate() -> AnswerabilityGate:
    """The gate shipped in rag_generator/data."""
    return AnswerabilityGate.from_json(DEFAULT_GATE_PATH)


class ScriptedChatOpenAI(ChatOpenAI):
    """The real ChatOpenAI client against the test endpoint, recording every call it makes.

    ``scripted`` replies are used in order instead of calling the endpoint: the only way to force
    output the grammar-constrained server never produces (invalid JSON, an unsupported claim, a
    cut-off reply). A ``None`` entry, and every call once the script is used up, goes to the real
    endpoint. ``methods`` records the structured-output method each call asked for.
    """

    scripted: list[AIMessage | None] = Field(default_factory=list)
    calls: list[list[BaseMessage]] = Field(default_factory=list)
    methods: list[str] = Field(default_factory=list)
    request_kwargs: list[dict[str, Any]] = Field(default_factory=list)

    async def _agenerate(
        self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls.append(list(messages))
        self.request_kwargs.append(dict(kwargs))
        self.methods.append(
            "json_schema" if "response_format" in kwargs else "function_calling" if "tools" in kwargs else "plain"
        )
        reply = self.scripted.pop(0) if self.scripted else None
        if reply is not None:
            return ChatResult(generations=[ChatGeneration(message=reply)])
        return await super()._agenerate(messages, stop=stop, run_manager=run_manager, **kwargs)


@pytest.fixture
def scripted_model(llm_settings: LLMSettings) -> Callable[..., ScriptedChatOpenAI]:
    """``scripted_model(*replies)``: the generator's chat model (same settings as the app's) with scripted first replies."""
    settings = GeneratorSettings()

    def build(*replies: AIMessage | None, max_tokens: int | None = None) -> ScriptedChatOpenAI:
        return ScriptedChatOpenAI(
            base_url=llm_settings.base_url,
            model=llm_settings.model,
            api_key=llm_settings.api_key,
            temperature=llm_settings.temperature,
            max_tokens=max_tokens or settings.max_tokens,
            frequency_penalty=settings.frequency_penalty,
            timeout=llm_settings.timeout_s,
            max_retries=0,
            scripted=list(replies),
        )

    return build


def claims_reply(*claims: tuple[str, Sequence[str]], **metadata: Any) -> AIMessage:
    """A json_schema reply: ``claims_reply(("text", ["1.2"]), ...)``."""
    body = {"claims": [{"text": text, "evidence": list(ids)} for text, ids in claims]}
    return AIMessage(json.dumps(body, ensure_ascii=False), response_metadata=metadata)


def generator_with(
    mode: GeneratorMode,
    embedder: Embedder,
    gate: AnswerabilityGate | None,
    model: ChatOpenAI | None = None,
    language: LanguagePolicy | None = None,
    **overrides: Any,
) -> AnswerGenerator:
    """The generator wired as ``runtime.build_answer_generator`` wires it, around ``model``."""
    settings = GeneratorSettings(mode=mode, **overrides)
    writer = None
    if model is not None:
        writer = ClaimWriter(
            model,
            max_claims=settings.max_claims,
            claim_max_chars=settings.claim_max_chars,
            llm_timeout_s=settings.llm_timeout_s,
        )
    return AnswerGenerator(
        mode=mode,
        extractive=ExtractiveAnswerer.of(settings, embedder),
        support=ClaimSupport.of(settings, embedder),
        writer=writer,
        gate=gate,
        max_passages=settings.max_passages,
        max_passage_chars=settings.max_passage_chars,
        language=language or LanguagePolicy.of(),
    )


def assert_citations_are_source_spans(response: GenerateResponse, passages: Sequence[Passage]) -> None:
    """Every citation is one sentence of a given passage, with exact offsets, and the answer's
    ``[n]`` markers are exactly the citations' ids."""
    by_chunk = {passage.chunk_id: passage for passage in passages}
    assert [c.id for c in response.citations] == list(range(1, len(response.citations) + 1))
    for citation in response.citations:
        passage = by_chunk[citation.chunk_id]
        assert citation.start is not None and citation.end is not None
        assert citation.quote and passage.text[citation.start : citation.end] == citation.quote
        assert (citation.source, citation.title, citation.page, citation.score, citation.section_path) == (
            passage.source, passage.title, passage.page, passage.score, passage.section_path,
        )
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", response.answer)}
    assert markers == {c.id for c in response.citations}


def unresolvable_claim_schema(*args: Any, **kwargs: Any) -> dict[str, Any]:
    """The claims schema with a ``$ref`` llama.cpp cannot resolve: the real server then refuses the
    ``json_schema`` response format with HTTP 400 "JSON schema error", as an endpoint without
    structured-output support does (it ignores ``tools``, so function calling still gets a reply)."""
    schema = build_claim_schema(*args, **kwargs)
    schema["schema"]["properties"]["claims"]["items"]["properties"]["text"] = {"$ref": "#/$defs/missing"}
    return schema


def passage(n: int, text: str, *, title: str = "", score: float = 0.0, **extra: object) -> Passage:
    return Passage(chunk_id=f"c{n}", doc_id=f"d{n}", text=text, title=title or f"Doc {n}", score=score, **extra)
