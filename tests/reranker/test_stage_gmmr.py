"""GeometricMMR (gMMR) on constructed vectors."""

from __future__ import annotations

import numpy as np
import pytest

from rag_reranker.settings import RerankerSettings
from rag_reranker.stages.gmmr import GeometricMMR

#: The lambdas the adaptive policy sweeps by default (``RERANKER_ADAPTIVE_LAMBDAS``, the one source).
DEFAULT_LAMBDAS = tuple(RerankerSettings().adaptive_lambdas)


def _unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v, axis=-1, keepdims=True)


def _random(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return _unit(rng.normal(size=d)), _unit(rng.normal(size=(n, d)))


def _reference_gmmr(q: np.ndarray, c: np.ndarray, k: int, lam: float) -> list[int]:
    """Scalar loop implementation of the spec, independent of the vectorised one."""
    q = _unit(q)
    c = _unit(c)
    selected: list[int] = []
    for _ in range(min(k, len(c))):
        best, best_value = -1, -np.inf
        for i in range(len(c)):
            if i in selected:
                continue
            rel = float(q @ c[i])
            if not selected:
                value = rel
            else:
                centroid = _unit(c[selected].mean(axis=0))
                value = lam * rel + (1 - lam) * np.sqrt(max(2 - 2 * float(c[i] @ centroid), 0.0))
            if value > best_value:
                best, best_value = i, value
        selected.append(best)
    return selected


def test_lambda_one_is_pure_relevance_order() -> None:
    q, c = _random(30, 16, 0)
    selected = GeometricMMR(1.0).select(q, c, 10)
    assert selected == list(np.argsort(-(c @ q), kind="stable")[:10])


def test_first_pick_is_most_query_similar_for_any_lambda() -> None:
    q, c = _random(25, 8, 1)
    best = int(np.argmax(c @ q))
    for lam in (0.0, 0.3, 0.7, 1.0):
        assert GeometricMMR(lam).select(q, c, 3)[0] == best


@pytest.mark.parametrize("lam", [0.0, 0.2, 0.5, 0.8])
@pytest.mark.parametrize("seed", [2, 3])
def test_matches_scalar_reference(lam: float, seed: int) -> None:
    q, c = _random(20, 6, seed)
    assert GeometricMMR(lam).select(q, c, 8) == _reference_gmmr(q, c, 8, lam)


def test_small_lambda_prefers_diverse_item_over_near_duplicate() -> None:
    q = _unit(np.array([1.0, 0.0, 0.0]))
    c = _unit(
        np.array(
            [
                [1.0, 0.10, 0.0],  # 0: most relevant
                [1.0, 0.11, 0.0],  # 1: near-duplicate of 0, second most relevant
                [0.6, 0.0, 0.8],  # 2: less relevant but a different direction
            ]
        )
    )
    assert GeometricMMR(1.0).select(q, c, 2) == [0, 1]
    assert GeometricMMR(0.3).select(q, c, 2) == [0, 2]


def test_no_duplicates_and_k_larger_than_n() -> None:
    q, c = _random(7, 5, 4)
    for lam in (0.0, 0.5, 1.0):
        selected = GeometricMMR(lam).select(q, c, 50)
        assert len(selected) == 7
        assert sorted(selected) == list(range(7))


def test_exact_duplicates_never_selected_twice() -> None:
    q = _unit(np.array([1.0, 0.2]))
    c = np.tile(_unit(np.array([1.0, 0.0])), (4, 1))
    selected = GeometricMMR(0.5).select(q, c, 4)
    assert selected == [0, 1, 2, 3]


def test_k_zero_and_empty_candidates() -> None:
    q, c = _random(5, 4, 5)
    assert GeometricMMR(0.5).select(q, c, 0) == []
    assert GeometricMMR(0.5).select(q, np.zeros((0, 4)), 3) == []


def test_unnormalised_inputs_give_same_result() -> None:
    q, c = _random(15, 6, 6)
    scales = np.random.default_rng(7).uniform(0.1, 10.0, size=(15, 1))
    assert GeometricMMR(0.4).select(3.0 * q, c * scales, 6) == GeometricMMR(0.4).select(q, c, 6)


def test_cancelling_centroid_falls_back_to_relevance() -> None:
    # Selected vectors cancel -> zero centroid -> distance term constant -> relevance decides.
    q = _unit(np.array([1.0, 1.0, 0.0]))
    c = np.array([[1.0, 0.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    # lambda=0: after 0 then 1 (the farthest from 0), centroid is zero; ties -> relevance 0.5*rel.
    selected = GeometricMMR(0.0).select(q, c, 4)
    assert selected[:2] == [0, 1]
    assert sorted(selected) == [0, 1, 2, 3]


def test_lambda_sweep_matches_individual_selects() -> None:
    q, c = _random(40, 12, 8)
    sweep = GeometricMMR(0.5).lambda_sweep(q, c, 10, DEFAULT_LAMBDAS)
    assert list(sweep) == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert tuple(sweep) == DEFAULT_LAMBDAS
    for lam, selected in sweep.items():
        assert selected == GeometricMMR(lam).select(q, c, 10)
    # Different lambdas actually produce different selections on random data.
    assert len({tuple(v) for v in sweep.values()}) > 1


def test_lambda_sweep_custom_lambdas() -> None:
    q, c = _random(10, 4, 9)
    sweep = GeometricMMR().lambda_sweep(q, c, 3, lambdas=(0.25, 0.75))
    assert set(sweep) == {0.25, 0.75}


@pytest.mark.parametrize("lam", [-0.1, 1.1])
def test_invalid_lambda(lam: float) -> None:
    with pytest.raises(ValueError):
        GeometricMMR(lam)
    with pytest.raises(ValueError):
        GeometricMMR(0.5).lambda_sweep(np.ones(2), np.ones((2, 2)), 1, lambdas=(lam,))


def test_invalid_shapes_and_k() -> None:
    with pytest.raises(ValueError):
        GeometricMMR(0.5).select(np.ones(3), np.ones((4, 2)), 2)
    with pytest.raises(ValueError):
        GeometricMMR(0.5).select(np.ones(3), np.ones((4, 3)), -1)
    with pytest.raises(ValueError):
        GeometricMMR(0.5).select(np.ones((1, 3)), np.ones((4, 3)), 1)


def test_relevance_override_is_checked_and_used() -> None:
    rng = np.random.default_rng(3)
    query, candidates = rng.normal(size=8), rng.normal(size=(6, 8))
    with pytest.raises(ValueError, match="relevance"):
        GeometricMMR(0.5).select(query, candidates, 3, relevance=np.ones(5))
    with pytest.raises(ValueError, match="relevance"):
        GeometricMMR(0.5).select(query, candidates, 3, relevance=np.array([0, 1, 2, 3, 4, np.nan]))
    relevance = np.array([0.1, 0.9, 0.2, 1.0, 0.0, 0.5])
    # λ = 1: pure relevance order, whatever the embeddings say.
    assert GeometricMMR(1.0).select(query, candidates, 4, relevance=relevance) == [3, 1, 5, 2]
    sweep = GeometricMMR().lambda_sweep(query, candidates, 4, (1.0,), relevance=relevance)
    assert sweep == {1.0: [3, 1, 5, 2]}
