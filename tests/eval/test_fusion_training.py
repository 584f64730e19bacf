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


def _example(
    dataset: str, qid: str, rng: np.random.Generator, family: str = "", language: str | None = None
) -> training.QueryExamples:
    """Six first-pass candidates (document ``a`` twice) and three hop additions; ``a`` and ``h1`` relevant,
    with a hybrid / hop score that says so, plus noise."""
    doc_ids = ["a", "a", "b", "c", "d", "e", "h1", "h2", "h3"]
    labels = np.array([d in ("a", "h1") for d in doc_ids], dtype=np.int8)
    features = rng.normal(scale=0.3, size=(len(doc_ids), len(FEATURE_NAMES)))
    features[:, HYBRID] += labels[:] * 2.0
    features[6:, HOP] += np.array([2.0, 1.0, 0.5])
    return training.QueryExamples(dataset, qid, doc_ids, features, labels, first_pass=6, family=family,
                                  language=language)


@pytest.fixture
def examples() -> list[training.QueryExamples]:
    rng = np.random.default_rng(0)
    return [_example(name, f"q{i}", rng) for name in ("one", "two") for i in range(10)]


@pytest.fixture
def with_translations(examples) -> list[training.QueryExamples]:
    """``examples`` plus one question set of 10 in three languages (a family: the same ids)."""
    rng = np.random.default_rng(1)
    return examples + [_example(f"x-{code}", f"t{i}", rng, "x", code) for code in ("en", "ro", "de") for i in range(10)]


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


def test_translations_share_their_folds(with_translations) -> None:
    folds = training.folds_of(with_translations, 5, seed=0)
    for i in range(10):
        assert folds[f"x-en/t{i}"] == folds[f"x-ro/t{i}"] == folds[f"x-de/t{i}"]
    assert sorted(np.bincount([folds[f"x-ro/t{i}"] for i in range(10)]).tolist()) == [2, 2, 2, 2, 2]


@pytest.mark.parametrize("protocol", training.PROTOCOLS)
def test_no_question_is_scored_by_a_model_trained_on_it(with_translations, protocol, monkeypatch) -> None:
    examples = with_translations
    trained_on: dict[int, set[str]] = {}
    fit = training.fit

    def recording_fit(train, **options):
        model = fit(train, **options)
        trained_on[id(model)] = {e.key for e in train}
        return model

    monkeypatch.setattr(training, "fit", recording_fit)
    models = training.held_out_models(examples, protocol, folds=5, seed=0)
    by_key = {e.key: e for e in examples}
    # lolo scores the questions of a known language only.
    assert set(models) == {e.key for e in examples if protocol != "lolo" or e.language is not None}
    for key, model in models.items():
        scored, train = by_key[key], [by_key[k] for k in trained_on[id(model)]]
        assert key not in trained_on[id(model)]
        if scored.family:  # never trained on a translation of the question either
            assert not any(e.family == scored.family and e.query_id == scored.query_id for e in train)
        if protocol == "lodo":
            assert not any(e.group == scored.group for e in train)
        if protocol == "within":
            assert all(e.dataset == scored.dataset for e in train)
        if protocol == "lolo":
            assert not any(e.language == scored.language for e in train)
            assert {"one", "two"} <= {e.dataset for e in train}  # the other datasets stay in training
    assert len(trained_on) == {"within": 25, "pooled": 5, "lodo": 3, "lolo": 15}[protocol]


def test_a_weight_counts_like_repeating_the_questions(examples) -> None:
    """Weighing a dataset's questions by 2 fits the model that sees each of them twice (the class
    balance follows the weights); with no weights it is scikit-learn's balanced classes."""
    from sklearn.linear_model import LogisticRegression

    weighted = training.fit(examples, weights={"one": 2.0})
    repeated = training.fit(examples + [e for e in examples if e.dataset == "one"])
    assert np.allclose(weighted.mean, repeated.mean) and np.allclose(weighted.scale, repeated.scale)
    assert np.allclose(weighted.weights, repeated.weights, atol=1e-4)
    assert weighted.intercept == pytest.approx(repeated.intercept, abs=1e-4)
    plain = training.fit(examples)
    assert not np.allclose(weighted.weights, plain.weights, atol=1e-3)
    x, y = training.training_rows(examples)
    sklearn = LogisticRegression(class_weight="balanced", max_iter=2000).fit((x - plain.mean) / plain.scale, y)
    assert np.allclose(plain.weights, sklearn.coef_[0], atol=1e-4)


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


def test_xquad_languages_are_one_family_and_weights_parse() -> None:
    from ragctl.train_fusion_command import family_and_language, parse_weights

    assert family_and_language("xquad-ro") == ("xquad", "ro")
    assert family_and_language("hotpotqa") == ("", None)
    assert family_and_language("xquad-xx") == ("", None)  # not one of XQuAD's shared languages
    assert parse_weights(["xquad-ro=100", "clapnq=0.5"]) == {"xquad-ro": 100.0, "clapnq": 0.5}
    for bad in (["xquad-ro"], ["xquad-ro=0"], ["xquad-ro=many"]):
        with pytest.raises(ValueError):
            parse_weights(bad)
