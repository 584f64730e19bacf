"""FlagEmbedding's FlagReranker behind the cross-encoder stage: same model, same scores as sentence-transformers."""

from __future__ import annotations

from dataclasses import replace
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from rag_common.embedders import ModelNotAvailableError
from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.scorers.flag_reranker import FlagRerankerScorer
from rag_reranker.scorers.local_cross_encoder import ScorerOptions
from rag_reranker.scorers.local_cross_encoder import model_token_limit as _model_token_limit
from rag_reranker.settings import RerankerSettings

#: How the scorers read pairs by default (``RerankerSettings``, the one source); tests pin values with ``replace``.
SCORER_OPTIONS = ScorerOptions.of(RerankerSettings())

QUERY = "how do I reset my password"
PASSAGES = [
    "Open Settings, choose Account and press Reset password.",
    "The cafeteria serves lunch from noon until two.",
    "Quarterly revenue grew by four percent.",
    "Passwords must be at least twelve characters long.",
    "Our office is closed on public holidays.",
]
LONG_PASSAGE = "reset the password from the account page " * 20 + "filler words " * 3000


@pytest.fixture(scope="module")
def flag_scorer(tiny_cross_encoder_dir: Path) -> FlagRerankerScorer:
    scorer = FlagRerankerScorer(str(tiny_cross_encoder_dir), SCORER_OPTIONS, device="cpu")
    scorer.warm_up()
    return scorer


@pytest.fixture(scope="module")
def flag_scorer_raw(tiny_cross_encoder_dir: Path) -> FlagRerankerScorer:
    scorer = FlagRerankerScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, sigmoid=False), device="cpu")
    scorer.warm_up()
    return scorer


def test_is_a_pair_scorer_in_the_cross_encoder_stage(flag_scorer: FlagRerankerScorer) -> None:
    assert isinstance(flag_scorer, PairScorer)
    assert flag_scorer.model_id.endswith(flag_scorer.path.name)


def test_fp32_on_cpu(flag_scorer: FlagRerankerScorer) -> None:
    import torch

    assert flag_scorer.device == "cpu"
    assert flag_scorer.use_fp16 is False
    assert next(flag_scorer._reranker.model.parameters()).dtype == torch.float32


def test_one_float32_score_per_passage(flag_scorer: FlagRerankerScorer) -> None:
    scores = flag_scorer.score(QUERY, PASSAGES)
    assert scores.shape == (len(PASSAGES),)
    assert scores.dtype == np.float32
    assert np.all(np.isfinite(scores))
    assert np.ptp(scores) > 1e-4


def test_empty_input_gives_empty_scores(flag_scorer: FlagRerankerScorer) -> None:
    assert flag_scorer.score(QUERY, []).shape == (0,)
    assert flag_scorer.score_pairs([]).shape == (0,)


@pytest.mark.parametrize("sigmoid", [True, False], ids=["sigmoid", "raw-logits"])
def test_scores_equal_sentence_transformers_on_the_same_model(
    sigmoid: bool,
    flag_scorer: FlagRerankerScorer,
    flag_scorer_raw: FlagRerankerScorer,
    tiny_cross_encoder: CrossEncoderScorer,
    tiny_cross_encoder_raw: CrossEncoderScorer,
) -> None:
    flag, reference = (flag_scorer, tiny_cross_encoder) if sigmoid else (flag_scorer_raw, tiny_cross_encoder_raw)
    passages = [*PASSAGES, LONG_PASSAGE]  # the long one is truncated by both, to the same tokens
    np.testing.assert_allclose(flag.score(QUERY, passages), reference.score(QUERY, passages), rtol=0, atol=1e-4)


def test_sigmoid_is_applied_to_the_raw_logits(
    flag_scorer: FlagRerankerScorer, flag_scorer_raw: FlagRerankerScorer
) -> None:
    raw = flag_scorer_raw.score(QUERY, PASSAGES).astype(np.float64)
    squashed = flag_scorer.score(QUERY, PASSAGES)
    assert np.any((raw <= 0.0) | (raw >= 1.0)), raw
    assert np.all((squashed > 0.0) & (squashed < 1.0))
    np.testing.assert_allclose(1.0 / (1.0 + np.exp(-raw)), squashed, rtol=1e-5, atol=1e-6)


def test_score_pairs_mixes_queries_and_keeps_order(
    flag_scorer: FlagRerankerScorer, tiny_cross_encoder: CrossEncoderScorer
) -> None:
    other_query = "when is lunch served"
    pairs = [(QUERY, PASSAGES[0]), (other_query, PASSAGES[1]), (QUERY, PASSAGES[2]), (other_query, PASSAGES[0])]
    scores = flag_scorer.score_pairs(pairs)
    assert scores.shape == (len(pairs),) and scores.dtype == np.float32
    one_by_one = np.array([flag_scorer.score(query, [passage])[0] for query, passage in pairs])
    np.testing.assert_allclose(scores, one_by_one, rtol=0, atol=1e-5)
    reference = np.array([tiny_cross_encoder.score(query, [passage])[0] for query, passage in pairs])
    np.testing.assert_allclose(scores, reference, rtol=0, atol=1e-4)


