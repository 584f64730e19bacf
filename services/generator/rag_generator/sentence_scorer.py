"""P(a sentence answers the question): a logistic model over :mod:`rag_generator.sentence_features`.

Its parameters are data, not code, the way the answerability gate's are (``answerability.py``): a
versioned JSON file written by :func:`fit_sentence_scorer` (``ragctl fit-scorer``) on sentences of
shared data labelled through the served chain (``rag_eval.sentence_scorer_fitting``), loaded by
:class:`SentenceScorer` with numpy only and validated on load. The file also carries the answer's
selection margins (``neighbour_margin``, ``other_margin``), chosen on the same fit half: they are in
the model's probability units, so they belong to the fitted model, not to code.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from rag_generator.logistic_params import finite, validate_logistic
from rag_generator.sentence_features import FEATURE_NAMES

__all__ = [
    "DEFAULT_SCORER_PATH",
    "SCORER_FORMAT",
    "SCORER_VERSION",
    "SentenceScorer",
    "default_scorer",
    "NON_POSITIVE",
    "fit_sentence_scorer",
]

SCORER_FORMAT = "rag-sentence-scorer"
SCORER_VERSION = 1
#: The shipped parameters (``ragctl fit-scorer`` writes them).
DEFAULT_SCORER_PATH = Path(__file__).with_name("data") / "sentence_scorer.json"


class SentenceScorer:
    """Fitted parameters, validated on load; ``probabilities`` is numpy arithmetic only."""

    def __init__(self, params: Mapping[str, Any]) -> None:
        _validate(params)
        self.params = dict(params)
        self._mean = np.asarray(params["mean"], dtype=np.float64)
        self._scale = np.asarray(params["scale"], dtype=np.float64)
        self._coef = np.asarray(params["coef"], dtype=np.float64)
        self._intercept = float(params["intercept"])
        self.neighbour_margin = float(params["neighbour_margin"])
        self.other_margin = float(params["other_margin"])

    @classmethod
    def from_json(cls, path: str | Path = DEFAULT_SCORER_PATH) -> SentenceScorer:
        try:
            with open(path, encoding="utf-8") as handle:
                params = json.load(handle)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}: not valid JSON ({exc})") from exc
        except FileNotFoundError as exc:
            raise ValueError(f"{path}: no sentence scorer there (fit one with `ragctl fit-scorer`)") from exc
        try:
            return cls(params)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from exc

    def probabilities(self, matrix: np.ndarray) -> np.ndarray:
        """P(answers) per row of an ``(n, len(FEATURE_NAMES))`` matrix in :data:`FEATURE_NAMES` order."""
        x = np.asarray(matrix, dtype=np.float64).reshape(-1, len(FEATURE_NAMES))
        z = ((x - self._mean) / self._scale) @ self._coef + self._intercept
        return 1.0 / (1.0 + np.exp(-np.clip(z, -500.0, 500.0)))


@cache
def default_scorer() -> SentenceScorer:
    """The shipped scorer, read once per process."""
    return SentenceScorer.from_json(DEFAULT_SCORER_PATH)


def _validate(params: Mapping[str, Any]) -> None:
    validate_logistic(params, format_name=SCORER_FORMAT, version=SCORER_VERSION, features=FEATURE_NAMES,
                      refit="ragctl fit-scorer")
    for key in ("neighbour_margin", "other_margin"):
        value = params.get(key)
        if not finite(value) or not -1.0 <= value <= 1.0:
            raise ValueError(f"{key} must be a number within [-1, 1], got {value!r}")


# --------------------------------------------------------------------------------------- fitting


#: Features that say a sentence is not evidence (issue 32: never a question, a heading alone, navigation,
#: or a sentence naming another edition than the one asked): their fitted weights may only lower the
#: score. The shared data holds few such sentences (a few dozen counterfactual years in a fit half),
#: and unconstrained, half A's noise gave ``contradicts`` a positive weight.
NON_POSITIVE = ("question", "heading", "navigation", "contradicts")


def fit_sentence_scorer(
    matrix: np.ndarray,
    labels: Sequence[int] | np.ndarray,
    *,
    sample_weight: Sequence[float] | np.ndarray | None = None,
    neighbour_margin: float,
    other_margin: float,
    provenance: Mapping[str, Any],
    c: float = 1.0,
) -> dict[str, Any]:
    """The scorer's parameters as the JSON object (offline; needs scipy).

    L2-regularised logistic regression on standardised features (``c``: scikit-learn's ``C``), the
    weights of :data:`NON_POSITIVE` bounded at 0 (L-BFGS-B). Not class-balanced: the score is meant as
    P(answers) among the sentences the answerer sees, which the answerability gate reads;
    ``sample_weight`` balances datasets and languages instead. The margins are chosen by the caller
    on the same rows (``rag_eval.sentence_scorer_fitting``)."""
    from scipy.optimize import minimize  # offline only: not a serving dependency

    x = np.asarray(matrix, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    if x.ndim != 2 or x.shape[1] != len(FEATURE_NAMES) or len(x) != len(y):
        raise ValueError(f"need an (n, {len(FEATURE_NAMES)}) feature matrix and n labels, got {x.shape} and {y.shape}")
    if set(np.unique(y)) != {0.0, 1.0}:
        raise ValueError("labels must contain both classes, 1 = the sentence answers and 0 = it does not")
    weights = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    mean = np.average(x, axis=0, weights=weights)
    scale = x.std(axis=0)
    scale[scale == 0] = 1.0  # a constant feature carries no signal; keep the division defined
    z = (x - mean) / scale
    n = len(FEATURE_NAMES)

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        logits = z @ theta[:n] + theta[n]
        # log(1 + e^t) - y t, summed with the row weights; gradient (sigmoid - y) weighted
        value = float(np.sum(weights * (np.logaddexp(0.0, logits) - y * logits)))
        residual = weights * (1.0 / (1.0 + np.exp(-np.clip(logits, -500.0, 500.0))) - y)
        coef = theta[:n]
        gradient = np.concatenate([c * (z.T @ residual) + coef, [c * residual.sum()]])
        return c * value + 0.5 * float(coef @ coef), gradient

    bounds = [(None, 0.0) if name in NON_POSITIVE else (None, None) for name in FEATURE_NAMES] + [(None, None)]
    result = minimize(loss, np.zeros(n + 1), jac=True, method="L-BFGS-B", bounds=bounds, options={"maxiter": 5000})
    if not result.success:
        raise ValueError(f"the scorer's fit did not converge: {result.message}")
    params: dict[str, Any] = {
        "format": SCORER_FORMAT,
        "version": SCORER_VERSION,
        "features": list(FEATURE_NAMES),
        "mean": mean.tolist(),
        "scale": scale.tolist(),
        "coef": [float(v) for v in result.x[:n]],
        "intercept": float(result.x[n]),
        "neighbour_margin": float(neighbour_margin),
        "other_margin": float(other_margin),
        "fitted_on": {**provenance, "rows": int(len(y)), "positives": int(y.sum()),
                      "non_positive_weights": list(NON_POSITIVE)},
    }
    SentenceScorer(params)  # what is returned must load
    return params
