"""runtime.py: the generator assembled from its settings (model, gate, writer) and its readiness."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import GenerateRequest, Passage
from rag_common.settings import LLMSettings
from rag_generator.answerability import DEFAULT_GATE_PATH
from rag_generator.runtime import build_answer_generator, build_answer_model, load_gate, open_runtime
from rag_generator.settings import GeneratorSettings

from .conftest import FOUNDER_QUESTION, OFF_TOPIC_QUESTION


def shipped_gate_params() -> dict:
    return json.loads(DEFAULT_GATE_PATH.read_text(encoding="utf-8"))


def write_gate(tmp_path: Path, **changes: object) -> str:
    path = tmp_path / "gate.json"
    path.write_text(json.dumps({**shipped_gate_params(), **changes}), encoding="utf-8")
    return str(path)


def test_the_default_gate_is_the_shipped_file() -> None:
    gate = load_gate(GeneratorSettings(gate_path=""))
    assert gate is not None
    assert gate.threshold == shipped_gate_params()["threshold"]
    assert gate.params["fitted_on"]["embedder"] == GeneratorSettings().embedding_model


@pytest.mark.parametrize("value", ["off", "OFF", " Off "])
def test_off_means_no_gate(value: str) -> None:
    assert load_gate(GeneratorSettings(gate_path=value)) is None


def test_a_gate_file_is_loaded_from_its_path(tmp_path: Path) -> None:
    gate = load_gate(GeneratorSettings(gate_path=write_gate(tmp_path, threshold=0.25)))
    assert gate is not None and gate.threshold == 0.25


def test_a_broken_gate_file_fails_at_startup_naming_the_file(tmp_path: Path) -> None:
    path = write_gate(tmp_path, features=["best_sentence_score"])
    with pytest.raises(ValueError, match="gate.json: feature names do not match"):
        load_gate(GeneratorSettings(gate_path=path))
    missing = tmp_path / "missing.json"
    with pytest.raises(FileNotFoundError):
        load_gate(GeneratorSettings(gate_path=str(missing)))


def test_the_answer_model_has_the_generators_budget_and_the_llm_settings() -> None:
    llm = LLMSettings(base_url="http://llm.example/v1", model="m1", api_key="k", timeout_s=7.0, max_retries=2,
                      temperature=0.1, max_tokens=999)
    model = build_answer_model(llm, GeneratorSettings(max_tokens=123, frequency_penalty=0.7))
    assert (model.max_tokens, model.frequency_penalty, model.temperature) == (123, 0.7, 0.1)
    assert (model.model_name, model.request_timeout, model.max_retries) == ("m1", 7.0, 2)
    assert str(model.openai_api_base).rstrip("/") == "http://llm.example/v1"


@pytest.mark.parametrize("mode", ["extractive", "generative", "auto"])
def test_build_answer_generator_takes_the_mode_from_the_settings(
    embedder: SentenceTransformerEmbedder, dead_llm_settings: LLMSettings, mode: str
) -> None:
    settings = GeneratorSettings(mode=mode)
    generator = build_answer_generator(settings, dead_llm_settings, embedder, load_gate(settings))
    assert generator.mode == mode


async def test_the_settings_reach_the_answer(
    embedder: SentenceTransformerEmbedder, dead_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    basil = GenerateRequest(query="How much sun does basil need?", passages=passages)
    wide = build_answer_generator(GeneratorSettings(mode="extractive", gate_path="off"), dead_llm_settings, embedder, None)
    narrow = build_answer_generator(
        GeneratorSettings(mode="extractive", max_passages=1), dead_llm_settings, embedder, None
    )
    assert {c.chunk_id for c in (await wide.generate(basil)).citations} == {"basil#0"}
    assert {c.chunk_id for c in (await narrow.generate(basil)).citations} == {"zorblax#0"}


async def test_a_gate_file_decides_abstention_end_to_end(
    tmp_path: Path, embedder: SentenceTransformerEmbedder, dead_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    off_topic = GenerateRequest(query=OFF_TOPIC_QUESTION, passages=passages)
    founder = GenerateRequest(query=FOUNDER_QUESTION, passages=passages)
    lenient = GeneratorSettings(mode="extractive", gate_path=write_gate(tmp_path, threshold=0.0))
    async with open_runtime(lenient, dead_llm_settings, embedder=embedder) as runtime:
        answered = await runtime.generator.generate(off_topic)
    assert not answered.abstained and answered.answerability is not None

    strict = GeneratorSettings(mode="extractive", gate_path=write_gate(tmp_path, threshold=1.0))
    async with open_runtime(strict, dead_llm_settings, embedder=embedder) as runtime:
        refused = await runtime.generator.generate(founder)
    assert refused.abstain_reason == "not_answerable"

    async with open_runtime(GeneratorSettings(mode="extractive", gate_path="off"), dead_llm_settings, embedder=embedder) as runtime:
        ungated = await runtime.generator.generate(off_topic)
        assert runtime.gate is None
    assert not ungated.abstained and ungated.answerability is None


async def test_readiness_checks_the_llm_only_when_the_mode_uses_it(
    embedder: SentenceTransformerEmbedder, llm_settings: LLMSettings, dead_llm_settings: LLMSettings
) -> None:
    async with open_runtime(GeneratorSettings(mode="extractive"), dead_llm_settings, embedder=embedder) as runtime:
        assert runtime.embedder is embedder and runtime.gate is not None
        assert await runtime.readiness() == {"embedder": "ok"}
    for mode in ("generative", "auto"):
        async with open_runtime(GeneratorSettings(mode=mode), llm_settings, embedder=embedder) as runtime:
            assert await runtime.readiness() == {"embedder": "ok", "llm": "ok"}
        async with open_runtime(GeneratorSettings(mode=mode), dead_llm_settings, embedder=embedder) as runtime:
            checks = await runtime.readiness()
            assert checks["embedder"] == "ok" and checks["llm"].startswith(f"llm unreachable at {dead_llm_settings.base_url}")
