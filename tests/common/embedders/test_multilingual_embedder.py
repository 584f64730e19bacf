"""The production path for a multilingual embedder, proven on tiny random models of the same kinds.

paraphrase-multilingual-MiniLM-L12-v2 (a BERT over XLM-R's SentencePiece vocabulary, mean pooling) and
BAAI/bge-m3 (XLM-RoBERTa, CLS pooling, normalised) cannot be downloaded here; ``tiny_xlmr`` builds models of
their architectures and tokenizer kind in a temporary folder. Through ``build_embedder`` — what every service
calls — with both backends: the ONNX export runs and gives torch's vectors on Romanian and German text, the
pooling is the model's own, prefixes are applied, SentencePiece tokens are counted for truncation, and a
model that is not on disk fails at once with what to do.
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_common.embedders.factory import build_embedder
from rag_common.embedders.models import ModelNotAvailableError
from rag_common.embedders.onnx_export import main as export_main
from rag_common.embedders.onnx_runtime import OnnxEmbedder
from rag_common.embedders.prefixed import PrefixedBiEncoder
from rag_common.embedders.st_config import declared_prompts, pad_token, pooling_mode
from rag_common.settings import EmbedderSettings
from tests.common.embedders.tiny_xlmr import EMBEDDER_MAX_SEQ_LENGTH, GERMAN, ROMANIAN, build_embedder as build_tiny

#: (pooling, architecture): paraphrase-multilingual-MiniLM-L12-v2's kind, bge-m3's kind, and an XLM-R mean-pooled
#: (paraphrase-multilingual-mpnet-base-v2, multilingual-e5).
KINDS = [("mean", "bert"), ("cls", "xlm-roberta"), ("mean", "xlm-roberta")]
LONG_ROMANIAN = " ".join(ROMANIAN) + " " + " ".join(ROMANIAN)  # far beyond max_seq_length: truncated
TEXTS = [
    "Unde sunt stocate conversațiile?",
    "Ștefan și Țițeica: școală, țară, mâine, în, încă, văd",  # ș ț ă î â
    "Ştefan şi Ţiţeica",  # the cedilla letters (ş ţ) older Romanian text uses
    "Die Straße führt über die Brücke; Grüße aus München",  # ß ü
    "GROSSE Prüfung für Müller",
    "The library opens at eight.",
    ROMANIAN[1],
    LONG_ROMANIAN,
    "x",
]


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    return {
        (pooling, arch): build_tiny(tmp_path_factory.mktemp(f"tiny-{arch}-{pooling}"), pooling=pooling, architecture=arch)
        for pooling, arch in KINDS
    }


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def embedders(models: dict[tuple[str, str], Path], cache_dir: Path) -> dict[tuple[str, str, str], PrefixedBiEncoder]:
    """Every kind through the factory, with each backend, warmed up (the ONNX one exports the model now)."""
    built = {}
    for kind, path in models.items():
        for backend in ("onnx", "torch"):
            settings = EmbedderSettings(backend=backend, onnx_cache_dir=str(cache_dir), onnx_threads=1)
            embedder = build_embedder(str(path), device="cpu", batch_size=4, settings=settings)
            embedder.warm_up()
            built[(*kind, backend)] = embedder
    return built


def reference_vectors(path: Path, texts: list[str], pooling: str) -> np.ndarray:
    """The model's hidden states by a plain transformers forward, one text at a time, pooled in numpy."""
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(path))
    model = AutoModel.from_pretrained(str(path)).eval()
    rows = []
    for text in texts:
        encoded = tokenizer(text, truncation=True, max_length=EMBEDDER_MAX_SEQ_LENGTH, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state[0].numpy()
        vector = hidden[0] if pooling == "cls" else hidden.mean(axis=0)  # one text: no padding to mask
        rows.append(vector / np.linalg.norm(vector))
    return np.stack(rows).astype(np.float32)


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def test_the_fixture_is_an_xlmr_sentencepiece_tokenizer(models: dict[tuple[str, str], Path]) -> None:
    from transformers import AutoTokenizer

    path = models[("cls", "xlm-roberta")]
    spec = json.loads((path / "tokenizer.json").read_text())
    assert spec["model"]["type"] == "Unigram" and (path / "sentencepiece.bpe.model").is_file()
    tokenizer = AutoTokenizer.from_pretrained(str(path))
    assert type(tokenizer).__name__ == "XLMRobertaTokenizer"
    assert [tokenizer.convert_tokens_to_ids(t) for t in ("<s>", "<pad>", "</s>", "<unk>")] == [0, 1, 2, 3]
    ids = tokenizer("Unde sunt stocate conversațiile?", "Die Straße")["input_ids"]
    tokens = tokenizer.convert_ids_to_tokens(ids)
    assert tokens[0] == "<s>" and tokens.count("</s>") == 3 and "▁conversațiile" in tokens and "▁Straße" in tokens
    assert tokenizer.unk_token_id not in tokenizer("ș ț ă î â ß ü")["input_ids"]
    assert pad_token(path) == "<pad>"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_onnx_vectors_equal_torchs_on_romanian_and_german(
    embedders: dict[tuple[str, str, str], PrefixedBiEncoder], kind: tuple[str, str]
) -> None:
    onnx, torch_ = embedders[(*kind, "onnx")], embedders[(*kind, "torch")]
    assert isinstance(onnx, OnnxEmbedder) and torch_.backend == "torch"
    assert (onnx.dim, onnx.max_seq_length) == (torch_.dim, torch_.max_seq_length) == (32, EMBEDDER_MAX_SEQ_LENGTH)
    assert onnx._batch_tokenizer.padding["pad_id"] == 1  # XLM-R's <pad>, as the torch path pads (id 0 is <s>)
    for text in TEXTS:  # one at a time: no padding
        assert cosines(onnx.encode_queries([text]), torch_.encode_queries([text]))[0] >= 0.9999, text
    texts = TEXTS * 3  # batches of 4 of mixed lengths: padding with XLM-R's <pad> is masked out of the pooling
    got, expected = onnx.encode_documents(texts), torch_.encode_documents(texts)
    assert got.dtype == np.float32 and np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert cosines(got, expected).min() >= 0.9999
    np.testing.assert_allclose(got[: len(TEXTS)], onnx.encode_documents(TEXTS[::-1])[::-1], atol=1e-5)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_pooling_is_the_models_own(
    embedders: dict[tuple[str, str, str], PrefixedBiEncoder], models: dict[tuple[str, str], Path], kind: tuple[str, str]
) -> None:
    pooling, _ = kind
    path = models[kind]
    assert pooling_mode(path) == pooling
    expected = reference_vectors(path, TEXTS, pooling)
    other = reference_vectors(path, TEXTS, "mean" if pooling == "cls" else "cls")
    assert cosines(expected, other).min() < 0.99  # the two poolings are told apart on these models
    for backend in ("onnx", "torch"):
        got = embedders[(*kind, backend)].encode_documents(TEXTS)
        assert cosines(got, expected).min() >= 0.9999, backend


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: "-".join(k))
def test_sentence_pools_agree_across_backends_on_diacritics(
    embedders: dict[tuple[str, str, str], PrefixedBiEncoder], kind: tuple[str, str]
) -> None:
    """Span pooling (RETRIEVER_SENTENCE_VECTORS=pooled) maps characters to SentencePiece tokens the same way
    in both backends: offsets are characters, not UTF-8 bytes, so ș ț ß before a span do not shift it."""
    text = "Țițeica și Ștefan învață. Die Straße führt über die Brücke. Unde sunt stocate conversațiile?"
    first, second = text.index("Die"), text.index("Unde")
    pools = [[((0, first - 1),), ((first, second - 1),), ((second, len(text)),), ((0, len(text)),)]]
    results = {}
    for backend in ("onnx", "torch"):
        embedder = embedders[(*kind, backend)]
        vectors, pooled = embedder.encode_documents_pooled([text], pools)
        np.testing.assert_allclose(vectors, embedder.encode_documents([text]), atol=1e-5)
        assert pooled[0].shape == (4, 32) and np.isfinite(pooled[0]).all()
        results[backend] = pooled[0]
    assert cosines(results["onnx"], results["torch"]).min() >= 0.9999
    assert cosines(results["onnx"][:1], results["onnx"][1:2])[0] < 0.9999  # different spans, different vectors


