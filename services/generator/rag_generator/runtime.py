"""The generator assembled from its settings: the one place its parts are built.

``async with open_runtime(settings, llm_settings) as runtime`` loads the sentence embedder and the
answerability gate and wires the extractive answerer, the claim support check and (unless the mode is
extractive) the LLM claim writer. The app's lifespan, the eval harness and the benchmarks all open it,
so what they measure is what the service runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from langchain_openai import ChatOpenAI

from rag_common.embedders import Embedder
from rag_common.llm import build_chat_model, llm_admission, llm_readiness
from rag_common.llm_admission import LLMAdmission
from rag_common.messages import LanguagePolicy
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.answerability import DEFAULT_GATE_PATH, AnswerabilityGate
from rag_generator.claim_support import ClaimSupport
from rag_generator.claim_writer import ClaimWriter
from rag_generator.extractive_answerer import ExtractiveAnswerer
from rag_generator.settings import GeneratorSettings


@dataclass
class GeneratorRuntime:
    generator: AnswerGenerator
    embedder: Embedder
    gate: AnswerabilityGate | None
    llm_settings: LLMSettings
    #: The queue in front of the LLM (rag_common/llm_admission.py); None in extractive mode (no LLM).
    admission: LLMAdmission | None = None

    async def readiness(self) -> dict[str, str]:
        checks = {"embedder": "ok"}
        if self.generator.mode != "extractive":
            checks["llm"] = await llm_readiness(self.llm_settings)
        return checks


def build_answer_model(llm_settings: LLMSettings, settings: GeneratorSettings) -> ChatOpenAI:
    """The shared chat model with the generator's own token budget and sampling."""
    model = build_chat_model(llm_settings, max_tokens=settings.max_tokens)
    return model.model_copy(update={"frequency_penalty": settings.frequency_penalty})


def load_gate(settings: GeneratorSettings) -> AnswerabilityGate | None:
    if settings.gate_path.strip().lower() == "off":
        return None
    gate = AnswerabilityGate.from_json(settings.gate_path or DEFAULT_GATE_PATH)
    if settings.answerability_threshold is not None:
        gate = gate.with_threshold(settings.answerability_threshold)
    return gate


def build_embedder(settings: GeneratorSettings) -> Embedder:
    # Imported here: importing the app (and its schemas) must not load a model runtime.
    from rag_common.embedders.factory import build_embedder as build_configured_embedder

    # EMBEDDER_BACKEND: onnx by default (no torch imported at all), torch on request or a GPU device.
    return build_configured_embedder(settings.embedding_model, device=settings.device)


def build_answer_generator(
    settings: GeneratorSettings,
    llm_settings: LLMSettings,
    embedder: Embedder,
    gate: AnswerabilityGate | None,
    admission: LLMAdmission | None = None,
    language: LanguagePolicy | None = None,
) -> AnswerGenerator:
    """``language`` defaults to the ``RAG_LANGUAGES`` / ``RAG_DEFAULT_LANGUAGE`` environment's."""
    writer = None
    if settings.mode != "extractive":
        writer = ClaimWriter(
            build_answer_model(llm_settings, settings),
            max_claims=settings.max_claims,
            claim_max_chars=settings.claim_max_chars,
            llm_timeout_s=settings.llm_timeout_s,
            admission=admission,
        )
    return AnswerGenerator(
        mode=settings.mode,
        extractive=ExtractiveAnswerer.of(settings, embedder),
        support=ClaimSupport.of(settings, embedder),
        writer=writer,
        gate=gate,
        max_passages=settings.max_passages,
        max_passage_chars=settings.max_passage_chars,
        language=language or LanguagePolicy.of(),
    )


@asynccontextmanager
async def open_runtime(
    settings: GeneratorSettings | None = None,
    llm_settings: LLMSettings | None = None,
    *,
    embedder: Embedder | None = None,
) -> AsyncIterator[GeneratorRuntime]:
    """Settings default to the ``GENERATOR_*`` and ``LLM_*`` environment; ``embedder`` shares an
    already loaded model (tests, evaluation)."""
    settings = settings or GeneratorSettings()
    llm_settings = llm_settings or LLMSettings()
    model = embedder or build_embedder(settings)
    await asyncio.to_thread(model.warm_up)
    gate = load_gate(settings)
    admission = llm_admission("generator", llm_settings) if settings.mode != "extractive" else None
    generator = build_answer_generator(settings, llm_settings, model, gate, admission)
    # Read at start, not on the first question: a broken scorer file stops the service with its
    # reason, and the answer-kind tables (CLDR names, cities: about 2-3 s) are built before traffic.
    await asyncio.to_thread(generator.warm_up)
    yield GeneratorRuntime(generator, model, gate, llm_settings, admission)
