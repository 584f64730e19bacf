"""GraphDiffusionReranker against independently computed PageRank on hand-built graphs."""

from __future__ import annotations

import numpy as np
import pytest

from rag_reranker.settings import RerankerSettings
from rag_reranker.stages.graph_diffusion import DiffusionResult, GraphDiffusionReranker

#: The damping a stage uses by default (``RERANKER_DIFFUSION_ALPHA``, the one source).
ALPHA = RerankerSettings().diffusion_alpha


def _reference_pagerank(scores: np.ndarray, embeddings: np.ndarray, alpha: float) -> np.ndarray:
    """Direct solve of (I - alpha A'^T) pi = (1 - alpha) p, written independently of the stage.

    A' is built with explicit loops; dangling rows are replaced by p (teleport-only).
    """
    n = len(scores)
    s = scores - scores.min() + 1e-9
    p = s / s.sum()
    w = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            if i != j:
                cos = embeddings[i] @ embeddings[j] / (np.linalg.norm(embeddings[i]) * np.linalg.norm(embeddings[j]))
                w[i, j] = max(cos, 0.0)
    a = np.zeros((n, n))
    for i in range(n):
        total = w[i].sum()
        a[i] = w[i] / total if total > 0 else p
    return np.linalg.solve(np.eye(n) - alpha * a.T, (1 - alpha) * p)


