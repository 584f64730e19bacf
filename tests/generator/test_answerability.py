from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from rag_generator.answerability import (
    DEFAULT_GATE_PATH,
    EMBEDDER_FEATURES,
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
        "version": 2,
        "features": list(FEATURE_NAMES),
        "mean": [0.5, 0.5, 0.05, 0.8, 0.1, 0.5, 0.4, 0.5, 0.3],
        "scale": [0.1, 0.1, 0.05, 0.2, 0.1, 0.1, 0.2, 0.2, 0.4],
        "coef": [1.0, 0.5, 0.2, 0.3, 0.1, 0.4, 0.6, 0.2, -0.5],
        "intercept": -0.2,
        "threshold": 0.4,
        "fitted_on": {"note": "hand-written test parameters"},
    }
    return base | overrides


FEATURES = AnswerabilityFeatures(0.7, 0.65, 0.1, 1.0, 0.2, 0.6, 0.5, 0.75, 0.0)


def test_feature_order_is_fixed_and_documented() -> None:
    assert FEATURE_NAMES == (
        "best_sentence_score",
        "best_sentence_cosine",
        "sentence_score_margin",
        "top_retrieval_score",
        "retrieval_score_margin",
        "best_passage_cosine",
        "best_sentence_coverage",
        "max_sentence_coverage",
        "embedder_blind",
    )
    assert FEATURES.feature_vector().tolist() == [0.7, 0.65, 0.1, 1.0, 0.2, 0.6, 0.5, 0.75, 0.0]
    assert set(EMBEDDER_FEATURES) <= set(FEATURE_NAMES)


RAW = {
    "sentence_scores": [0.3, 0.8, 0.5],
    "sentence_cosines": [0.2, 0.7, 0.4],
    "sentence_coverages": [1.0, 0.25, 0.5],
    "retrieval_scores": [0.9, 1.0, 0.4],
    "passage_cosines": [0.1, 0.6],
}


def test_features_from_raw_scores() -> None:
    features = answerability_features(**RAW, embedder_covers_language=True)
    # Coverage of the best-scored sentence (0.8's), not the first one's; the highest coverage apart.
    assert features == AnswerabilityFeatures(0.8, 0.7, pytest.approx(0.3), 1.0, pytest.approx(0.1), 0.6, 0.25, 1.0, 0.0)
    none = {key: [] for key in RAW}
    empty = answerability_features(**none, embedder_covers_language=True)
    assert empty.feature_vector().tolist() == [0.0] * len(FEATURE_NAMES)
    single = answerability_features(
        sentence_scores=[0.4], sentence_cosines=[0.4], sentence_coverages=[0.5], retrieval_scores=[0.9], passage_cosines=[0.5],
        embedder_covers_language=True,
    )
    assert single.sentence_score_margin == 0.0 and single.retrieval_score_margin == 0.0
    with pytest.raises(ValueError, match="coverages"):
        answerability_features(**{**RAW, "sentence_coverages": [1.0]}, embedder_covers_language=True)


def test_a_blind_embedder_leaves_only_the_signals_that_hold_in_every_language() -> None:
    seen = answerability_features(**RAW, embedder_covers_language=True)
    blind = answerability_features(**RAW, embedder_covers_language=False)
    for name, a, b in zip(FEATURE_NAMES, seen.feature_vector(), blind.feature_vector()):
        if name in EMBEDDER_FEATURES:
            assert b == 0.0 and a > 0.0, name
        elif name == "embedder_blind":
            assert (a, b) == (0.0, 1.0)
        else:
            assert a == b, name


def test_features_from_an_extractive_answer(counting_embedder: CountingEmbedder) -> None:
    passages = [
        passage(1, "Conversations are stored in Redis under the key rag:conversation:{id}. Keys expire after 30 days.", score=0.9),
        passage(2, "The retriever keeps its dense vectors in an hnswlib graph on local disk.", score=0.5),
    ]
    answer = ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder).answer("Where are conversations stored?", passages)
    features = features_from_answer(answer, [p.score for p in passages], embedder_covers_language=True)
    assert features.best_sentence_score == answer.candidates[0].score
    assert features.best_sentence_coverage == answer.candidates[0].lexical > 0
    assert features.max_sentence_coverage == max(c.lexical for c in answer.candidates)
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
    low = AnswerabilityFeatures(0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
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
        ({"version": 1}, "refit it with `ragctl calibrate`"),
        ({"coef": [1.0, 2.0]}, "coef"),
        ({"scale": [0.1, 0.1, 0.0, 0.2, 0.1, 0.1, 0.1, 0.1, 0.1]}, "scale"),
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
    answerable = rng.normal([0.7, 0.7, 0.15, 0.9, 0.3, 0.6, 0.7, 0.8, 0.0], 0.03, size=(40, 9))
    unanswerable = rng.normal([0.3, 0.3, 0.02, 0.6, 0.05, 0.3, 0.2, 0.3, 0.0], 0.03, size=(60, 9))
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


def _overlapping(rng: np.random.Generator, n: int, shift: float) -> np.ndarray:
    return rng.normal(shift, 1.0, size=(n, len(FEATURE_NAMES)))


def test_the_threshold_rule_bounds_abstention_on_answerable_questions() -> None:
    rng = np.random.default_rng(1)
    # Two datasets of different sizes and shares of unanswerable questions; the classes overlap, so the
    # best F1 of abstaining costs answerable questions.
    x = np.vstack([_overlapping(rng, 300, 0.4), _overlapping(rng, 60, -0.4), _overlapping(rng, 40, 0.4), _overlapping(rng, 200, -0.4)])
    y = np.array([1] * 300 + [0] * 60 + [1] * 40 + [0] * 200)
    groups = ["big"] * 360 + ["small"] * 240

    def answerable_abstention(params: dict) -> float:
        gate = AnswerabilityGate(params)
        abstain = np.array([gate.probability_of_vector(row) < gate.threshold for row in x])
        # Each dataset weighs the same: the mean of the datasets' rates.
        return float(np.mean([abstain[(y == 1) & (np.array(groups) == g)].mean() for g in ("big", "small")]))

    free = fit_gate(x, y, groups=groups, provenance={})
    bounded = fit_gate(x, y, groups=groups, max_answerable_abstention=0.03, provenance={})
    assert answerable_abstention(free) > 0.05
    assert answerable_abstention(bounded) <= 0.03
    assert bounded["threshold"] < free["threshold"]
    assert bounded["fitted_on"]["fit"]["groups"] == ["big", "small"]
    assert "at most 3% of the answerable" in bounded["fitted_on"]["fit"]["threshold_rule"]
    # Weighing each dataset's classes alike is not the same fit as pooling the rows.
    pooled = fit_gate(x, y, provenance={})
    assert pooled["coef"] != pytest.approx(free["coef"], abs=1e-3)


def test_fit_gate_rejects_bad_input() -> None:
    x = np.ones((4, len(FEATURE_NAMES)))
    with pytest.raises(ValueError, match="groups"):
        fit_gate(x, [1, 0, 1, 0], groups=["a"], provenance={})
    with pytest.raises(ValueError, match="max_answerable_abstention"):
        fit_gate(x, [1, 0, 1, 0], max_answerable_abstention=0.0, provenance={})
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
    assert gate.params["fitted_on"]["embedder_languages"] == ["en"]  # what embedder_blind meant when it was fitted
