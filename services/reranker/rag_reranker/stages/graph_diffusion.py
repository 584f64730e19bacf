"""Score diffusion over a candidate-similarity graph (personalised PageRank).

Why: a cross-/bi-encoder scores each passage in isolation. Passages that are strongly similar to
several other high-scoring passages are likely on-topic even if their own score is a little low
(and an isolated high score is more likely a fluke). Personalised PageRank spreads the relevance
scores along the similarity graph: the personalisation vector carries the scores, the random walk
carries the neighbourhood evidence, and ``alpha`` trades one against the other.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_EPS = 1e-9


@dataclass(frozen=True)
class DiffusionResult:
    """``order``: candidate indices by descending PageRank (ties keep input order).

    ``pagerank``: shape ``(n,)``, non-negative, sums to 1 (empty for n = 0).
    ``iterations``: power-iteration steps run (0 when no iteration was needed: n <= 1 or alpha = 0).
    """

    order: np.ndarray
    pagerank: np.ndarray
    iterations: int


class GraphDiffusionReranker:
    """Personalised PageRank over the complete cosine-similarity graph of the candidates.

    Graph: nodes are candidates; the weight of edge (i, j), i != j, is ``max(cos(e_i, e_j), 0)``
    (negative similarity is "unrelated", not a negative vote, and PageRank needs non-negative
    weights). No self loops. With ``top_k_edges = k`` each node keeps only its k strongest outgoing
    edges (ties broken by index), which sparsifies the walk to true near neighbours.

    Transition matrix ``A`` is row-normalised. A *dangling* row (a node with no positive edge, e.g.
    orthogonal to everything or a zero embedding) has its mass sent to the personalisation vector
    ``p`` ("teleport-only"), not spread uniformly: a node with no neighbours should not vote for
    arbitrary candidates, and this keeps ``A`` row-stochastic so ``pi`` stays a distribution.

    Personalisation: ``p_i = s_i / sum_j s_j`` with ``s = scores - min(scores) + eps`` so any score
    scale (logits, cosines in [-1, 1], probabilities) works; all-equal scores give uniform ``p``.

    Iteration: ``pi <- alpha * A^T pi + (1 - alpha) * p`` from ``pi = p`` until the L1 change is
    below ``tol`` or ``max_iter`` steps have run (converges geometrically at rate ``alpha``).
    """

    def __init__(
        self,
        alpha: float,
        tol: float = 1e-6,
        max_iter: int = 100,
        top_k_edges: int | None = None,
    ) -> None:
        if not 0.0 <= alpha < 1.0:
            raise ValueError(f"alpha must be in [0, 1), got {alpha}")
        if tol <= 0.0:
            raise ValueError(f"tol must be positive, got {tol}")
        if max_iter < 1:
            raise ValueError(f"max_iter must be >= 1, got {max_iter}")
        if top_k_edges is not None and top_k_edges < 1:
            raise ValueError(f"top_k_edges must be >= 1 or None, got {top_k_edges}")
        self.alpha = alpha
        self.tol = tol
        self.max_iter = max_iter
        self.top_k_edges = top_k_edges

    # -- building blocks (public so tests and the bench can check them independently) --

    @staticmethod
    def personalisation(scores: np.ndarray) -> np.ndarray:
        """Scores shifted positive and normalised to sum to 1."""
        scores = np.asarray(scores, dtype=np.float64)
        if scores.size == 0:
            return scores.copy()
        shifted = scores - scores.min() + _EPS
        return shifted / shifted.sum()

    def weight_matrix(self, embeddings: np.ndarray) -> np.ndarray:
        """Non-negative cosine weights, zero diagonal, optionally top-k per row. Shape ``(n, n)``."""
        e = np.asarray(embeddings, dtype=np.float64)
        n = e.shape[0]
        norms = np.linalg.norm(e, axis=1, keepdims=True)
        unit = np.divide(e, norms, out=np.zeros_like(e), where=norms > 0)
        w = unit @ unit.T
        np.clip(w, 0.0, None, out=w)
        np.fill_diagonal(w, 0.0)
        k = self.top_k_edges
        if k is not None and k < n - 1:
            # Indices of the k largest per row; stable sort on -w breaks ties by lower index.
            keep = np.argsort(-w, axis=1, kind="stable")[:, :k]
            mask = np.zeros_like(w, dtype=bool)
            np.put_along_axis(mask, keep, True, axis=1)
            w = np.where(mask, w, 0.0)
        return w

    @staticmethod
    def transition_matrix(weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Row-normalised ``A`` and a boolean mask of dangling rows (all-zero rows of ``A``)."""
        row_sums = weights.sum(axis=1)
        dangling = row_sums <= 0.0
        a = np.divide(weights, row_sums[:, None], out=np.zeros_like(weights), where=~dangling[:, None])
        return a, dangling

    # -- the stage --

    def rerank(self, scores: np.ndarray, embeddings: np.ndarray) -> DiffusionResult:
        scores = np.asarray(scores, dtype=np.float64)
        embeddings = np.asarray(embeddings, dtype=np.float64)
        if scores.ndim != 1:
            raise ValueError(f"scores must be 1-D, got shape {scores.shape}")
        n = scores.shape[0]
        if embeddings.ndim != 2 or embeddings.shape[0] != n:
            raise ValueError(f"embeddings must have shape ({n}, d), got {embeddings.shape}")
        if not (np.all(np.isfinite(scores)) and np.all(np.isfinite(embeddings))):
            raise ValueError("scores and embeddings must be finite")
        if n == 0:
            return DiffusionResult(order=np.zeros(0, dtype=np.intp), pagerank=np.zeros(0), iterations=0)
        if n == 1:
            return DiffusionResult(order=np.zeros(1, dtype=np.intp), pagerank=np.ones(1), iterations=0)

        p = self.personalisation(scores)
        iterations = 0
        pi = p.copy()
        if self.alpha > 0.0:
            a, dangling = self.transition_matrix(self.weight_matrix(embeddings))
            at = np.ascontiguousarray(a.T)
            teleport = (1.0 - self.alpha) * p
            for iterations in range(1, self.max_iter + 1):
                # Dangling mass goes back to p (teleport-only), so sum(pi) stays 1.
                new = self.alpha * (at @ pi + pi[dangling].sum() * p) + teleport
                delta = np.abs(new - pi).sum()
                pi = new
                if delta < self.tol:
                    break
        pi = pi / pi.sum()  # remove float drift
        order = np.argsort(-pi, kind="stable")
        return DiffusionResult(order=order, pagerank=pi, iterations=iterations)
