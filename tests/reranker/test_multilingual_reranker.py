"""The reranker's production path for BAAI/bge-reranker-v2-m3, proven on a tiny random model of its kind.

bge-reranker-v2-m3 is an ``XLMRobertaForSequenceClassification`` with one logit over XLM-R's SentencePiece
tokenizer, reading a pair as ``<s> query </s></s> passage </s>``. ``tiny_xlmr.build_reranker`` builds one in a
temporary folder (nothing downloads); the scorer is built as the service builds it (``build_cross_encoder``
from ``RerankerSettings``), with both loaders (sentence-transformers' CrossEncoder, FlagEmbedding's
FlagReranker): the pairs reach the model in XLM-R's pair format, truncated in the passage; the scores are
a plain forward's logits (through the sigmoid when asked); the stage orders by them; long passages are cut,
not fatal, also when the tokenizer states no length limit.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from rag_common.schemas import CrossEncoderSpec, Passage
from rag_reranker.batching import UnbatchedScorer
from rag_reranker.runtime import build_cross_encoder
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.scorers.flag_reranker import FlagRerankerScorer
from rag_reranker.scorers.local_cross_encoder import LocalCrossEncoder
from rag_reranker.settings import RerankerSettings
from rag_reranker.stages.base import CandidateSet
from rag_reranker.stages.candidate_embeddings import CandidateEmbeddings
from rag_reranker.stages.cross_encoder_stage import CrossEncoderStage
from tests.common.embedders.tiny_xlmr import GERMAN, MAX_POSITIONS, ROMANIAN, build_reranker

BACKENDS = ["sentence_transformers", "flag_embedding"]
QUERY = "Unde sunt stocate conversațiile studenților?"
PASSAGES = [
    "Conversațiile sunt păstrate în Redis și șterse după treizeci de zile.",
    "Căminul nou are camere pentru două persoane și o bucătărie comună.",
    GERMAN[0],
    "Datele personale sunt protejate; încă o frază cu ș, ț, ă, î și â.",
    " ".join(ROMANIAN * 6),  # far beyond the model's 126 tokens: the passage is cut, not the query
    "Die Straße führt über die Brücke. Grüße!",
]
#: Most tokens of a pair the tiny XLM-R holds: its positions start at padding_idx + 1 = 2.
TOKEN_LIMIT = MAX_POSITIONS - 2


@pytest.fixture(scope="module")
def reranker_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_reranker(tmp_path_factory.mktemp("tiny-bge-reranker"))


@pytest.fixture(scope="module")
def unlimited_reranker_dir(reranker_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same model whose tokenizer states no length limit (as some saved rerankers do)."""
    directory = tmp_path_factory.mktemp("tiny-bge-reranker-no-limit") / "model"
    shutil.copytree(reranker_dir, directory)
    config_path = directory / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config.pop("model_max_length")
    config_path.write_text(json.dumps(config))
    return directory


def scorer_for(path: Path, backend: str, *, sigmoid: bool = True) -> LocalCrossEncoder:
    settings = RerankerSettings(
        cross_encoder_model=str(path), cross_encoder_backend=backend, cross_encoder_sigmoid=sigmoid,
        device="cpu", batch_size=4,
    )
    scorer = build_cross_encoder(settings)
    assert isinstance(scorer, LocalCrossEncoder)
    scorer.warm_up()
    return scorer


@pytest.fixture(scope="module")
def scorers(reranker_dir: Path) -> dict[tuple[str, bool], LocalCrossEncoder]:
    return {
        (backend, sigmoid): scorer_for(reranker_dir, backend, sigmoid=sigmoid)
        for backend in BACKENDS
        for sigmoid in (True, False)
    }


def torch_model_of(scorer: LocalCrossEncoder):  # noqa: ANN201 - the loaded XLMRobertaForSequenceClassification
    if isinstance(scorer, FlagRerankerScorer):
        return scorer._reranker.model
    assert isinstance(scorer, CrossEncoderScorer)
    return scorer._model.model


def tokenizer_of(path: Path):  # noqa: ANN201 - the model's XLMRobertaTokenizer
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(path))


def expected_encoding(path: Path, pairs: list[tuple[str, str]], max_length: int):  # noqa: ANN201 - BatchEncoding
    tokenizer = tokenizer_of(path)
    queries, passages = [q for q, _ in pairs], [p for _, p in pairs]
    return tokenizer(queries, passages, truncation="only_second", max_length=max_length, padding=True, return_tensors="pt")


def direct_scores(path: Path, pairs: list[tuple[str, str]], max_length: int, *, sigmoid: bool) -> np.ndarray:
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(str(path)).eval()
    with torch.no_grad():
        logits = model(**expected_encoding(path, pairs, max_length)).logits[:, 0]
    return (torch.sigmoid(logits) if sigmoid else logits).numpy()


