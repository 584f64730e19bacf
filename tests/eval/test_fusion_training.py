"""Learned fusion's training and held-out protocols (``rag_eval.fusion_training``): one row per
document with hard negatives from the first pass and from the graph's additions, folds by question,
and no question ever scored by a model that was trained on it."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval import fusion_training as training
from rag_eval.runs import parse_run
from rag_retriever.fusion_features import FEATURE_NAMES

HOP = FEATURE_NAMES.index("hop_z")
HYBRID = FEATURE_NAMES.index("hybrid_z")


def _example(dataset: str, qid: str, rng: np.random.Generator) -> training.QueryExamples:
    """Six first-pass candidates (document ``a`` twice) and three hop additions; ``a`` and ``h1`` relevant,
    with a hybrid / hop score that says so, plus noise."""
    doc_ids = ["a", "a", "b", "c", "d", "e", "h1", "h2", "h3"]
    labels = np.array([d in ("a", "h1") for d in doc_ids], dtype=np.int8)
    features = rng.normal(scale=0.3, size=(len(doc_ids), len(FEATURE_NAMES)))
    features[:, HYBRID] += labels[:] * 2.0
    features[6:, HOP] += np.array([2.0, 1.0, 0.5])
    return training.QueryExamples(dataset, qid, doc_ids, features, labels, first_pass=6)


@pytest.fixture
def examples() -> list[training.QueryExamples]:
    rng = np.random.default_rng(0)
    return [_example(name, f"q{i}", rng) for name in ("one", "two") for i in range(10)]


def test_one_row_per_document_and_hard_negatives_of_both_sources(examples) -> None:
    x, y = training.training_rows(examples[:1], hard_negatives=2)
    # positives a (its first chunk only) and h1; negatives b, c of the first pass; h2, h3 added by the hop.
    assert len(y) == 6 and y.sum() == 2
    x, y = training.training_rows(examples[:1], hard_negatives=1)
    assert len(y) == 4  # a, h1 + b + h2 (the best-scored hop addition)
    assert x[-1, HOP] == pytest.approx(examples[0].features[7, HOP])


def test_folds_are_by_question_within_each_dataset(examples) -> None:
    folds = training.folds_of(examples, 5, seed=0)
    assert folds == training.folds_of(examples, 5, seed=0)
    for name in ("one", "two"):
        counts = np.bincount([folds[e.key] for e in examples if e.dataset == name], minlength=5)
        assert counts.tolist() == [2, 2, 2, 2, 2]


@pytest.mark.parametrize("protocol", training.PROTOCOLS)
def test_no_question_is_scored_by_a_model_trained_on_it(examples, protocol, monkeypatch) -> None:
    trained_on: dict[int, set[str]] = {}
    fit = training.fit

    def recording_fit(train, **options):
        model = fit(train, **options)
        trained_on[id(model)] = {e.key for e in train}
        return model

    monkeypatch.setattr(training, "fit", recording_fit)
    models = training.held_out_models(examples, protocol, folds=5, seed=0)
    assert set(models) == {e.key for e in examples}
    for key, model in models.items():
        assert key not in trained_on[id(model)]
        if protocol == "lodo":
            assert not any(k.split("/")[0] == key.split("/")[0] for k in trained_on[id(model)])
        if protocol == "within":
            assert all(k.split("/")[0] == key.split("/")[0] for k in trained_on[id(model)])
    assert len(trained_on) == {"within": 10, "pooled": 5, "lodo": 2}[protocol]


def test_held_out_rankings_learn_the_signal(examples) -> None:
    rankings = training.held_out_rankings(examples, "pooled", depth=5, folds=5, seed=0)
    # The relevant documents (one in the first pass, one found only by the hop) rank first.
    assert all(set(ranking[:2]) == {"a", "h1"} for ranking in rankings.values())
    assert examples[0].hybrid_ranking() == ["a", "b", "c", "d", "e"]


def test_the_eval_run_is_cross_fitted_and_default_is_not(monkeypatch) -> None:
    assert parse_run("hybrid:learned").cross_fitted
    assert parse_run("hybrid:learned").name == "hybrid:learned"
    assert not parse_run("hybrid").cross_fitted
    monkeypatch.setenv("RETRIEVER_HYBRID_NORMALIZATION", "learned")
    default = parse_run("default")
    assert default.fusion == "learned" and not default.cross_fitted
