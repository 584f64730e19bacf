from __future__ import annotations

import numpy as np
import pytest

from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.bi_encoder import BiEncoderScorer

PASSAGES = [
    "Photosynthesis lets plants turn sunlight, water and carbon dioxide into glucose and oxygen.",
    "The Eiffel Tower in Paris was completed in 1889 for the World's Fair.",
    "To reset your password, open Settings, choose Account and click 'Forgot password'.",
    "Espresso is brewed by forcing hot water through finely ground coffee beans under pressure.",
    "The Pacific is the largest and deepest of Earth's oceans.",
    "Python lists are mutable sequences; tuples cannot be changed after creation.",
]


@pytest.mark.parametrize(
    ("query", "answer_index"),
    [
        ("How do plants make food from light?", 0),
        ("When was the Eiffel Tower built?", 1),
        ("I forgot my login credentials, how can I change them?", 2),
        ("How is espresso coffee made?", 3),
        ("Which ocean is the biggest?", 4),
        ("What is the difference between a list and a tuple?", 5),
    ],
)
def test_the_answering_passage_ranks_first(minilm_scorer: BiEncoderScorer, query: str, answer_index: int) -> None:
    scores = minilm_scorer.score(query, PASSAGES)
    assert int(np.argmax(scores)) == answer_index, scores
    # A clear margin, not a coin toss between near-equal scores.
    runner_up = np.max(np.delete(scores, answer_index))
    assert scores[answer_index] - runner_up > 0.1, scores


def test_scores_are_cosine_similarities(minilm_scorer: BiEncoderScorer) -> None:
    scores = minilm_scorer.score("Which ocean is the biggest?", PASSAGES)
    assert isinstance(minilm_scorer, PairScorer)
    assert minilm_scorer.name == "bi_encoder"
    assert scores.shape == (len(PASSAGES),) and scores.dtype == np.float32
    assert np.all((scores >= -1.0001) & (scores <= 1.0001))
    identical = minilm_scorer.score(PASSAGES[1], [PASSAGES[1]])
    assert identical[0] == pytest.approx(1.0, abs=1e-4)


def test_empty_passages_give_empty_scores(minilm_scorer: BiEncoderScorer) -> None:
    assert minilm_scorer.score("anything", []).shape == (0,)
