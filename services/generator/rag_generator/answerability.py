"""Should the generator answer at all? A calibrated gate instead of "did the quotes verify".

A logistic model over a handful of scores the pipeline already has (no extra model call): how well
the best sentence matches the query, how clearly it beats the runner-up, and how confident
retrieval was. Its parameters are data, not code: a versioned JSON file written by
:func:`fit_gate` on labelled questions, loaded by :class:`AnswerabilityGate` with numpy only, so the
service needs no scikit-learn and a refit is a file change that names its own provenance.

Labels and direction: 1 = answerable from the passages, 0 = not. ``probability`` is P(answerable);
the generator abstains when it is below ``threshold``, which :func:`fit_gate` picks to maximise the
F1 of *abstaining* (the class the gate exists for). Retrieval scores are on whatever scale the
stage before the generator uses (fused retriever score, cross-encoder score, ...): a gate is only
valid for the pipeline it was fitted on, which is why ``fitted_on`` must say what that was.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = [
    "DEFAULT_GATE_PATH",
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
GATE_VERSION = 1
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

    def feature_vector(self) -> np.ndarray:
        """float64 vector in :data:`FEATURE_NAMES` order."""
        return np.asarray(astuple(self), dtype=np.float64)


FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in fields(AnswerabilityFeatures))


def answerability_features(
    *,
    sentence_scores: Sequence[float],
    sentence_cosines: Sequence[float],
    retrieval_scores: Sequence[float],
    passage_cosines: Sequence[float],
) -> AnswerabilityFeatures:
    """The features from raw scores (any order); missing inputs count as 0, i.e. "no evidence"."""
    scores = sorted(sentence_scores, reverse=True)
    retrieval = sorted(retrieval_scores, reverse=True)
    return AnswerabilityFeatures(
        best_sentence_score=float(scores[0]) if scores else 0.0,
        best_sentence_cosine=float(max(sentence_cosines, default=0.0)),
        sentence_score_margin=float(scores[0] - scores[1]) if len(scores) > 1 else 0.0,
        top_retrieval_score=float(retrieval[0]) if retrieval else 0.0,
        retrieval_score_margin=float(retrieval[0] - retrieval[1]) if len(retrieval) > 1 else 0.0,
        best_passage_cosine=float(max(passage_cosines, default=0.0)),
    )


class _Scored(Protocol):
    score: float
    cosine: float


class _Answer(Protocol):
    @property
    def candidates(self) -> Sequence[_Scored]: ...
    @property
    def passage_cosines(self) -> Mapping[int, float]: ...


def features_from_answer(answer: _Answer, retrieval_scores: Sequence[float]) -> AnswerabilityFeatures:
    """The features of an ``ExtractiveAnswer`` and the scores of the passages it was drawn from."""
    return answerability_features(
        sentence_scores=[c.score for c in answer.candidates],
        sentence_cosines=[c.cosine for c in answer.candidates],
        retrieval_scores=retrieval_scores,
        passage_cosines=list(answer.passage_cosines.values()),
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
    if not isinstance(params, Mapping):
        raise ValueError("gate parameters must be a JSON object")
    if params.get("format") != GATE_FORMAT:
        raise ValueError(f"format must be {GATE_FORMAT!r}, got {params.get('format')!r}")
    if params.get("version") != GATE_VERSION:
        raise ValueError(f"unsupported gate version {params.get('version')!r}; this code reads version {GATE_VERSION}")
    names = params.get("features")
    if list(names or []) != list(FEATURE_NAMES):
        raise ValueError(
            f"feature names do not match this code: file has {names!r}, code computes {list(FEATURE_NAMES)!r} "
            "(refit the gate with this code's features)"
        )
    n = len(FEATURE_NAMES)
    for key in ("mean", "scale", "coef"):
        values = params.get(key)
        if not isinstance(values, list) or len(values) != n or not all(_finite(v) for v in values):
            raise ValueError(f"{key} must be a list of {n} finite numbers, got {values!r}")
    if not all(v > 0 for v in params["scale"]):
        raise ValueError(f"scale must be positive, got {params['scale']!r}")
    if not _finite(params.get("intercept")):
        raise ValueError(f"intercept must be a finite number, got {params.get('intercept')!r}")
    threshold = params.get("threshold")
    if not _finite(threshold) or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold must be a number within [0, 1], got {threshold!r}")


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


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
    threshold_strategy: str = "f1",
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """Fit the gate's parameters (offline; needs scikit-learn) and return them as the JSON object.

    Class weights are balanced because labelled sets rarely match production's share of
    unanswerable questions; the threshold then moves the operating point. The threshold is chosen on
    the fitting data itself, so ``fitted_on["fit"]`` reports in-sample figures: judge the gate on
    questions it was not fitted on.
    """
    from sklearn.linear_model import LogisticRegression  # offline only: not a serving dependency

    if threshold_strategy != "f1":
        raise ValueError(f"unknown threshold_strategy {threshold_strategy!r}; supported: 'f1'")
    x = np.asarray(
        [row.feature_vector() if isinstance(row, AnswerabilityFeatures) else row for row in feature_rows],
        dtype=np.float64,
    )
    y = np.asarray(labels, dtype=int)
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES) or len(x) != len(y):
        raise ValueError(f"need an (n, {len(FEATURE_NAMES)}) feature matrix and n labels, got {x.shape} and {y.shape}")
    if set(np.unique(y)) != {0, 1}:
        raise ValueError("labels must contain both classes, 1 = answerable and 0 = unanswerable")
    mean = x.mean(axis=0)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature carries no signal; keep the division defined
    model = LogisticRegression(class_weight="balanced", max_iter=1000).fit((x - mean) / scale, y)
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
    threshold, f1 = _best_abstention_threshold(probabilities, y)
    params["threshold"] = threshold
    params["fitted_on"]["fit"] = {
        "rows": int(len(y)),
        "answerable": int(y.sum()),
        "unanswerable": int(len(y) - y.sum()),
        "in_sample_abstention_f1": round(f1, 4),
        "threshold_strategy": threshold_strategy,
    }
    AnswerabilityGate(params)  # what is returned must load
    return params


def _best_abstention_threshold(probabilities: np.ndarray, labels: np.ndarray) -> tuple[float, float]:
    """The threshold (abstain when p < t) with the best F1 for the unanswerable class; among ties
    the lowest, i.e. the one abstaining least. Candidates are midpoints between observed values."""
    values = np.unique(probabilities)
    candidates = np.concatenate([[0.0], (values[:-1] + values[1:]) / 2, [1.0]]) if len(values) > 1 else np.array([0.5])
    unanswerable = labels == 0
    best_t, best_f1 = 0.5, -1.0
    for t in candidates:
        abstain = probabilities < t
        tp = int(np.sum(abstain & unanswerable))
        fp = int(np.sum(abstain & ~unanswerable))
        fn = int(np.sum(~abstain & unanswerable))
        f1 = 2 * tp / (2 * tp + fp + fn) if tp else 0.0
        if f1 > best_f1:
            best_t, best_f1 = float(t), f1
    return best_t, best_f1
