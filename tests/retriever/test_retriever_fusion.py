"""Hybrid fusion on hand-made lists, where the expected numbers can be worked out by hand."""

from __future__ import annotations

from functools import partial

import pytest

from rag_retriever.fusion import RRF_K, candidates_per_list, min_max_fusion, rrf_fusion
from rag_retriever.records import ChunkRecord, ScoredChunk
from rag_retriever.settings import RetrieverSettings

#: min_max fusion's dense weight by default (``RETRIEVER_HYBRID_DENSE_WEIGHT``, the one source).
DENSE_WEIGHT = RetrieverSettings().hybrid_dense_weight


def hits(*pairs: tuple[str, float]) -> list[ScoredChunk]:
    return [ScoredChunk(ChunkRecord(chunk_id=cid, doc_id=cid, text=cid, chunk_index=0), score) for cid, score in pairs]


def scores(fused: list[ScoredChunk]) -> dict[str, float]:
    return {hit.chunk.chunk_id: hit.score for hit in fused}


def test_min_max_normalises_each_list_and_counts_missing_entries_as_zero():
    dense = hits(("a", 0.9), ("b", 0.7), ("c", 0.5))
    bm25 = hits(("c", 12.0), ("d", 4.0), ("a", 2.0))
    fused = min_max_fusion(dense, bm25, top_k=10, dense_weight=0.5)
    assert scores(fused) == pytest.approx({"a": 0.5, "b": 0.25, "c": 0.5, "d": 0.1})
    assert [hit.chunk.chunk_id for hit in fused] == ["a", "c", "b", "d"]  # ties by chunk id
    assert all(0.0 <= hit.score <= 1.0 for hit in fused)


def test_min_max_weight_moves_the_balance():
    dense = hits(("a", 0.9), ("b", 0.1))
    bm25 = hits(("b", 9.0), ("a", 1.0))
    assert min_max_fusion(dense, bm25, 1, dense_weight=0.8)[0].chunk.chunk_id == "a"
    assert min_max_fusion(dense, bm25, 1, dense_weight=0.2)[0].chunk.chunk_id == "b"
    with pytest.raises(ValueError):
        min_max_fusion(dense, bm25, 1, dense_weight=1.5)


def test_min_max_with_equal_scores_or_one_empty_list():
    fused = min_max_fusion(hits(("a", 0.8), ("b", 0.8)), [], top_k=5, dense_weight=DENSE_WEIGHT)
    assert scores(fused) == {"a": 0.5, "b": 0.5}
    assert min_max_fusion([], [], top_k=5, dense_weight=DENSE_WEIGHT) == []


def test_rrf_sums_reciprocal_ranks():
    dense = hits(("a", 0.9), ("b", 0.8))
    bm25 = hits(("b", 3.0), ("c", 2.0))
    fused = rrf_fusion(dense, bm25, top_k=2)
    assert [hit.chunk.chunk_id for hit in fused] == ["b", "a"]
    assert fused[0].score == pytest.approx(1 / (RRF_K + 2) + 1 / (RRF_K + 1))
    assert fused[1].score == pytest.approx(1 / (RRF_K + 1))


@pytest.mark.parametrize(("top_k", "expected"), [(1, 50), (12, 50), (13, 52), (50, 200)])
def test_candidates_per_list(top_k, expected):
    assert candidates_per_list(top_k) == expected


@pytest.mark.parametrize("fuse", [partial(min_max_fusion, dense_weight=DENSE_WEIGHT), rrf_fusion], ids=["min_max", "rrf"])
def test_fused_hits_keep_their_vectors(fuse):
    import numpy as np

    vector = {cid: np.full(3, i, dtype=np.float32) for i, cid in enumerate("abc")}
    dense = [ScoredChunk(h.chunk, h.score, vector[h.chunk.chunk_id]) for h in hits(("a", 0.9), ("b", 0.5))]
    bm25 = [ScoredChunk(h.chunk, h.score, vector[h.chunk.chunk_id]) for h in hits(("c", 3.0), ("a", 1.0))]
    fused = fuse(dense, bm25, top_k=3)
    assert sorted(hit.chunk.chunk_id for hit in fused) == ["a", "b", "c"]
    for hit in fused:
        assert hit.vector is vector[hit.chunk.chunk_id]
    # Lists without vectors fuse into hits without vectors.
    assert all(hit.vector is None for hit in fuse(hits(("a", 0.9)), hits(("b", 2.0)), top_k=2))
