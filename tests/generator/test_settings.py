"""GeneratorSettings: defaults, the GENERATOR_ environment, and the bounds that keep the schema sane."""

from __future__ import annotations

import os

import pytest
from pydantic import ValidationError

from rag_generator.claim_reply import HARD_MAX_CLAIM_CHARS, HARD_MAX_CLAIMS
from rag_generator.claim_support import DEFAULT_LEXICAL_WEIGHT, DEFAULT_SUPPORT_THRESHOLD
from rag_generator.settings import GeneratorSettings


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("GENERATOR_"):
            monkeypatch.delenv(name)


def test_defaults() -> None:
    settings = GeneratorSettings()
    assert (settings.mode, settings.embedding_model, settings.gate_path) == ("extractive", "all-MiniLM-L6-v2", "")
    assert (settings.max_passages, settings.max_passage_chars, settings.max_claims, settings.claim_max_chars) == (6, 1200, 3, 300)
    assert (settings.support_lexical_weight, settings.support_threshold) == (DEFAULT_LEXICAL_WEIGHT, DEFAULT_SUPPORT_THRESHOLD)
    assert (settings.llm_timeout_s, settings.max_tokens, settings.port) == (60.0, 400, 8004)


def test_the_environment_is_read_with_the_generator_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GENERATOR_MODE", "auto")
    monkeypatch.setenv("GENERATOR_LLM_TIMEOUT_S", "5")
    monkeypatch.setenv("GENERATOR_GATE_PATH", "off")
    monkeypatch.setenv("MODE", "generative")  # unprefixed: not ours
    settings = GeneratorSettings()
    assert (settings.mode, settings.llm_timeout_s, settings.gate_path) == ("auto", 5.0, "off")


@pytest.mark.parametrize(
    "bad",
    [
        {"mode": "fast"},
        {"max_claims": 0},
        {"max_claims": HARD_MAX_CLAIMS + 1},
        {"claim_max_chars": HARD_MAX_CLAIM_CHARS + 1},
        {"claim_max_chars": 0},
        {"llm_timeout_s": 0},
        {"support_threshold": 1.5},
        {"support_lexical_weight": -0.1},
        {"max_passages": 0},
    ],
)
def test_out_of_bounds_values_are_rejected(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        GeneratorSettings(**bad)


def test_the_ceilings_themselves_are_allowed() -> None:
    settings = GeneratorSettings(max_claims=HARD_MAX_CLAIMS, claim_max_chars=HARD_MAX_CLAIM_CHARS)
    assert (settings.max_claims, settings.claim_max_chars) == (HARD_MAX_CLAIMS, HARD_MAX_CLAIM_CHARS)
