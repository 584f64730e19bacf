"""Personalised PageRank over a small sparse graph (scipy.sparse), by power iteration.

``π = (1 − d)·p + d·Pᵀπ`` with ``P`` the row-normalised adjacency (a node without edges sends its
mass back to ``p``, so π stays a distribution), ``p`` the personalisation (seed weights, normalised)
and ``d`` the damping: the probability of following an edge rather than jumping back to a seed.
Iterates until the L1 change is below ``tol`` or ``max_iter`` steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp


def personalised_pagerank(
    n: int,
    edges: Sequence[tuple[int, int]],
    seeds: dict[int, float],
    damping: float,
    *,
    tol: float = 1e-6,
    max_iter: int = 50,
) -> np.ndarray:
    """π over nodes ``0 … n-1`` for undirected ``edges`` (each pair once; weight 1) and ``seeds``
    (node → non-negative weight, at least one positive)."""
    if not 0.0 <= damping < 1.0:
        raise ValueError(f"damping must be in [0, 1), got {damping}")
    p = np.zeros(n, dtype=np.float64)
    for node, weight in seeds.items():
        p[node] += max(0.0, float(weight))
    total = p.sum()
    if total <= 0:
        raise ValueError("personalised PageRank needs a positive seed weight")
    p /= total
    if edges:
        rows = np.fromiter((a for a, b in edges), dtype=np.int64, count=len(edges))
        cols = np.fromiter((b for a, b in edges), dtype=np.int64, count=len(edges))
        adjacency = sp.coo_matrix(
            (np.ones(2 * len(edges)), (np.concatenate([rows, cols]), np.concatenate([cols, rows]))), shape=(n, n)
        ).tocsr()
        adjacency.sum_duplicates()
        adjacency.data[:] = 1.0
    else:
        adjacency = sp.csr_matrix((n, n))
    degree = np.asarray(adjacency.sum(axis=1)).ravel()
    inverse = np.divide(1.0, degree, out=np.zeros_like(degree), where=degree > 0)
    transition_t = (sp.diags(inverse) @ adjacency).T.tocsr()
    dangling = degree == 0
    pi = p.copy()
    for _ in range(max_iter):
        following = transition_t @ pi
        following += pi[dangling].sum() * p  # dead ends jump back to the seeds
        updated = (1.0 - damping) * p + damping * following
        if np.abs(updated - pi).sum() < tol:
            return updated
        pi = updated
    return pi
