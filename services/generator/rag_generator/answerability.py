"""Should the generator answer at all? A calibrated gate instead of "did the quotes verify".

A logistic model over a handful of scores the pipeline already has (no extra model call): how well
the best sentence matches the query (embedding cosine and the share of the question's content
words it holds), how clearly it beats the runner-up, and how confident retrieval was. Its parameters
are data, not code: a versioned JSON file written by :func:`fit_gate` on labelled questions,
loaded by :class:`AnswerabilityGate` with numpy only, so the service needs no scikit-learn and a
refit is a file change that names its own provenance.

Labels and direction: 1 = answerable from the passages, 0 = not. ``probability`` is P(answerable);
the generator abstains when it is below ``threshold``, which :func:`fit_gate` picks to maximise the
F1 of *abstaining* (the class the gate exists for), within a bound on abstaining on answerable ones. Retrieval scores are on whatever scale the
stage before the generator uses (fused retriever score, cross-encoder score, ...): a gate is only
valid for the pipeline it was fitted on, which is why ``fitted_on`` must say what that was.

Languages. An embedder is blind outside the languages it was trained for (``EMBEDDER_LANGUAGES``):
there its cosines match shared tokens, not meaning, and their level differs from one language to the
next (XQuAD, all-MiniLM-L6-v2: off-topic Romanian questions score the cosines of answerable German
ones). So for a question in such a language (or one whose language cannot be told) the features read
from the embedder (:data:`EMBEDDER_FEATURES`) are 0 and ``embedder_blind`` is 1: the gate then
weighs the signals that mean the same in every language (content-word coverage, score and retrieval
margins) plus a fitted offset. Measured against two alternatives, fitted on some languages and scored
on the others (docs/evaluation.md, "The answerability gate per language"): cosines rescaled per query
against the passage set separated nothing in a blind language, and a second coefficient set fitted on
the blind languages alone generalised worse to a language it had not seen.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from rag_generator.logistic_params import finite, validate_logistic

__all__ = [
    "DEFAULT_GATE_PATH",
    "EMBEDDER_FEATURES",
    "FEATURE_NAMES",
    "GATE_FORMAT",
    "GATE_VERSION",
    "AnswerabilityFeatures",
    "AnswerabilityGate",
    "answerability_features",
    "features_from_answer",
    "fit_gate",
]

GATE_FORMAT = "rag-answerability-gate"
#: 2: coverage features and ``embedder_blind`` (version 1 files were fitted without them).
GATE_VERSION = 2
#: Where the shipped parameters live (absent until a fitting run has written them).
DEFAULT_GATE_PATH = Path(__file__).with_name("data") / "answerability_gate.json"


@dataclass(frozen=True, slots=True)
class AnswerabilityFeatures:
    """The gate's inputs. Field order is :data:`FEATURE_NAMES` and the order of ``feature_vector``."""

    #: Extractive score of the best sentence.
    best_sentence_score: float
    #: Highest query-sentence cosine over all candidate sentences.
    best_sentence_cosine: float
    #: Best minus second-best sentence score (0 with fewer than two sentences): a clear winner
    #: suggests a real answer, a flat field suggests topical but non-answering text.
    sentence_score_margin: float
    #: Highest retrieval score among the passages.
    top_retrieval_score: float
    #: Top minus second retrieval score (0 with fewer than two passages).
    retrieval_score_margin: float
    #: Highest query-passage cosine.
    best_passage_cosine: float
    #: Share of the question's content words (in its language) found in the best sentence.
    best_sentence_coverage: float
    #: Highest such share over all candidate sentences.
    max_sentence_coverage: float
    #: 1 when the embedder was not trained for the question's language (``EMBEDDER_LANGUAGES``; a
    #: language that cannot be told counts as not), else 0; the :data:`EMBEDDER_FEATURES` are 0 then.
    embedder_blind: float

    def feature_vector(self) -> np.ndarray:
        """float64 vector in :data:`FEATURE_NAMES` order."""
        return np.asarray(astuple(self), dtype=np.float64)


FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in fields(AnswerabilityFeatures))
#: The features read from the embedder, 0 for a question in a language it is blind to. The best
#: sentence's score is among them because the answerer's score is mostly its cosine.
EMBEDDER_FEATURES: tuple[str, ...] = ("best_sentence_score", "best_sentence_cosine", "best_passage_cosine")


