"""Statistics for comparing two pipelines on the same queries: the paired bootstrap confidence
interval of a mean difference, and latency percentiles."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

#: Resamples and seed used unless the caller says otherwise (results are reproducible).
DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 0


@dataclass(frozen=True, slots=True)
class DeltaCI:
    """Mean of ``a - b`` over paired queries and its bootstrap confidence interval."""

    delta: float
    low: float
    high: float
    n: int
    confidence: float = 0.95

    @property
    def noise(self) -> bool:
        """True when the interval contains 0: the difference is not distinguishable from chance."""
        return self.low <= 0.0 <= self.high

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "noise": self.noise}


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> DeltaCI:
    """Percentile bootstrap of ``mean(a - b)``: the queries are resampled with replacement
    ``resamples`` times (the same resample for both systems: paired), seeded for reproducibility."""
    x = np.asarray(a, dtype=np.float64)
    y = np.asarray(b, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"paired samples must be 1-D of equal length, got {x.shape} and {y.shape}")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    n = int(x.shape[0])
    if n == 0:
        return DeltaCI(0.0, 0.0, 0.0, 0, confidence)
    delta = x - y
    rng = np.random.default_rng(seed)
    means = delta[rng.integers(0, n, size=(resamples, n))].mean(axis=1)
    tail = (1.0 - confidence) / 2.0 * 100.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return DeltaCI(float(delta.mean()), float(low), float(high), n, confidence)


def paired_delta(
    system: Mapping[str, float],
    baseline: Mapping[str, float],
    **kwargs: Any,
) -> DeltaCI:
    """:func:`paired_bootstrap` over the query ids both per-query mappings have (in sorted order)."""
    shared = sorted(set(system) & set(baseline))
    return paired_bootstrap([system[q] for q in shared], [baseline[q] for q in shared], **kwargs)


def percentiles(values: Iterable[float], qs: Sequence[float] = (50, 95)) -> dict[str, float | None]:
    """``{"p50": ..., "p95": ...}`` (numpy's linear interpolation); None for no values."""
    data = np.asarray(list(values), dtype=np.float64)
    if data.size == 0:
        return {f"p{q:g}": None for q in qs}
    return {f"p{q:g}": float(v) for q, v in zip(qs, np.percentile(data, list(qs)))}
