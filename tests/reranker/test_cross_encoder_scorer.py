from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rag_common.embedders import ModelNotAvailableError
from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.scorers.local_cross_encoder import ScorerOptions
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


def _sigmoid(values: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-values))


def test_is_a_pair_scorer(tiny_cross_encoder: CrossEncoderScorer, tiny_cross_encoder_dir: Path) -> None:
    assert isinstance(tiny_cross_encoder, PairScorer)
    assert tiny_cross_encoder.model_id == str(tiny_cross_encoder_dir)


def test_score_pairs_matches_score_and_mixes_queries(tiny_cross_encoder: CrossEncoderScorer) -> None:
    other = "when is the office closed"
    pairs = [(QUERY, PASSAGES[0]), (other, PASSAGES[4]), (QUERY, PASSAGES[3])]
    mixed = tiny_cross_encoder.score_pairs(pairs)
    assert mixed.shape == (3,) and mixed.dtype == np.float32
    expected = [tiny_cross_encoder.score(q, [p])[0] for q, p in pairs]
    np.testing.assert_allclose(mixed, expected, rtol=1e-5, atol=1e-6)
    assert tiny_cross_encoder.score_pairs([]).shape == (0,)


def test_one_float_score_per_passage(tiny_cross_encoder: CrossEncoderScorer) -> None:
    scores = tiny_cross_encoder.score(QUERY, PASSAGES)
    assert scores.shape == (len(PASSAGES),)
    assert scores.dtype == np.float32
    assert np.all(np.isfinite(scores))
    # A random model still tells passages apart: the scores are not one constant.
    assert np.ptp(scores) > 1e-4


def test_empty_passages_give_empty_scores(tiny_cross_encoder: CrossEncoderScorer) -> None:
    assert tiny_cross_encoder.score(QUERY, []).shape == (0,)


def test_sigmoid_maps_scores_into_unit_interval(tiny_cross_encoder: CrossEncoderScorer) -> None:
    scores = tiny_cross_encoder.score(QUERY, PASSAGES)
    assert np.all((scores > 0.0) & (scores < 1.0))


def test_raw_logits_without_sigmoid(
    tiny_cross_encoder: CrossEncoderScorer, tiny_cross_encoder_raw: CrossEncoderScorer
) -> None:
    raw = tiny_cross_encoder_raw.score(QUERY, PASSAGES)
    squashed = tiny_cross_encoder.score(QUERY, PASSAGES)
    assert np.any((raw <= 0.0) | (raw >= 1.0)), raw
    np.testing.assert_allclose(_sigmoid(raw.astype(np.float64)), squashed, rtol=1e-5, atol=1e-6)
    # A monotonic squash never changes the ranking.
    assert list(np.argsort(-raw, kind="stable")) == list(np.argsort(-squashed, kind="stable"))


def test_long_pairs_are_truncated_to_max_length(tiny_cross_encoder_dir: Path) -> None:
    scorer = CrossEncoderScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, max_length=24), device="cpu")
    scorer.warm_up()
    assert scorer.max_length == 24
    head = "reset the password from the account page " * 5  # well past 24 tokens already
    long_passage = head + "filler words " * 3000  # far past the 512 positions the model has
    scores = scorer.score(QUERY, [head, long_passage, head + "a completely different ending"])
    assert np.all(np.isfinite(scores))
    # Only the first 24 tokens are seen, so whatever follows them cannot change the score.
    np.testing.assert_allclose(scores, scores[0], rtol=1e-6)


def test_max_length_is_capped_at_what_the_model_supports(tiny_cross_encoder_dir: Path) -> None:
    scorer = CrossEncoderScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, max_length=4096), device="cpu")
    scorer.warm_up()
    assert scorer.max_length == 512
    scores = scorer.score(QUERY, ["word " * 5000])
    assert scores.shape == (1,) and np.isfinite(scores[0])


def test_order_follows_scores_and_is_deterministic(tiny_cross_encoder: CrossEncoderScorer) -> None:
    first = tiny_cross_encoder.score(QUERY, PASSAGES)
    second = tiny_cross_encoder.score(QUERY, PASSAGES)
    np.testing.assert_array_equal(first, second)
    # Batch composition must not change a pair's score: each passage scored alone agrees.
    alone = np.array([tiny_cross_encoder.score(QUERY, [p])[0] for p in PASSAGES])
    np.testing.assert_allclose(alone, first, rtol=1e-5, atol=1e-6)


def test_missing_model_path_names_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-reranker"
    with pytest.raises(ModelNotAvailableError, match="no-such-reranker"):
        CrossEncoderScorer(str(missing), SCORER_OPTIONS)


def test_directory_without_a_model_fails_clearly(tmp_path: Path) -> None:
    scorer = CrossEncoderScorer(str(tmp_path), SCORER_OPTIONS)
    with pytest.raises(ModelNotAvailableError, match=str(tmp_path)):
        scorer.warm_up()


@pytest.mark.parametrize("kwargs", [{"max_length": 0}, {"batch_size": 0}])
def test_rejects_non_positive_sizes(tiny_cross_encoder_dir: Path, kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        CrossEncoderScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, **kwargs))