def answerability_features(
    *,
    sentence_scores: Sequence[float],
    sentence_cosines: Sequence[float],
    sentence_coverages: Sequence[float],
    retrieval_scores: Sequence[float],
    passage_cosines: Sequence[float],
    embedder_covers_language: bool,
) -> AnswerabilityFeatures:
    """The features from raw scores; missing inputs count as 0, i.e. "no evidence".
    ``sentence_scores`` and ``sentence_coverages``: one per candidate sentence, in the same order
    (the best sentence is the best score's); the others in any order."""
    if len(sentence_coverages) != len(sentence_scores):
        raise ValueError(f"{len(sentence_coverages)} coverages for {len(sentence_scores)} sentence scores")
    best = max(range(len(sentence_scores)), key=sentence_scores.__getitem__, default=None)
    scores = sorted(sentence_scores, reverse=True)
    retrieval = sorted(retrieval_scores, reverse=True)
    seen = 1.0 if embedder_covers_language else 0.0
    return AnswerabilityFeatures(
        best_sentence_score=seen * float(scores[0]) if scores else 0.0,
        best_sentence_cosine=seen * float(max(sentence_cosines, default=0.0)),
        sentence_score_margin=float(scores[0] - scores[1]) if len(scores) > 1 else 0.0,
        top_retrieval_score=float(retrieval[0]) if retrieval else 0.0,
        retrieval_score_margin=float(retrieval[0] - retrieval[1]) if len(retrieval) > 1 else 0.0,
        best_passage_cosine=seen * float(max(passage_cosines, default=0.0)),
        best_sentence_coverage=float(sentence_coverages[best]) if best is not None else 0.0,
        max_sentence_coverage=float(max(sentence_coverages, default=0.0)),
        embedder_blind=1.0 - seen,
    )


class _Scored(Protocol):
    @property
    def score(self) -> float: ...
    @property
    def cosine(self) -> float: ...
    @property
    def lexical(self) -> float: ...


class _Answer(Protocol):
    @property
    def candidates(self) -> Sequence[_Scored]: ...
    @property
    def passage_cosines(self) -> Mapping[int, float]: ...


def features_from_answer(
    answer: _Answer, retrieval_scores: Sequence[float], *, embedder_covers_language: bool
) -> AnswerabilityFeatures:
    """The features of an ``ExtractiveAnswer`` and the scores of the passages it was drawn from;
    ``embedder_covers_language``: ``EmbedderSettings.covers`` of the question's language."""
    return answerability_features(
        sentence_scores=[c.score for c in answer.candidates],
        sentence_cosines=[c.cosine for c in answer.candidates],
        sentence_coverages=[c.lexical for c in answer.candidates],
        retrieval_scores=retrieval_scores,
        passage_cosines=list(answer.passage_cosines.values()),
        embedder_covers_language=embedder_covers_language,
    )


