"""The embedded backend's hybrid search fuses labels before it reads documents: it returns exactly
what fusing the two full lists returns (ties, access, filters, both fusion methods) while reading
only the documents of the hits it returns; learned fusion's candidates likewise. A caller who may read
every chunk skips the graph walk's per-node access filter; anyone else keeps it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from rag_common.identity import Identity
from rag_retriever.backends.base import AccessFilter, FusionSettings, GraphOptions
from rag_retriever.backends.embedded import EmbeddedIndex
from rag_retriever.fusion import candidates_per_list, min_max_fusion, rrf_fusion
from rag_retriever.settings import RetrieverSettings

QUERIES = ["black hole event horizon", "tea", "coral bleaching warming oceans", "improvise solo", "zzzz", "the"]
ACME = AccessFilter.of(Identity(tenant="acme", user="ann"))
GLOBEX = AccessFilter.of(Identity(tenant="globex", user="bob"))
FUSIONS = [FusionSettings("min_max", 0.5), FusionSettings("min_max", 0.2), FusionSettings("rrf", 0.5)]


@pytest.fixture
def tied_index(loaded_index: EmbeddedIndex, corpus_chunks) -> EmbeddedIndex:
    """The corpus plus an exact copy of every chunk under another id: every hit has a twin with the
    same fused score, so the order among equal scores (chunk id) is exercised at every cut."""
    chunks, vectors = corpus_chunks
    twins = [dataclasses.replace(c, chunk_id=c.chunk_id + "-twin", doc_id=c.doc_id + "-twin") for c in chunks]
    loaded_index.upsert(twins, vectors)
    return loaded_index


@pytest.fixture
def reads(monkeypatch) -> list[str]:
    """The chunk ids of every stored chunk the index decodes from here on, in order."""
    read: list[str] = []
    original = EmbeddedIndex._scored

    def counted(document, score, with_vectors):
        hit = original(document, score, with_vectors)
        read.append(hit.chunk.chunk_id)
        return hit

    monkeypatch.setattr(EmbeddedIndex, "_scored", staticmethod(counted))
    return read


def reference(index: EmbeddedIndex, query: str, vector, k: int, fusion: FusionSettings, access, filters=None):
    n = candidates_per_list(k)
    dense = index.search_dense(vector, n, filters, access=access)
    bm25 = index.search_bm25(query, n, filters, access=access)
    if fusion.method == "rrf":
        return rrf_fusion(dense, bm25, k, fusion.rank_constant)
    return min_max_fusion(dense, bm25, k, fusion.dense_weight)


@pytest.mark.parametrize("fusion", FUSIONS, ids=["min_max", "min_max_w0.2", "rrf"])
@pytest.mark.parametrize("access", [None, ACME, GLOBEX], ids=["no_access", "acme", "globex"])
def test_hybrid_equals_fusing_the_full_lists(tied_index, embedder, fusion, access) -> None:
    vectors = embedder.encode_queries(QUERIES)
    for query, vector in zip(QUERIES, vectors):
        for k in (1, 3, 4, 10):
            got = tied_index.search_hybrid(query, vector, k, None, fusion, access=access)
            want = reference(tied_index, query, vector, k, fusion, access)
            assert [(h.chunk.chunk_id, h.score) for h in got] == [(h.chunk.chunk_id, h.score) for h in want]


def test_hybrid_with_field_filters_equals_fusing_the_full_lists(tied_index, embedder) -> None:
    vector = embedder.encode_queries(["black hole"])[0]
    filters = {"doc_id": ["black-holes", "black-holes-twin", "python-gil"]}
    got = tied_index.search_hybrid("black hole", vector, 3, filters, FUSIONS[0], access=GLOBEX)
    want = reference(tied_index, "black hole", vector, 3, FUSIONS[0], GLOBEX, filters)
    assert [h.chunk.chunk_id for h in got] == [h.chunk.chunk_id for h in want] and got


def test_hybrid_reads_only_the_documents_it_returns(loaded_index, embedder, reads) -> None:
    vector = embedder.encode_queries(["coral reefs"])[0]
    hits = loaded_index.search_hybrid("coral reefs", vector, 2, None, FUSIONS[0], access=None)
    assert len(hits) == 2 and sorted(reads) == sorted(h.chunk.chunk_id for h in hits)
    reads.clear()  # where the dense list alone reads every candidate it holds
    dense = loaded_index.search_dense(vector, candidates_per_list(2), None)
    assert len(reads) == len(dense) > 2


def test_the_unfiltered_graph_walk_is_only_for_callers_who_read_everything(loaded_index, corpus_chunks) -> None:
    chunks, vectors = corpus_chunks
    assert not loaded_index._reads_everything(ACME)  # globex's chunks are in the index
    loaded_index.delete_document("black-holes")
    for chunk in chunks:
        if chunk.tenant == "globex":
            loaded_index.delete_document(chunk.doc_id)
    assert loaded_index._reads_everything(ACME) and not loaded_index._reads_everything(GLOBEX)
    # One chunk of acme readable by a group ann is not in: the filter is back, and the chunk stays hidden.
    secret = dataclasses.replace(chunks[0], chunk_id="secret", doc_id="secret", readers=["group:board"])
    loaded_index.upsert([secret], vectors[:1])
    assert not loaded_index._reads_everything(ACME)
    assert "secret" not in [h.chunk.chunk_id for h in loaded_index.search_dense(vectors[0], 10, None, access=ACME)]
    loaded_index.delete_document("secret")
    assert loaded_index._reads_everything(ACME)
    assert np.isfinite([h.score for h in loaded_index.search_dense(vectors[0], 3, None, access=ACME)]).all()


@pytest.mark.parametrize("access", [None, ACME, GLOBEX], ids=["no_access", "acme", "globex"])
def test_learned_fusion_candidates_fuse_labels_and_read_only_the_first_pass(tied_index, embedder, access,
                                                                           reads) -> None:
    """The learned path's first pass and list signals are the full lists' (ties included), while the
    documents read are the first pass's (and the ``k``-th's ties) and the hop's, not both lists'."""
    options = GraphOptions.of(RetrieverSettings())
    vectors = embedder.encode_queries(QUERIES)
    for query, vector in zip(QUERIES, vectors):
        for k in (1, 3, 4):
            n = candidates_per_list(k)
            dense = tied_index.search_dense(vector, n, None, access=access)
            bm25 = tied_index.search_bm25(query, n, None, access=access)
            fused = min_max_fusion(dense, bm25, len(dense) + len(bm25), 0.3)
            reads.clear()
            found = tied_index.fusion_candidates(query, vector, k, None, access, with_vectors=False, ppr=False,
                                                 options=options, dense_weight=0.3)
            first = [(h.chunk.chunk_id, h.score) for h in found.hits[:found.first_pass]]
            assert first == [(h.chunk.chunk_id, h.score) for h in fused[:k]] and first
            dense_of = {h.chunk.chunk_id: (rank, h.score) for rank, h in enumerate(dense, start=1)}
            bm25_of = {h.chunk.chunk_id: (rank, h.score) for rank, h in enumerate(bm25, start=1)}
            hybrid_of = {h.chunk.chunk_id: h.score for h in fused}
            for hit, signals in zip(found.hits, found.signals, strict=True):
                chunk_id = hit.chunk.chunk_id
                assert (signals.dense_rank, signals.dense) == dense_of.get(chunk_id, (None, None))
                assert (signals.bm25_rank, signals.bm25) == bm25_of.get(chunk_id, (None, None))
                assert signals.hybrid == hybrid_of.get(chunk_id)
            tied = {chunk_id for chunk_id, score in hybrid_of.items() if score == first[-1][1]}
            assert set(reads) <= {h.chunk.chunk_id for h in found.hits} | tied