def _random_case(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.normal(size=n), rng.normal(size=(n, d))


@pytest.mark.parametrize("alpha", [0.5, 0.85, 0.95])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_matches_linear_solve(alpha: float, seed: int) -> None:
    scores, emb = _random_case(7, 5, seed)
    result = GraphDiffusionReranker(alpha=alpha, tol=1e-12, max_iter=2000).rerank(scores, emb)
    expected = _reference_pagerank(scores, emb, alpha)
    np.testing.assert_allclose(result.pagerank, expected, atol=1e-9)
    assert result.pagerank.sum() == pytest.approx(1.0, abs=1e-12)
    assert result.iterations > 1
    np.testing.assert_array_equal(result.order, np.argsort(-expected, kind="stable"))


def test_hand_built_three_node_graph() -> None:
    # 0 and 1 identical direction, 2 orthogonal to both -> 2 is dangling (teleport-only).
    emb = np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    scores = np.array([1.0, 0.0, 2.0])
    result = GraphDiffusionReranker(alpha=0.85, tol=1e-12, max_iter=5000).rerank(scores, emb)
    np.testing.assert_allclose(result.pagerank, _reference_pagerank(scores, emb, 0.85), atol=1e-9)
    assert result.pagerank.sum() == pytest.approx(1.0)


def test_negative_cosines_are_clipped() -> None:
    # 0 and 1 are opposite: no edge between them, so both are dangling.
    emb = np.array([[1.0, 0.0], [-1.0, 0.0]])
    reranker = GraphDiffusionReranker(alpha=ALPHA)
    w = reranker.weight_matrix(emb)
    np.testing.assert_array_equal(w, np.zeros((2, 2)))
    # Everything dangling -> pi equals p exactly.
    result = reranker.rerank(np.array([3.0, 1.0]), emb)
    np.testing.assert_allclose(result.pagerank, reranker.personalisation(np.array([3.0, 1.0])))


def test_weight_matrix_no_self_loops_and_top_k_edges() -> None:
    _, emb = _random_case(6, 4, 3)
    full = GraphDiffusionReranker(alpha=ALPHA).weight_matrix(emb)
    assert np.all(np.diag(full) == 0.0)
    assert np.all(full >= 0.0)
    np.testing.assert_allclose(full, full.T)
    sparse = GraphDiffusionReranker(alpha=ALPHA, top_k_edges=2).weight_matrix(emb)
    assert np.all((sparse > 0).sum(axis=1) <= 2)
    for i in range(6):
        kept = np.flatnonzero(sparse[i])
        # The kept edges are the strongest ones of the full row.
        strongest = np.sort(full[i])[::-1][: len(kept)]
        np.testing.assert_allclose(np.sort(full[i, kept])[::-1], strongest)
        np.testing.assert_allclose(sparse[i, kept], full[i, kept])


def test_top_k_edges_changes_the_result_and_still_sums_to_one() -> None:
    scores, emb = _random_case(10, 3, 4)
    emb = np.abs(emb)  # all positive cosines -> a dense graph
    dense = GraphDiffusionReranker(alpha=ALPHA, tol=1e-12).rerank(scores, emb)
    sparse = GraphDiffusionReranker(alpha=ALPHA, tol=1e-12, top_k_edges=1).rerank(scores, emb)
    assert sparse.pagerank.sum() == pytest.approx(1.0)
    assert not np.allclose(dense.pagerank, sparse.pagerank)


def test_alpha_zero_returns_personalisation_order() -> None:
    scores, emb = _random_case(12, 6, 5)
    reranker = GraphDiffusionReranker(alpha=0.0)
    result = reranker.rerank(scores, emb)
    np.testing.assert_array_equal(result.order, np.argsort(-scores, kind="stable"))
    np.testing.assert_allclose(result.pagerank, reranker.personalisation(scores))
    assert result.iterations == 0


def test_candidate_connected_to_high_scorers_rises() -> None:
    # Cluster A: nodes 0,1 high scores, node 2 mediocre but near 0 and 1.
    # Node 3 scores above node 2 but sits alone with node 4 (low score).
    emb = np.array(
        [
            [1.0, 0.05, 0.0],
            [1.0, -0.05, 0.0],
            [1.0, 0.0, 0.05],
            [0.0, 0.0, 1.0],
            [0.0, 0.1, 1.0],
        ]
    )
    scores = np.array([0.9, 0.85, 0.5, 0.6, 0.1])
    assert list(np.argsort(-scores, kind="stable")).index(2) > list(np.argsort(-scores, kind="stable")).index(3)
    result = GraphDiffusionReranker(alpha=0.85).rerank(scores, emb)
    order = list(result.order)
    assert order.index(2) < order.index(3)


def test_personalisation_is_shift_invariant_and_sums_to_one() -> None:
    scores = np.array([-3.0, 0.0, 2.0])
    p = GraphDiffusionReranker.personalisation(scores)
    assert p.sum() == pytest.approx(1.0)
    np.testing.assert_allclose(p, GraphDiffusionReranker.personalisation(scores + 100.0))
    assert np.all(p > 0)


def test_empty_input() -> None:
    result = GraphDiffusionReranker(alpha=ALPHA).rerank(np.zeros(0), np.zeros((0, 4)))
    assert isinstance(result, DiffusionResult)
    assert result.order.shape == (0,)
    assert result.pagerank.shape == (0,)
    assert result.iterations == 0


def test_single_candidate() -> None:
    result = GraphDiffusionReranker(alpha=ALPHA).rerank(np.array([0.3]), np.array([[1.0, 2.0]]))
    np.testing.assert_array_equal(result.order, [0])
    np.testing.assert_allclose(result.pagerank, [1.0])


def test_all_equal_scores_regular_graph_keeps_input_order() -> None:
    # Symmetric 4-cycle-like regular graph: all nodes equivalent -> uniform pi, stable order.
    emb = np.eye(4) + 0.5
    result = GraphDiffusionReranker(alpha=ALPHA, tol=1e-12).rerank(np.full(4, 0.7), emb)
    np.testing.assert_allclose(result.pagerank, np.full(4, 0.25))
    np.testing.assert_array_equal(result.order, [0, 1, 2, 3])


def test_all_equal_scores_centrality_decides() -> None:
    # Equal scores: the graph alone ranks, so the hub (similar to all) comes first.
    emb = np.array([[1.0, 0.0, 0.0], [1.0, 1.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 1.0]])
    scores = np.full(4, 2.0)
    result = GraphDiffusionReranker(alpha=ALPHA, tol=1e-12, max_iter=1000).rerank(scores, emb)
    np.testing.assert_allclose(result.pagerank, _reference_pagerank(scores, emb, 0.85), atol=1e-9)


def test_zero_embedding_is_dangling_not_nan() -> None:
    emb = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 0.1]])
    result = GraphDiffusionReranker(alpha=ALPHA).rerank(np.array([1.0, 2.0, 3.0]), emb)
    assert np.all(np.isfinite(result.pagerank))
    assert result.pagerank.sum() == pytest.approx(1.0)


def test_max_iter_caps_iterations() -> None:
    scores, emb = _random_case(8, 3, 6)
    result = GraphDiffusionReranker(alpha=0.99, tol=1e-15, max_iter=3).rerank(scores, emb)
    assert result.iterations == 3
    assert result.pagerank.sum() == pytest.approx(1.0)


@pytest.mark.parametrize(
    "kwargs", [{"alpha": 1.0}, {"alpha": -0.1}, {"tol": 0.0}, {"max_iter": 0}, {"top_k_edges": 0}]
)
def test_invalid_parameters(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        GraphDiffusionReranker(**{"alpha": ALPHA, **kwargs})


def test_shape_mismatch_and_non_finite_rejected() -> None:
    with pytest.raises(ValueError):
        GraphDiffusionReranker(alpha=ALPHA).rerank(np.zeros(3), np.zeros((2, 4)))
    with pytest.raises(ValueError):
        GraphDiffusionReranker(alpha=ALPHA).rerank(np.array([1.0, np.nan]), np.ones((2, 2)))
