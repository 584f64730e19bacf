"""The learned fusion model as the retriever serves it: a logistic regression over
``rag_retriever.fusion_features``, read from a JSON parameter file and scored with numpy (the
retriever does not need scikit-learn; ``ragctl train-fusion`` fits and writes the file).

The file (``SCHEMA_VERSION`` 1)::

    {"schema_version": 1, "kind": "logistic_regression",
     "features": ["dense_z", ...],          # a subset of FEATURE_NAMES, in that order
     "mean": [...], "scale": [...],         # global standardisation fitted on the training rows
     "weights": [...], "intercept": 0.1,
     "training": {...}, "cross_validation": {...}}   # provenance, not read here

A candidate's score is ``sigmoid(weights · ((x - mean) / scale) + intercept)``, in (0, 1). A file
that is missing, unreadable, of another schema version or naming a feature this code does not
compute is refused with :class:`FusionModelError` when the retriever starts, never at a search.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_retriever.fusion_features import FEATURE_NAMES

SCHEMA_VERSION = 1
KIND = "logistic_regression"
#: The model shipped with the retriever (trained by ``ragctl train-fusion``; docs/evaluation.md).
SHIPPED_MODEL = Path(__file__).parent / "data" / "fusion_model.json"


class FusionModelError(ValueError):
    """The fusion parameter file cannot be served (the message says why and which file)."""


@dataclass(frozen=True)
class FusionModel:
    features: tuple[str, ...]
    mean: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    intercept: float
    #: Everything else the file holds (training data, CV metrics), kept for the record.
    provenance: dict[str, Any]

    @property
    def columns(self) -> np.ndarray:
        """Positions of the model's features in ``FEATURE_NAMES`` (the full feature matrix)."""
        return np.array([FEATURE_NAMES.index(name) for name in self.features], dtype=np.intp)

    @property
    def uses_ppr(self) -> bool:
        """PageRank is the one costly signal: a search computes it only for a model that reads it."""
        return "ppr_z" in self.features

    def score(self, matrix: np.ndarray) -> np.ndarray:
        """Probability of relevance for each row of a full feature matrix (``feature_matrix``)."""
        if matrix.shape[0] == 0:
            return np.zeros(0)
        x = (matrix[:, self.columns] - self.mean) / self.scale
        return 1.0 / (1.0 + np.exp(-(x @ self.weights + self.intercept)))

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "kind": KIND,
            "features": list(self.features),
            "mean": self.mean.tolist(),
            "scale": self.scale.tolist(),
            "weights": self.weights.tolist(),
            "intercept": float(self.intercept),
            **self.provenance,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any], *, source: str = "fusion model") -> FusionModel:
        if not isinstance(data, dict):
            raise FusionModelError(f"{source}: not a JSON object")
        version = data.get("schema_version")
        if version != SCHEMA_VERSION:
            raise FusionModelError(
                f"{source}: schema_version {version!r}, this retriever reads {SCHEMA_VERSION}; retrain it with "
                "ragctl train-fusion"
            )
        if data.get("kind") != KIND:
            raise FusionModelError(f"{source}: kind {data.get('kind')!r}, expected {KIND!r}")
        features = data.get("features")
        if not isinstance(features, list) or not features:
            raise FusionModelError(f"{source}: 'features' must be a non-empty list of feature names")
        unknown = [name for name in features if name not in FEATURE_NAMES]
        if unknown:
            raise FusionModelError(
                f"{source}: features {unknown} are not computed by this retriever (it has {list(FEATURE_NAMES)})"
            )
        if len(set(features)) != len(features):
            raise FusionModelError(f"{source}: a feature is listed twice")
        arrays = {}
        for key in ("mean", "scale", "weights"):
            try:
                arrays[key] = np.asarray(data[key], dtype=np.float64).reshape(-1)
            except (KeyError, TypeError, ValueError):
                raise FusionModelError(f"{source}: '{key}' must be a list of numbers") from None
            if arrays[key].shape[0] != len(features) or not np.all(np.isfinite(arrays[key])):
                raise FusionModelError(f"{source}: '{key}' needs {len(features)} finite numbers, one per feature")
        if np.any(arrays["scale"] <= 0):
            raise FusionModelError(f"{source}: 'scale' must be positive")
        try:
            intercept = float(data["intercept"])
        except (KeyError, TypeError, ValueError):
            raise FusionModelError(f"{source}: 'intercept' must be a number") from None
        known = {"schema_version", "kind", "features", "mean", "scale", "weights", "intercept"}
        return cls(tuple(features), arrays["mean"], arrays["scale"], arrays["weights"], intercept,
                   {key: value for key, value in data.items() if key not in known})

    @classmethod
    def load(cls, path: str | Path) -> FusionModel:
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise FusionModelError(f"fusion model file {path} does not exist (RETRIEVER_FUSION_MODEL)") from None
        except (OSError, ValueError) as exc:
            raise FusionModelError(f"fusion model file {path} is unreadable: {exc}") from None
        return cls.from_json(data, source=f"fusion model file {path}")