@pytest.mark.parametrize("backend", BACKENDS)
def test_pairs_reach_the_model_in_xlmr_pair_format(
    scorers: dict[tuple[str, bool], LocalCrossEncoder], reranker_dir: Path, backend: str
) -> None:
    scorer = scorers[(backend, True)]
    assert scorer.max_length == TOKEN_LIMIT  # RERANKER_CROSS_ENCODER_MAX_LENGTH 512, capped at the model's limit
    seen: list[tuple[int, ...]] = []

    def capture(_module, args, kwargs):  # noqa: ANN001, ANN202
        ids = kwargs.get("input_ids", args[0] if args else None)
        for row, mask in zip(ids.tolist(), kwargs["attention_mask"].tolist(), strict=True):
            seen.append(tuple(i for i, m in zip(row, mask, strict=True) if m))

    hook = torch_model_of(scorer).roberta.register_forward_pre_hook(capture, with_kwargs=True)
    try:
        scorer.score_pairs([(QUERY, p) for p in PASSAGES])
    finally:
        hook.remove()
    encoded = expected_encoding(reranker_dir, [(QUERY, p) for p in PASSAGES], TOKEN_LIMIT)
    expected = {tuple(i for i, m in zip(row, mask, strict=True) if m)
                for row, mask in zip(encoded["input_ids"].tolist(), encoded["attention_mask"].tolist(), strict=True)}
    assert set(seen) == expected  # (a loader may run a batch twice, e.g. FlagReranker's trial run)
    query_ids = tokenizer_of(reranker_dir)(QUERY)["input_ids"][:-1]  # <s> and the query's tokens
    for ids in expected:
        # <s> query </s></s> passage </s>: XLM-R's pair format; the query whole, the passage cut to fit.
        assert ids[: len(query_ids)] == tuple(query_ids) and ids[len(query_ids) : len(query_ids) + 2] == (2, 2)
        assert ids[0] == 0 and ids[-1] == 2 and ids.count(2) == 3 and len(ids) <= TOKEN_LIMIT
    assert max(len(ids) for ids in expected) == TOKEN_LIMIT


@pytest.mark.parametrize("sigmoid", [True, False], ids=["sigmoid", "logits"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_scores_equal_a_direct_forward(
    scorers: dict[tuple[str, bool], LocalCrossEncoder], reranker_dir: Path, backend: str, sigmoid: bool
) -> None:
    pairs = [(QUERY, p) for p in PASSAGES] + [("Wo ist die Mensa?", GERMAN[5]), ("ș ț ă î â", ROMANIAN[4])]
    got = scorers[(backend, sigmoid)].score_pairs(pairs)
    expected = direct_scores(reranker_dir, pairs, TOKEN_LIMIT, sigmoid=sigmoid)
    assert got.shape == (len(pairs),) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    if sigmoid:
        assert ((got > 0) & (got < 1)).all()
    else:
        assert (np.abs(got) > 1).any()  # raw logits: the wide init puts some well outside (0, 1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_stage_orders_by_the_scores(scorers: dict[tuple[str, bool], LocalCrossEncoder], backend: str) -> None:
    scorer = scorers[(backend, True)]
    passages = [Passage(chunk_id=f"c{i}", doc_id="d", text=text) for i, text in enumerate(PASSAGES)]
    embeddings = CandidateEmbeddings(QUERY, None, passages, None)
    candidates = CandidateSet.from_request(QUERY, passages, top_k=len(passages), embeddings=embeddings)
    stage = CrossEncoderStage(UnbatchedScorer(scorer.score_pairs), model_id=scorer.model_id)
    outcome = asyncio.run(stage.run(candidates, CrossEncoderSpec()))
    scores = scorer.score(QUERY, PASSAGES)
    np.testing.assert_allclose(outcome.scores, scores, rtol=1e-4, atol=1e-5)
    assert list(outcome.order) == list(np.argsort(-scores, kind="stable"))
    assert len(set(np.round(scores, 4))) == len(PASSAGES)  # distinct scores: the order is the scores', not ties'


@pytest.mark.parametrize("backend", BACKENDS)
def test_long_passages_are_cut_even_when_the_tokenizer_states_no_limit(
    unlimited_reranker_dir: Path, reranker_dir: Path, backend: str
) -> None:
    scorer = scorer_for(unlimited_reranker_dir, backend)
    # The position embeddings (128) less XLM-R's offset: 128 tokens would index position 129 and crash.
    assert scorer.max_length == TOKEN_LIMIT
    long_pairs = [(QUERY, " ".join(ROMANIAN * 20)), (QUERY, "Straße " * 2000)]
    got = scorer.score_pairs(long_pairs)
    np.testing.assert_allclose(got, direct_scores(reranker_dir, long_pairs, TOKEN_LIMIT, sigmoid=True), rtol=1e-4, atol=1e-5)
