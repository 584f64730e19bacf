"""Hybrid fusion: one ranked list out of a dense list and a BM25 list of the same query.

``min_max``: each list is min-max normalised over its own candidates to [0, 1], then the fused score
is ``dense_weight * dense + (1 - dense_weight) * bm25``, a chunk missing from a list counting 0 there;
the result is in [0, 1]. ``rrf``: reciprocal rank fusion, ``sum(1 / (k + rank))`` with rank from 1
and k = 60; it ignores score scales entirely and is never above ``2 / (k + 1)``.

A fused hit keeps the ``vector`` its input hits carried (the same stored vector in both lists).
"""

from __future__ import annotations

from rag_retriever.records import ScoredChunk

RRF_K = 60


def candidates_per_list(top_k: int) -> int:
    """How many hits to fetch from each list before fusing: fusion needs more than it returns."""
    return max(top_k * 4, 50)


def _min_max(hits: list[ScoredChunk]) -> dict[str, float]:
    if not hits:
        return {}
    scores = [hit.score for hit in hits]
    low, high = min(scores), max(scores)
    if high == low:
        # All candidates are equally good: each is the best this list has to offer.
        return {hit.chunk.chunk_id: 1.0 for hit in hits}
    return {hit.chunk.chunk_id: (hit.score - low) / (high - low) for hit in hits}


def min_max_fusion(
    dense: list[ScoredChunk], bm25: list[ScoredChunk], top_k: int, dense_weight: float = 0.5
) -> list[ScoredChunk]:
    if not 0.0 <= dense_weight <= 1.0:
        raise ValueError(f"dense_weight must be in [0, 1], got {dense_weight}")
    dense_norm, bm25_norm = _min_max(dense), _min_max(bm25)
    hits = _hits_by_id(dense, bm25)
    fused = {
        chunk_id: dense_weight * dense_norm.get(chunk_id, 0.0) + (1.0 - dense_weight) * bm25_norm.get(chunk_id, 0.0)
        for chunk_id in hits
    }
    return _ranked(fused, hits, top_k)


def rrf_fusion(dense: list[ScoredChunk], bm25: list[ScoredChunk], top_k: int, k: int = RRF_K) -> list[ScoredChunk]:
    fused: dict[str, float] = {}
    for hits in (dense, bm25):
        for rank, hit in enumerate(hits, start=1):
            fused[hit.chunk.chunk_id] = fused.get(hit.chunk.chunk_id, 0.0) + 1.0 / (k + rank)
    return _ranked(fused, _hits_by_id(dense, bm25), top_k)


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
