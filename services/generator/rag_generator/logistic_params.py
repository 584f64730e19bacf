"""The checks every fitted logistic model file of the generator passes on load (the sentence scorer's;
the answerability gate's are the same rules): its format and version, the feature names this code
computes, standardisation and weights of the right length and finite, a positive scale."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["finite", "validate_logistic"]


def finite(value: Any) -> bool:
    """A real number (not a bool), finite."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def validate_logistic(
    params: Mapping[str, Any], *, format_name: str, version: int, features: Sequence[str], refit: str
) -> None:
    """Raise ValueError naming the first thing wrong; ``refit``: the command that writes a valid file."""
    if not isinstance(params, Mapping):
        raise ValueError("parameters must be a JSON object")
    if params.get("format") != format_name:
        raise ValueError(f"format must be {format_name!r}, got {params.get('format')!r}")
    if params.get("version") != version:
        raise ValueError(
            f"unsupported version {params.get('version')!r}; this code reads version {version} (refit it with `{refit}`)"
        )
    names = params.get("features")
    if list(names or []) != list(features):
        raise ValueError(
            f"feature names do not match this code: file has {names!r}, code computes {list(features)!r} "
            f"(refit with this code's features: `{refit}`)"
        )
    n = len(features)
    for key in ("mean", "scale", "coef"):
        values = params.get(key)
        if not isinstance(values, list) or len(values) != n or not all(finite(v) for v in values):
            raise ValueError(f"{key} must be a list of {n} finite numbers, got {values!r}")
    if not all(v > 0 for v in params["scale"]):
        raise ValueError(f"scale must be positive, got {params['scale']!r}")
    if not finite(params.get("intercept")):
        raise ValueError(f"intercept must be a finite number, got {params.get('intercept')!r}")
