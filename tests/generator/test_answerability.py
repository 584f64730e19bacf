from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rag_generator.answerability import (
    DEFAULT_GATE_PATH,
    FEATURE_NAMES,
    GATE_FORMAT,
    AnswerabilityFeatures,
    AnswerabilityGate,
    answerability_features,
    features_from_answer,
    fit_gate,
)
from rag_generator.extractive_answerer import ExtractiveAnswerer
from rag_generator.settings import GeneratorSettings

from .conftest import CountingEmbedder, passage


def params(**overrides: object) -> dict:
    base = {
        "format": GATE_FORMAT,
        "version": 1,
        "features": list(FEATURE_NAMES),
        "mean": [0.5, 0.5, 0.05, 0.8, 0.1, 0.5],
        "scale": [0.1, 0.1, 0.05, 0.2, 0.1, 0.1],
        "coef": [1.0, 0.5, 0.2, 0.3, 0.1, 0.4],
        "intercept": -0.2,
        "threshold": 0.4,
        "fitted_on": {"note": "hand-written test parameters"},
    }
    return base | overrides


FEATURES = AnswerabilityFeatures(0.7, 0.65, 0.1, 1.0, 0.2, 0.6)


def test_feature_order_is_fixed_and_documented() -> None:
    assert FEATURE_NAMES == (
        "best_sentence_score",
        "best_sentence_cosine",
        "sentence_score_margin",
        "top_retrieval_score",
        "retrieval_score_margin",
        "best_passage_cosine",
    )
    assert FEATURES.feature_vector().tolist() == [0.7, 0.65, 0.1, 1.0, 0.2, 0.6]


def test_features_from_raw_scores() -> None:
    features = answerability_features(
        sentence_scores=[0.3, 0.8, 0.5], sentence_cosines=[0.2, 0.7], retrieval_scores=[0.9, 1.0, 0.4], passage_cosines=[0.1, 0.6]
    )
    assert features == AnswerabilityFeatures(0.8, 0.7, pytest.approx(0.3), 1.0, pytest.approx(0.1), 0.6)
    empty = answerability_features(sentence_scores=[], sentence_cosines=[], retrieval_scores=[], passage_cosines=[])
    assert empty.feature_vector().tolist() == [0.0] * 6
    single = answerability_features(sentence_scores=[0.4], sentence_cosines=[0.4], retrieval_scores=[0.9], passage_cosines=[0.5])
    assert single.sentence_score_margin == 0.0 and single.retrieval_score_margin == 0.0


def test_features_from_an_extractive_answer(counting_embedder: CountingEmbedder) -> None:
    passages = [
        passage(1, "Conversations are stored in Redis under the key rag:conversation:{id}. Keys expire after 30 days.", score=0.9),
        passage(2, "The retriever keeps its dense vectors in an hnswlib graph on local disk.", score=0.5),
    ]
    answer = ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder).answer("Where are conversations stored?", passages)
    features = features_from_answer(answer, [p.score for p in passages])
    assert features.best_sentence_score == answer.candidates[0].score
    assert features.sentence_score_margin == pytest.approx(answer.candidates[0].score - answer.candidates[1].score)
    assert features.top_retrieval_score == 0.9 and features.retrieval_score_margin == pytest.approx(0.4)
    assert features.best_passage_cosine == max(answer.passage_cosines.values()) > 0.4


def test_probability_is_the_logistic_of_standardised_features() -> None:
    gate = AnswerabilityGate(params())
    p = params()
    z = (FEATURES.feature_vector() - np.array(p["mean"])) / np.array(p["scale"])
    expected = 1 / (1 + math.exp(-(z @ np.array(p["coef"]) + p["intercept"])))
    assert gate.probability(FEATURES) == pytest.approx(expected)
    assert gate.should_abstain(FEATURES) is (expected < 0.4)
    low = AnswerabilityFeatures(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    assert gate.probability(low) < 1e-4 and gate.should_abstain(low)


def test_json_round_trip(tmp_path: Path) -> None:
    gate = AnswerabilityGate(params())
    path = tmp_path / "gate.json"
    gate.to_json(path)
    loaded = AnswerabilityGate.from_json(path)
    assert loaded.params == gate.params
    assert loaded.probability(FEATURES) == gate.probability(FEATURES)
    assert json.loads(path.read_text())["fitted_on"] == {"note": "hand-written test parameters"}


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"features": [*FEATURE_NAMES[:-1], "passage_cosine"]}, "feature names do not match"),
        ({"features": list(reversed(FEATURE_NAMES))}, "feature names do not match"),
        ({"format": "something-else"}, "format"),
        ({"version": 2}, "version"),
        ({"coef": [1.0, 2.0]}, "coef"),
        ({"scale": [0.1, 0.1, 0.0, 0.2, 0.1, 0.1]}, "scale"),
        ({"threshold": 1.5}, "threshold"),
        ({"intercept": float("nan")}, "intercept"),
    ],
)
def test_invalid_parameters_are_rejected_with_a_clear_error(tmp_path: Path, overrides: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnswerabilityGate(params(**overrides))
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(params(**overrides)))
    with pytest.raises(ValueError, match=str(path)):
        AnswerabilityGate.from_json(path)


def test_fit_gate_separates_a_separable_set() -> None:
    rng = np.random.default_rng(0)
    answerable = rng.normal([0.7, 0.7, 0.15, 0.9, 0.3, 0.6], 0.03, size=(40, 6))
    unanswerable = rng.normal([0.3, 0.3, 0.02, 0.6, 0.05, 0.3], 0.03, size=(60, 6))
    x = np.vstack([answerable, unanswerable])
    y = [1] * 40 + [0] * 60
    fitted = fit_gate(x, y, provenance={"dataset": "synthetic"})
    gate = AnswerabilityGate(json.loads(json.dumps(fitted)))  # survives JSON
    abstain = [gate.should_abstain(AnswerabilityFeatures(*row)) for row in x]
    assert abstain == [False] * 40 + [True] * 60
    assert fitted["features"] == list(FEATURE_NAMES)
    assert fitted["fitted_on"]["dataset"] == "synthetic"
    assert fitted["fitted_on"]["fit"]["in_sample_abstention_f1"] == 1.0
    assert fitted["fitted_on"]["fit"]["unanswerable"] == 60
    # Rows as feature objects give the same fit.
    again = fit_gate([AnswerabilityFeatures(*row) for row in x], y, provenance={"dataset": "synthetic"})
    assert again["coef"] == pytest.approx(fitted["coef"])


def test_fit_gate_rejects_bad_input() -> None:
    x = np.ones((4, 6))
    with pytest.raises(ValueError, match="both classes"):
        fit_gate(x, [1, 1, 1, 1], provenance={})
    with pytest.raises(ValueError, match="threshold_strategy"):
        fit_gate(x, [1, 0, 1, 0], threshold_strategy="youden", provenance={})
    with pytest.raises(ValueError, match="feature matrix"):
        fit_gate(np.ones((4, 3)), [1, 0, 1, 0], provenance={})


def test_the_shipped_parameters_load_if_present() -> None:
    if not DEFAULT_GATE_PATH.exists():
        pytest.skip(f"{DEFAULT_GATE_PATH} not shipped")
    gate = AnswerabilityGate.from_json(DEFAULT_GATE_PATH)
    assert gate.params["fitted_on"], "shipped parameters must say what they were fitted on"
    assert 0.0 <= gate.probability(FEATURES) <= 1.0