def test_prefixes_given_or_declared_by_the_model_are_applied(
    models: dict[tuple[str, str], Path], cache_dir: Path, tmp_path: Path
) -> None:
    plain_path = models[("mean", "xlm-roberta")]
    declared_path = tmp_path / "e5-kind"
    shutil.copytree(plain_path, declared_path)
    config = declared_path / "config_sentence_transformers.json"
    # A default prompt name makes sentence-transformers' encode() prefix everything: it must not add to ours.
    prompts = {"prompts": {"query": "query: ", "passage": "passage: "}, "default_prompt_name": "query"}
    config.write_text(json.dumps({**json.loads(config.read_text()), **prompts}))
    assert declared_prompts(declared_path) == ("query: ", "passage: ") and declared_prompts(plain_path) == ("", "")
    text = "Unde sunt stocate conversațiile?"
    for backend in ("onnx", "torch"):
        settings = EmbedderSettings(backend=backend, onnx_cache_dir=str(cache_dir), onnx_threads=1)
        plain = build_embedder(str(plain_path), device="cpu", settings=settings)
        given = build_embedder(
            str(plain_path), device="cpu", settings=settings, query_prefix="query: ", document_prefix="passage: "
        )
        declared = build_embedder(str(declared_path), device="cpu", settings=settings)
        overridden = build_embedder(
            str(declared_path), device="cpu", settings=settings, query_prefix="", document_prefix=""
        )
        as_query = plain.encode_documents([f"query: {text}"])
        as_passage = plain.encode_documents([f"passage: {text}"])
        assert cosines(as_query, as_passage)[0] < 0.9999  # the prefix changes the vector
        for embedder in (given, declared):
            np.testing.assert_allclose(embedder.encode_queries([text]), as_query, atol=1e-5)
            np.testing.assert_allclose(embedder.encode_documents([text]), as_passage, atol=1e-5)
        np.testing.assert_allclose(overridden.encode_queries([text]), plain.encode_queries([text]), atol=1e-5)
        assert not np.allclose(plain.encode_queries([text]), as_query, atol=1e-3)


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_truncation_warning_counts_sentencepiece_tokens(
    embedders: dict[tuple[str, str, str], PrefixedBiEncoder],
    models: dict[tuple[str, str], Path],
    backend: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from transformers import AutoTokenizer

    embedder = embedders[("cls", "xlm-roberta", backend)]
    tokenizer = AutoTokenizer.from_pretrained(str(models[("cls", "xlm-roberta")]))
    # One-letter Romanian words: SentencePiece splits some into "▁" + letter, so 40 words are more than the
    # limit (48 with <s> and </s>) in tokens though not in words: the count is the tokenizer's, not a guess.
    words = "ș ț ă î â".split() * 30
    short, too_long = " ".join(words[:10]), " ".join(words[:40])
    for text in (short, too_long, LONG_ROMANIAN):
        assert embedder.count_tokens(text) == len(tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])
    assert embedder.count_tokens(short) + 2 <= EMBEDDER_MAX_SEQ_LENGTH < embedder.count_tokens(too_long) + 2
    assert len(too_long.split()) + 2 <= EMBEDDER_MAX_SEQ_LENGTH
    with caplog.at_level(logging.WARNING, logger="rag_common.embedders"):
        vectors = embedder.encode_documents([short, too_long, LONG_ROMANIAN, "Die Straße"])
    warnings = [r.getMessage() for r in caplog.records if "max_seq_length" in r.getMessage()]
    assert len(warnings) == 1 and warnings[0].startswith("2 of 4 texts exceed")
    assert np.isfinite(vectors).all()
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="rag_common.embedders"):
        embedder.encode_documents([short, "Die Straße"])
        embedder.encode_queries([LONG_ROMANIAN])  # queries are cut too, but only documents are warned about
    assert not [r for r in caplog.records if "max_seq_length" in r.getMessage()]