class AnswerabilityGate:
    """Fitted parameters, validated on load; ``probability`` is numpy arithmetic only."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        _validate(params)
        self.params = dict(params)
        self._mean = np.asarray(params["mean"], dtype=np.float64)
        self._scale = np.asarray(params["scale"], dtype=np.float64)
        self._coef = np.asarray(params["coef"], dtype=np.float64)
        self._intercept = float(params["intercept"])
        self.threshold = float(params["threshold"])

    @classmethod
    def from_json(cls, path: str | Path = DEFAULT_GATE_PATH) -> AnswerabilityGate:
        with open(path, encoding="utf-8") as handle:
            try:
                params = json.load(handle)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{path}: not valid JSON ({exc})") from exc
        try:
            return cls(params)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc

    def with_threshold(self, threshold: float) -> AnswerabilityGate:
        """The same fitted model with another operating point (``GENERATOR_ANSWERABILITY_THRESHOLD``)."""
        return AnswerabilityGate({**self.params, "threshold": threshold})

    def to_json(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.params, indent=2) + "\n", encoding="utf-8")

    def probability(self, features: AnswerabilityFeatures) -> float:
        """P(answerable) for one question."""
        return self.probability_of_vector(features.feature_vector())

    def probability_of_vector(self, vector: np.ndarray) -> float:
        """P(answerable) for a feature vector in :data:`FEATURE_NAMES` order."""
        z = (np.asarray(vector, dtype=np.float64) - self._mean) / self._scale
        return _sigmoid(float(z @ self._coef) + self._intercept)

    def should_abstain(self, features: AnswerabilityFeatures) -> bool:
        return self.probability(features) < self.threshold


def _validate(params: Mapping[str, Any]) -> None:
    validate_logistic(
        params, format_name=GATE_FORMAT, version=GATE_VERSION, features=FEATURE_NAMES,
        refit="ragctl calibrate",
    )
    threshold = params.get("threshold")
    if not finite(threshold) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be a number within [0, 1], got {threshold!r}")


def _sigmoid(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


# --------------------------------------------------------------------------------------- fitting


def fit_gate(
    feature_rows: Sequence[AnswerabilityFeatures] | np.ndarray,
    labels: Sequence[int] | np.ndarray,
    *,
    groups: Sequence[str] | None = None,
    max_answerable_abstention: float | None = None,
    threshold_strategy: str = "f1",
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """Fit the gate's parameters (offline; needs scikit-learn) and return them as the JSON object.

    ``groups`` (each row's dataset, e.g. ``xquad-ro``; None = one group): every class of every group
    weighs the same in the fit and in the threshold, so neither a large dataset nor a dataset's share of
    unanswerable questions sets the operating point. The threshold rule (``threshold_strategy`` "f1"):
    the best weighted F1 of abstaining, among the thresholds that abstain on at most
    ``max_answerable_abstention`` of the answerable questions (weighted alike; None = no bound). It is
    chosen on the fitting data itself, so ``fitted_on["fit"]`` reports in-sample figures: judge the gate
    on questions it was not fitted on.
    """
    from sklearn.linear_model import LogisticRegression  # offline only: not a serving dependency

    if threshold_strategy != "f1":
        raise ValueError(f"unknown threshold_strategy {threshold_strategy!r}; supported: 'f1'")
    if max_answerable_abstention is not None and not 0.0 < max_answerable_abstention <= 1.0:
        raise ValueError(f"max_answerable_abstention must be within (0, 1], got {max_answerable_abstention!r}")
    x = np.asarray(
        [row.feature_vector() if isinstance(row, AnswerabilityFeatures) else row for row in feature_rows],
        dtype=np.float64,
    )
    y = np.asarray(labels, dtype=int)
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES) or len(x) != len(y):
        raise ValueError(f"need an (n, {len(FEATURE_NAMES)}) feature matrix and n labels, got {x.shape} and {y.shape}")
    if set(np.unique(y)) != {0, 1}:
        raise ValueError("labels must contain both classes, 1 = answerable and 0 = unanswerable")
    names = [""] * len(y) if groups is None else [str(g) for g in groups]
    if len(names) != len(y):
        raise ValueError(f"{len(names)} groups for {len(y)} rows")
    weights = _balanced_weights(names, y)
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature carries no signal; keep the division defined
    model = LogisticRegression(max_iter=1000).fit((x - mean) / scale, y, sample_weight=weights)
    params: dict[str, Any] = {
        "format": GATE_FORMAT,
        "version": GATE_VERSION,
        "features": list(FEATURE_NAMES),
        "mean": mean.tolist(),
        "scale": scale.tolist(),
        "coef": model.coef_[0].tolist(),
        "intercept": float(model.intercept_[0]),
        "threshold": 0.5,
        "fitted_on": dict(provenance),
    }
    probabilities = np.asarray([_sigmoid(float(v)) for v in model.decision_function((x - mean) / scale)])
    threshold, f1 = _best_abstention_threshold(probabilities, y, weights, max_answerable_abstention)
    params["threshold"] = threshold
    params["fitted_on"]["fit"] = {
        "rows": int(len(y)),
        "answerable": int(y.sum()),
        "unanswerable": int(len(y) - y.sum()),
        "groups": sorted(set(names)) if groups is not None else None,
        "in_sample_abstention_f1": round(f1, 4),
        "threshold_strategy": threshold_strategy,
        "threshold_rule": threshold_rule(max_answerable_abstention),
    }
    AnswerabilityGate(params)  # what is returned must load
    return params


def threshold_rule(max_answerable_abstention: float | None) -> str:
    """The threshold rule in words, as ``fitted_on`` records it."""
    bound = (
        f", abstaining on at most {max_answerable_abstention:.0%} of the answerable questions"
        if max_answerable_abstention is not None
        else ""
    )
    return f"best F1 of abstaining{bound}; every class of every dataset weighs the same"


def _balanced_weights(groups: Sequence[str], labels: np.ndarray) -> np.ndarray:
    """Per row, 1 / the size of its (group, class), scaled to sum to the number of rows."""
    keys = list(zip(groups, labels.tolist()))
    sizes: dict[tuple[str, int], int] = {}
    for key in keys:
        sizes[key] = sizes.get(key, 0) + 1
    weights = np.array([1.0 / sizes[key] for key in keys])
    return weights * len(weights) / weights.sum()


def _best_abstention_threshold(
    probabilities: np.ndarray, labels: np.ndarray, weights: np.ndarray, max_answerable_abstention: float | None
) -> tuple[float, float]:
    """The threshold (abstain when p < t) with the best weighted F1 for the unanswerable class among
    those abstaining on at most ``max_answerable_abstention`` of the answerable weight; among ties the
    lowest, i.e. the one abstaining least. Candidates are midpoints between observed values."""
    values = np.unique(probabilities)
    candidates = np.concatenate([[0.0], (values[:-1] + values[1:]) / 2, [1.0]]) if len(values) > 1 else np.array([0.5])
    unanswerable = labels == 0
    answerable_weight = float(weights[~unanswerable].sum())
    best_t, best_f1 = 0.0, -1.0
    for t in candidates:
        abstain = probabilities < t
        tp = float(weights[abstain & unanswerable].sum())
        fp = float(weights[abstain & ~unanswerable].sum())
        fn = float(weights[~abstain & unanswerable].sum())
        if max_answerable_abstention is not None and fp > max_answerable_abstention * answerable_weight + 1e-9:
            continue
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 > best_f1:
            best_t, best_f1 = float(t), f1
    return best_t, best_f1
