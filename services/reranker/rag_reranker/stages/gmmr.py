"""Geometric Maximal Marginal Relevance (gMMR, as in DF-RAG): relevant *and* diverse top-k.

Why: the top-k by relevance alone is often k paraphrases of one passage, which wastes the
generator's context. Classic MMR penalises a candidate by its maximum similarity to any already
selected item; gMMR instead rewards the Euclidean distance of the candidate (unit vector) from the
*centroid* of the selected set, so it pushes the selection to cover new directions as a whole, and
``sqrt(2 - 2 cos)`` is exactly the chordal distance between unit vectors, in [0, 2].
The class is ``GeometricMMR``; gMMR (this module's and the wire stage's name) is its abbreviation.
"""

from __future__ import annotations

import numpy as np


def _unit_rows(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norms, out=np.zeros_like(x), where=norms > 0)


class GeometricMMR:
    """Greedy gMMR selection.

    Step 1 takes the candidate most similar to the query. Each later step takes, among the
    remaining candidates ``c``, the argmax of

        lambda_ * cos(q, c) + (1 - lambda_) * sqrt(2 - 2 * cos(c, centroid))

    where ``centroid`` is the mean of the selected (unit) vectors, *re-normalised to unit length*.
    Normalising is a choice: the raw mean shrinks as the selection spreads out, which would make the
    distance term depend on how dispersed the selection already is rather than on its direction;
    on the unit sphere the term is a true chordal distance in [0, 2], on the same footing as the
    cosine. If the selected vectors cancel out (zero mean), the centroid is the zero vector, cos is
    0 and every candidate gets the same distance sqrt(2), so relevance alone decides that step.

    ``lambda_ = 1`` is pure relevance order; smaller values favour diversity. Ties go to the lower
    index (``np.argmax``), so results are deterministic.
    """

    def __init__(self, lambda_: float = 0.5) -> None:
        if not 0.0 <= lambda_ <= 1.0:
            raise ValueError(f"lambda_ must be in [0, 1], got {lambda_}")
        self.lambda_ = lambda_

    def select(
        self, query: np.ndarray, candidates: np.ndarray, k: int, relevance: np.ndarray | None = None
    ) -> list[int]:
        """Indices of up to ``min(k, n)`` distinct candidates in selection order.

        ``relevance``: per-candidate relevance to use instead of ``cos(q, c)`` (e.g. a cross-encoder's
        or the hybrid retriever's scores, scaled to [0, 1]); the first pick is then the most relevant.
        """
        q, c = self._check(query, candidates, k)
        return self._select(q, c, k, self.lambda_, self._relevance(q, c, relevance))

    def lambda_sweep(
        self,
        query: np.ndarray,
        candidates: np.ndarray,
        k: int,
        lambdas: tuple[float, ...],
        relevance: np.ndarray | None = None,
    ) -> dict[float, list[int]]:
        """Selections for several ``lambdas`` (for a query-adaptive lambda policy to choose from; the
        service sweeps its settings' ``adaptive_lambdas``).

        Normalisation and the query similarities are computed once and shared by all lambdas.
        """
        for lam in lambdas:
            if not 0.0 <= lam <= 1.0:
                raise ValueError(f"lambdas must be in [0, 1], got {lam}")
        q, c = self._check(query, candidates, k)
        rel = self._relevance(q, c, relevance)
        return {float(lam): self._select(q, c, k, float(lam), rel) for lam in lambdas}

    @staticmethod
    def _relevance(q: np.ndarray, c: np.ndarray, relevance: np.ndarray | None) -> np.ndarray:
        if relevance is None:
            return c @ q
        rel = np.asarray(relevance, dtype=np.float64)
        if rel.shape != (c.shape[0],) or not np.all(np.isfinite(rel)):
            raise ValueError(f"relevance must be {c.shape[0]} finite values, got shape {rel.shape}")
        return rel

    @staticmethod
    def _check(query: np.ndarray, candidates: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.asarray(query, dtype=np.float64)
        c = np.asarray(candidates, dtype=np.float64)
        if q.ndim != 1:
            raise ValueError(f"query must be 1-D, got shape {q.shape}")
        if c.ndim != 2 or (c.shape[0] > 0 and c.shape[1] != q.shape[0]):
            raise ValueError(f"candidates must have shape (n, {q.shape[0]}), got {c.shape}")
        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(c))):
            raise ValueError("query and candidates must be finite")
        return _unit_rows(q), _unit_rows(c)

    @staticmethod
    def _select(q: np.ndarray, c: np.ndarray, k: int, lam: float, relevance: np.ndarray) -> list[int]:
        n = c.shape[0]
        k = min(k, n)
        if k == 0:
            return []
        first = int(np.argmax(relevance))
        selected = [first]
        available = np.ones(n, dtype=bool)
        available[first] = False
        centroid_sum = c[first].copy()
        for _ in range(k - 1):
            norm = np.linalg.norm(centroid_sum)
            centroid = centroid_sum / norm if norm > 1e-12 else np.zeros_like(centroid_sum)
            cos_centroid = c @ centroid
            distance = np.sqrt(np.clip(2.0 - 2.0 * cos_centroid, 0.0, None))
            objective = lam * relevance + (1.0 - lam) * distance
            objective[~available] = -np.inf
            nxt = int(np.argmax(objective))
            selected.append(nxt)
            available[nxt] = False
            centroid_sum += c[nxt]
        return selected