@pytest.mark.parametrize("backend", ["onnx", "torch"])
def test_a_model_not_on_disk_fails_at_once_naming_what_to_do(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from huggingface_hub import constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))
    settings = EmbedderSettings(backend=backend, onnx_cache_dir=str(tmp_path / "onnx"))
    with pytest.raises(ModelNotAvailableError) as caught:
        build_embedder("BAAI/bge-m3", device="cpu", settings=settings)
    message = str(caught.value)
    assert "'BAAI/bge-m3'" in message and "offline Hugging Face cache" in message
    assert "hf download BAAI/bge-m3 --local-dir" in message and "pip install huggingface_hub" in message
    assert not (tmp_path / "onnx").exists()


def test_onnx_refuses_a_pooling_it_cannot_reproduce(
    models: dict[tuple[str, str], Path], cache_dir: Path, tmp_path: Path
) -> None:
    path = tmp_path / "max-pooled"
    shutil.copytree(models[("mean", "bert")], path)
    pooling_config = path / "1_Pooling" / "config.json"
    config = json.loads(pooling_config.read_text())
    pooling_config.write_text(json.dumps({**config, "pooling_mode_mean_tokens": False, "pooling_mode_max_tokens": True}))
    embedder = build_embedder(str(path), settings=EmbedderSettings(backend="onnx", onnx_cache_dir=str(cache_dir)))
    with pytest.raises(ModelNotAvailableError, match="pooling max.*EMBEDDER_BACKEND=torch"):
        embedder.warm_up()
    modules = json.loads((path / "modules.json").read_text())
    pooling_config.write_text(json.dumps(config))
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    (path / "modules.json").write_text(json.dumps([*modules, dense]))
    with pytest.raises(ModelNotAvailableError, match="modules sentence_transformers.models.Dense"):
        pooling_mode(path)
    # The newer single-key format (sentence-transformers >= 6) is read as well.
    (path / "modules.json").write_text(json.dumps(modules))
    pooling_config.write_text(json.dumps({"embedding_dimension": 32, "pooling_mode": "cls"}))
    assert pooling_mode(path) == "cls"


def test_export_ahead_with_the_command(
    models: dict[tuple[str, str], Path], cache_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """``python -m rag_common.embedders.onnx_export <model>`` (what docs/multilingual-models.md tells to run)
    leaves the export the ONNX embedder then uses as it is."""
    monkeypatch.setenv("EMBEDDER_ONNX_CACHE_DIR", str(cache_dir))
    path = models[("cls", "xlm-roberta")]
    assert export_main([str(path)]) == 0
    printed = capsys.readouterr().out.strip()
    onnx_file = Path(printed.split(": ", 1)[1])
    assert onnx_file.is_file() and onnx_file.parent.parent == cache_dir
    embedder = build_embedder(str(path), settings=EmbedderSettings(backend="onnx", onnx_cache_dir=str(cache_dir)))
    embedder.warm_up()
    assert embedder.onnx_path == onnx_file