def test_long_pairs_are_truncated_to_max_length(tiny_cross_encoder_dir: Path) -> None:
    scorer = FlagRerankerScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, max_length=24, sigmoid=False), device="cpu")
    scorer.warm_up()
    assert scorer.max_length == 24
    head = "reset the password from the account page " * 5  # well past 24 tokens already
    long_passage = head + "filler words " * 3000  # far past the 512 positions the model has
    scores = scorer.score(QUERY, [head, long_passage, head + "a completely different ending"])
    assert np.all(np.isfinite(scores))
    # Only the first 24 tokens of the pair are seen, so what follows cannot change the score.
    np.testing.assert_allclose(scores, scores[0], rtol=1e-6)
    # ...and it is cut exactly there: the passage's first 24 - query - [CLS][SEP][SEP] tokens,
    # passed on their own, score the same.
    tokenizer = scorer._reranker.tokenizer
    budget = 24 - len(tokenizer(QUERY, add_special_tokens=False)["input_ids"]) - 3
    cut_passage = tokenizer.decode(tokenizer(long_passage, add_special_tokens=False)["input_ids"][:budget])
    np.testing.assert_allclose(scorer.score(QUERY, [cut_passage]), scores[:1], rtol=0, atol=1e-5)
    one_token_less = tokenizer.decode(tokenizer(long_passage, add_special_tokens=False)["input_ids"][: budget - 1])
    assert abs(scorer.score(QUERY, [one_token_less])[0] - scores[0]) > 1e-5


def test_max_length_is_capped_at_what_the_model_supports(tiny_cross_encoder_dir: Path) -> None:
    scorer = FlagRerankerScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, max_length=4096), device="cpu")
    scorer.warm_up()
    assert scorer.max_length == 512
    scores = scorer.score(QUERY, ["word " * 5000])
    assert scores.shape == (1,) and np.isfinite(scores[0])


def test_token_limit_allows_for_roberta_position_offset() -> None:
    from transformers import XLMRobertaConfig, XLMRobertaForSequenceClassification

    config = XLMRobertaConfig(
        vocab_size=100, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8,
        max_position_embeddings=34, num_labels=1,
    )
    model = XLMRobertaForSequenceClassification(config)

    class NoLimitTokenizer:
        model_max_length = int(1e30)

    assert _model_token_limit(model, NoLimitTokenizer()) == 32  # padding_idx 1: positions start at 2


def test_warm_up_is_idempotent_and_thread_safe(tiny_cross_encoder_dir: Path) -> None:
    scorer = FlagRerankerScorer(str(tiny_cross_encoder_dir), SCORER_OPTIONS, device="cpu")
    threads = [threading.Thread(target=scorer.warm_up) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    loaded = scorer._reranker
    assert loaded is not None
    scorer.warm_up()
    assert scorer._reranker is loaded


def test_concurrent_scoring_is_consistent(flag_scorer: FlagRerankerScorer) -> None:
    expected = flag_scorer.score(QUERY, PASSAGES)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(5):
                results.append(flag_scorer.score(QUERY, PASSAGES))
        except BaseException as exc:  # noqa: BLE001 - surfaced by the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for result in results:
        np.testing.assert_allclose(result, expected, rtol=0, atol=1e-6)


def test_missing_model_path_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-reranker"
    with pytest.raises(ModelNotAvailableError, match="no-such-reranker"):
        FlagRerankerScorer(str(missing), SCORER_OPTIONS)


def test_directory_without_a_model_fails_clearly(tmp_path: Path) -> None:
    scorer = FlagRerankerScorer(str(tmp_path), SCORER_OPTIONS, device="cpu")
    with pytest.raises(ModelNotAvailableError, match=str(tmp_path)):
        scorer.warm_up()


def test_missing_flagembedding_names_the_package(
    tiny_cross_encoder_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "FlagEmbedding", None)  # makes the import raise ImportError
    scorer = FlagRerankerScorer(str(tiny_cross_encoder_dir), SCORER_OPTIONS, device="cpu")
    with pytest.raises(ModelNotAvailableError, match=r"pip install FlagEmbedding==1\.4\.2"):
        scorer.warm_up()


def test_more_than_one_label_is_rejected(tiny_cross_encoder_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoConfig, AutoTokenizer, BertForSequenceClassification

    config = AutoConfig.from_pretrained(tiny_cross_encoder_dir)
    config.num_labels = 2
    BertForSequenceClassification(config).save_pretrained(tmp_path)
    AutoTokenizer.from_pretrained(tiny_cross_encoder_dir).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="num_labels=1"):
        FlagRerankerScorer(str(tmp_path), SCORER_OPTIONS, device="cpu").warm_up()


@pytest.mark.parametrize("kwargs", [{"max_length": 0}, {"batch_size": 0}])
def test_rejects_non_positive_sizes(tiny_cross_encoder_dir: Path, kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        FlagRerankerScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, **kwargs))


@pytest.mark.skipif("not __import__('torch').cuda.is_available()", reason="needs a CUDA device")
def test_fp16_on_cuda(tiny_cross_encoder_dir: Path) -> None:
    scorer = FlagRerankerScorer(str(tiny_cross_encoder_dir), SCORER_OPTIONS, device="cuda:0")
    scorer.warm_up()
    assert scorer.use_fp16 is True
    assert np.all(np.isfinite(scorer.score(QUERY, PASSAGES)))
