"""Hybrid fusion: one ranked list out of a dense list and a BM25 list of the same query.

``min_max``: each list is min-max normalised over its own candidates to [0, 1], then the fused score
is ``dense_weight * dense + (1 - dense_weight) * bm25``, a chunk missing from a list counting 0 there;
the result is in [0, 1]. ``rrf``: reciprocal rank fusion, ``sum(1 / (k + rank))`` with rank from 1
and k = 60; it ignores score scales entirely and is never above ``2 / (k + 1)``.

A fused hit keeps the ``vector`` its input hits carried (the same stored vector in both lists).
``min_max_scores`` and ``rrf_scores`` fuse ``(key, score)`` lists of any key, so a backend can fuse
before it reads the documents of its hits (only the winners' are read).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

from rag_retriever.records import ScoredChunk

RRF_K = 60
#: What a list's hits are keyed by: chunk ids here, index labels in a backend that fuses before it
#: reads the hits' documents (the embedded backend).
K = TypeVar("K", bound=Hashable)


def candidates_per_list(top_k: int) -> int:
    """How many hits to fetch from each list before fusing: fusion needs more than it returns."""
    return max(top_k * 4, 50)


def _min_max(scores: Sequence[tuple[K, float]]) -> dict[K, float]:
    if not scores:
        return {}
    values = [score for _, score in scores]
    low, high = min(values), max(values)
    if high == low:
        # All candidates are equally good: each is the best this list has to offer.
        return {key: 1.0 for key, _ in scores}
    return {key: (score - low) / (high - low) for key, score in scores}


def min_max_scores(
    dense: Sequence[tuple[K, float]], bm25: Sequence[tuple[K, float]], dense_weight: float
) -> dict[K, float]:
    """Fused min_max score of every key in either list of ``(key, score)``, in first-seen order."""
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
    dense_norm, bm25_norm = _min_max(dense), _min_max(bm25)
    keys = dict.fromkeys([key for key, _ in dense] + [key for key, _ in bm25])
    return {
        key: dense_weight * dense_norm.get(key, 0.0) + (1.0 - dense_weight) * bm25_norm.get(key, 0.0) for key in keys
    }


def rrf_scores(dense: Sequence[tuple[K, float]], bm25: Sequence[tuple[K, float]], k: int = RRF_K) -> dict[K, float]:
    """Fused rrf score of every key in either ranked list of ``(key, score)``."""
    fused: dict[K, float] = {}
    for ranked in (dense, bm25):
        for rank, (key, _) in enumerate(ranked, start=1):
            fused[key] = fused.get(key, 0.0) + 1.0 / (k + rank)
    return fused


def min_max_fusion(
    dense: list[ScoredChunk], bm25: list[ScoredChunk], top_k: int, dense_weight: float
) -> list[ScoredChunk]:
    fused = min_max_scores(_keyed(dense), _keyed(bm25), dense_weight)
    return _ranked(fused, _hits_by_id(dense, bm25), top_k)


def rrf_fusion(dense: list[ScoredChunk], bm25: list[ScoredChunk], top_k: int, k: int = RRF_K) -> list[ScoredChunk]:
    return _ranked(rrf_scores(_keyed(dense), _keyed(bm25), k), _hits_by_id(dense, bm25), top_k)


def _keyed(hits: list[ScoredChunk]) -> list[tuple[str, float]]:
    return [(hit.chunk.chunk_id, hit.score) for hit in hits]


def _hits_by_id(*lists: list[ScoredChunk]) -> dict[str, ScoredChunk]:
    hits: dict[str, ScoredChunk] = {}
    for hit_list in lists:
        for hit in hit_list:
            hits.setdefault(hit.chunk.chunk_id, hit)
    return hits


def _ranked(fused: dict[str, float], hits: dict[str, ScoredChunk], top_k: int) -> list[ScoredChunk]:
    # Ties broken by chunk id so equal inputs always give the same order.
    order = sorted(fused, key=lambda chunk_id: (-fused[chunk_id], chunk_id))[:top_k]
    return [ScoredChunk(hits[chunk_id].chunk, fused[chunk_id], hits[chunk_id].vector) for chunk_id in order]
