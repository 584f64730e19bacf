from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from pydantic import ValidationError

from rag_common.embedders import ModelNotAvailableError
from rag_reranker.scorer_factory import build_scorer
from rag_reranker.scorers.bi_encoder import BiEncoderScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.settings import RerankerSettings
from rag_reranker.torch_runtime import resolve_device


def test_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("RERANKER_"):
            monkeypatch.delenv(name)
    settings = RerankerSettings()
    assert settings.port == 8003
    assert settings.embedding_model == "all-MiniLM-L6-v2"
    assert settings.cross_encoder_model == ""
    assert settings.cross_encoder_max_length == 512
    assert settings.cross_encoder_sigmoid is True
    assert settings.batch_size == 32
    assert settings.device is None
    assert settings.torch_threads == 0


def test_every_setting_documents_its_default() -> None:
    for name, field in RerankerSettings.model_fields.items():
        assert field.description and "Default" in field.description, name


def test_reads_reranker_prefixed_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANKER_PORT", "18103")
    monkeypatch.setenv("RERANKER_CROSS_ENCODER_MODEL", "/models/bge-reranker-v2-m3")
    monkeypatch.setenv("RERANKER_CROSS_ENCODER_SIGMOID", "false")
    monkeypatch.setenv("RERANKER_TORCH_THREADS", "2")
    settings = RerankerSettings()
    assert (settings.port, settings.cross_encoder_model) == (18103, "/models/bge-reranker-v2-m3")
    assert settings.cross_encoder_sigmoid is False and settings.torch_threads == 2


@pytest.mark.parametrize("field", ["cross_encoder_max_length", "batch_size"])
def test_rejects_non_positive_sizes(field: str) -> None:
    with pytest.raises(ValidationError):
        RerankerSettings(**{field: 0})


def test_device_auto_resolves_to_a_real_device() -> None:
    import torch

    assert resolve_device(None) == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"


def test_without_cross_encoder_the_bi_encoder_is_used_and_said_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rag_reranker"):
        scorer = build_scorer(RerankerSettings(cross_encoder_model=""))
    assert isinstance(scorer, BiEncoderScorer)
    notices = [r for r in caplog.records if "no cross-encoder configured" in r.getMessage()]
    assert len(notices) == 1


def test_configured_cross_encoder_is_used(tiny_cross_encoder_dir: Path) -> None:
    scorer = build_scorer(RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), cross_encoder_max_length=64))
    assert isinstance(scorer, CrossEncoderScorer)
    assert scorer.path == tiny_cross_encoder_dir.resolve()


def test_missing_cross_encoder_names_path_and_setting(tmp_path: Path) -> None:
    missing = str(tmp_path / "bge-reranker-v2-m3")
    with pytest.raises(ModelNotAvailableError) as excinfo:
        build_scorer(RerankerSettings(cross_encoder_model=missing))
    message = str(excinfo.value)
    assert missing in message and "RERANKER_CROSS_ENCODER_MODEL" in message
