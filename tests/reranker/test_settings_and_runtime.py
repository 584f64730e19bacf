"""RerankerSettings (env, defaults, validation) and build_runtime (settings → stages, batcher, embedder)."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from rag_common.embedders import ModelNotAvailableError
from rag_common.schemas import CrossEncoderSpec, GmmrSpec
from rag_common.schemas import Passage
from rag_common.settings import LLMSettings
from rag_reranker.batching import MicroBatcher, UnbatchedScorer
from rag_reranker.runtime import build_pair_queue, build_runtime
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.settings import RerankerSettings
from rag_reranker.stages.adaptive_lambda import AdaptiveLambdaSelector
from rag_reranker.stages.base import CandidateSet, StageSkipped
from rag_reranker.stages.candidate_embeddings import CandidateEmbeddings
from rag_reranker.stages.cross_encoder_stage import NO_MODEL_REASON, CrossEncoderStage
from rag_reranker.stages.diffusion_stage import DiffusionStage
from rag_reranker.stages.gmmr_stage import GmmrStage
from rag_reranker.torch_runtime import resolve_device


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("RERANKER_"):
            monkeypatch.delenv(name)
    return monkeypatch


def test_defaults(clean_env: pytest.MonkeyPatch) -> None:
    settings = RerankerSettings()
    assert settings.port == 8003
    assert settings.default_chain == ["cross_encoder"]
    assert settings.embedding_model == "all-MiniLM-L6-v2"
    assert settings.cross_encoder_model == ""
    assert settings.cross_encoder_backend == "sentence_transformers"
    assert settings.cross_encoder_max_length == 512
    assert settings.cross_encoder_sigmoid is True
    assert settings.batch_size == 32
    assert settings.batch_max_pairs == 64
    assert settings.batch_max_wait_ms is None  # device-dependent, see test_batching_default_follows_the_device
    assert settings.device is None
    assert settings.torch_threads == 0
    assert settings.diffusion_alpha == 0.85
    assert settings.diffusion_top_k_edges is None
    assert settings.mmr_lambda == 0.9
    assert settings.mmr_relevance == "scores"
    assert settings.adaptive_lambdas == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert settings.evaluator_timeout_s == 60.0
    assert settings.evaluator_concurrency == 4


def test_every_setting_documents_its_default() -> None:
    for name, field in RerankerSettings.model_fields.items():
        assert field.description and "Default" in field.description, name


def test_reads_reranker_prefixed_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("RERANKER_PORT", "18103")
    clean_env.setenv("RERANKER_CROSS_ENCODER_MODEL", "/models/bge-reranker-v2-m3")
    clean_env.setenv("RERANKER_CROSS_ENCODER_SIGMOID", "false")
    clean_env.setenv("RERANKER_TORCH_THREADS", "2")
    clean_env.setenv("RERANKER_DEFAULT_CHAIN", "diffusion, gmmr")
    clean_env.setenv("RERANKER_BATCH_MAX_WAIT_MS", "0")
    clean_env.setenv("RERANKER_ADAPTIVE_LAMBDAS", "[0.9, 0.3, 0.3]")
    settings = RerankerSettings()
    assert (settings.port, settings.cross_encoder_model) == (18103, "/models/bge-reranker-v2-m3")
    assert settings.cross_encoder_sigmoid is False and settings.torch_threads == 2
    assert settings.default_chain == ["diffusion", "gmmr"]
    assert settings.batch_max_wait_ms == 0.0
    assert settings.adaptive_lambdas == [0.3, 0.9]


def test_single_stage_and_empty_chain_from_the_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("RERANKER_DEFAULT_CHAIN", "gmmr")
    assert RerankerSettings().default_chain == ["gmmr"]
    clean_env.setenv("RERANKER_DEFAULT_CHAIN", " ")
    assert RerankerSettings().default_chain == []


def test_unknown_stage_name_is_rejected(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValidationError, match="default_chain"):
        RerankerSettings(default_chain=["cross_encoder", "bi_encoder"])
    clean_env.setenv("RERANKER_DEFAULT_CHAIN", "diffusion,mmr")
    with pytest.raises(ValidationError, match="default_chain"):
        RerankerSettings()


@pytest.mark.parametrize(
    ("given", "expected"),
    [([0.5, 0.2, 0.5], [0.2, 0.5]), ([1.0], [1.0]), ([0.0, 1.0], [0.0, 1.0])],
)
def test_adaptive_lambdas_are_sorted_and_deduplicated(given: list[float], expected: list[float]) -> None:
    assert RerankerSettings(adaptive_lambdas=given).adaptive_lambdas == expected


@pytest.mark.parametrize("bad", [[], [0.5, 1.5], [-0.1], [0.2, 2.0]])
def test_adaptive_lambdas_must_be_a_non_empty_list_in_the_unit_interval(bad: list[float]) -> None:
    with pytest.raises(ValidationError, match="adaptive_lambdas"):
        RerankerSettings(adaptive_lambdas=bad)


@pytest.mark.parametrize(
    "field_value",
    [
        ("cross_encoder_max_length", 0),
        ("batch_size", 0),
        ("batch_max_pairs", 0),
        ("batch_max_wait_ms", -1.0),
        ("torch_threads", -1),
        ("diffusion_alpha", 1.0),
        ("diffusion_alpha", -0.1),
        ("diffusion_top_k_edges", 0),
        ("mmr_lambda", 1.5),
        ("evaluator_timeout_s", 0.0),
        ("evaluator_concurrency", 0),
        ("cross_encoder_backend", "onnx"),
    ],
)
def test_rejects_out_of_range_values(field_value: tuple[str, float]) -> None:
    field, value = field_value
    with pytest.raises(ValidationError, match=field):
        RerankerSettings(**{field: value})


def test_device_auto_resolves_to_a_real_device() -> None:
    import torch

    assert resolve_device(None) == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_device("cpu") == "cpu"


# --------------------------------------------------------------------------- build_runtime


def _candidates(texts: list[str]) -> CandidateSet:
    passages = [Passage(chunk_id=f"c{i}", doc_id=f"d{i}", text=t, score=float(-i)) for i, t in enumerate(texts)]
    return CandidateSet.from_request("q", passages, 2, CandidateEmbeddings("q", None, passages, None))


async def test_without_a_cross_encoder_the_stage_skips_and_it_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="rag_reranker"):
        runtime = build_runtime(RerankerSettings(cross_encoder_model=""), None)
    assert runtime.cross_encoder is None and runtime.pair_queue is None
    assert set(runtime.stages) == {"cross_encoder", "diffusion", "gmmr"}
    stage = runtime.stages["cross_encoder"]
    assert isinstance(stage, CrossEncoderStage)
    with pytest.raises(StageSkipped) as excinfo:
        await stage.run(_candidates(["a", "b"]), CrossEncoderSpec())
    assert excinfo.value.reason == NO_MODEL_REASON
    notices = [r for r in caplog.records if "no cross-encoder configured" in r.getMessage()]
    assert len(notices) == 1


def test_stages_and_embedder_follow_the_settings() -> None:
    settings = RerankerSettings(
        embedding_model="all-MiniLM-L6-v2", diffusion_alpha=0.6, diffusion_top_k_edges=3, mmr_lambda=0.35, device="cpu"
    )
    runtime = build_runtime(settings, None)
    diffusion, gmmr = runtime.stages["diffusion"], runtime.stages["gmmr"]
    assert isinstance(diffusion, DiffusionStage) and (diffusion.alpha, diffusion.top_k_edges) == (0.6, 3)
    assert isinstance(gmmr, GmmrStage) and gmmr.default_lambda == 0.35
    assert runtime.embedder.model_id == "all-MiniLM-L6-v2"
    assert {name: stage.name for name, stage in runtime.stages.items()} == {n: n for n in runtime.stages}


async def test_without_llm_settings_adaptive_lambda_falls_back() -> None:
    runtime = build_runtime(RerankerSettings(mmr_lambda=0.45), None)
    vectors = np.eye(3)
    passages = [
        Passage(chunk_id=f"c{i}", doc_id=f"d{i}", text=t, score=float(-i), embedding=vectors[i].tolist())
        for i, t in enumerate(["a", "b", "c"])
    ]
    candidates = CandidateSet.from_request("q", passages, 2, CandidateEmbeddings("q", [1.0, 0.0, 0.0], passages, None))
    outcome = await runtime.stages["gmmr"].run(candidates, GmmrSpec(mmr_lambda="adaptive"))
    assert outcome.detail == {"lambda": 0.45, "relevance": "scores", "lambda_policy": "fixed", "fallback": "no evaluator configured"}
    assert outcome.order.tolist()[0] == 0 and len(outcome.order) == 2


def test_with_llm_settings_the_gmmr_stage_gets_an_adaptive_selector() -> None:
    from rag_reranker.runtime import build_adaptive_selector

    selector = build_adaptive_selector(RerankerSettings(evaluator_concurrency=2), LLMSettings(base_url="http://127.0.0.1:9/v1"))
    assert isinstance(selector, AdaptiveLambdaSelector)
    assert build_adaptive_selector(RerankerSettings(), None) is None


def test_configured_cross_encoder_is_built_with_a_micro_batcher(tiny_cross_encoder_dir: Path) -> None:
    settings = RerankerSettings(
        cross_encoder_model=str(tiny_cross_encoder_dir), cross_encoder_max_length=64, batch_max_pairs=16, batch_max_wait_ms=8
    )
    runtime = build_runtime(settings, None)
    assert isinstance(runtime.cross_encoder, CrossEncoderScorer)
    assert runtime.cross_encoder.path == tiny_cross_encoder_dir.resolve()
    assert isinstance(runtime.pair_queue, MicroBatcher)
    assert runtime.pair_queue.max_pairs == 16 and runtime.pair_queue.max_wait_s == pytest.approx(0.008)
    assert runtime.stages["cross_encoder"].model_id == str(tiny_cross_encoder_dir)


def test_flag_embedding_backend_is_wired(tiny_cross_encoder_dir: Path) -> None:
    from rag_reranker.scorers.flag_reranker import FlagRerankerScorer

    settings = RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), cross_encoder_backend="flag_embedding", batch_max_wait_ms=5)
    runtime = build_runtime(settings, None)
    assert isinstance(runtime.cross_encoder, FlagRerankerScorer)
    assert isinstance(runtime.pair_queue, MicroBatcher)


def test_zero_wait_turns_micro_batching_off(tiny_cross_encoder_dir: Path) -> None:
    settings = RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), batch_max_wait_ms=0)
    runtime = build_runtime(settings, None)
    assert isinstance(runtime.pair_queue, UnbatchedScorer)
    assert isinstance(build_pair_queue(runtime.cross_encoder, settings), UnbatchedScorer)


async def test_the_built_cross_encoder_stage_scores(tiny_cross_encoder_dir: Path, tiny_cross_encoder: CrossEncoderScorer) -> None:
    runtime = build_runtime(RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), device="cpu"), None)
    runtime.pair_queue.start()
    try:
        texts = ["reset your password in settings", "lunch is served at noon", "passwords need twelve characters"]
        outcome = await runtime.stages["cross_encoder"].run(_candidates(texts), CrossEncoderSpec())
    finally:
        await runtime.pair_queue.aclose()
    expected = tiny_cross_encoder.score("q", texts)
    np.testing.assert_allclose(outcome.scores, expected, atol=1e-5)
    assert outcome.order.tolist() == np.argsort(-expected, kind="stable").tolist()


def test_missing_cross_encoder_names_path_and_setting(tmp_path: Path) -> None:
    missing = str(tmp_path / "bge-reranker-v2-m3")
    with pytest.raises(ModelNotAvailableError) as excinfo:
        build_runtime(RerankerSettings(cross_encoder_model=missing), None)
    message = str(excinfo.value)
    assert missing in message and "RERANKER_CROSS_ENCODER_MODEL" in message


@pytest.mark.parametrize(("device", "configured", "expected"), [
    ("cpu", None, 0.0), ("cuda", None, 5.0), ("cuda:1", None, 5.0), ("cpu", 7.0, 7.0), ("cuda", 0.0, 0.0),
])
def test_batching_default_follows_the_device(device: str, configured: float | None, expected: float) -> None:
    from rag_reranker.runtime import batch_max_wait_ms

    assert batch_max_wait_ms(RerankerSettings(device=device, batch_max_wait_ms=configured)) == expected


def test_cpu_default_scores_each_request_alone(tiny_cross_encoder: CrossEncoderScorer) -> None:
    from rag_reranker.batching import UnbatchedScorer
    from rag_reranker.runtime import build_pair_queue

    assert isinstance(build_pair_queue(tiny_cross_encoder, RerankerSettings(device="cpu")), UnbatchedScorer)
