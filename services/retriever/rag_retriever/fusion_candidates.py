"""The candidates of learned fusion and their raw signals, on the embedded index (its graph).

Candidates are the first-pass min-max hybrid list (its best ``k``) plus the chunks the second hop
and, when the model reads it, personalised PageRank add (``rag_retriever.graph_retrieval``); each
gets the :class:`~rag_retriever.fusion_features.CandidateSignals` that ``fusion_features`` turns
into a feature row. The dense and BM25 lists are the ones hybrid search fuses (same depth,
``candidates_per_list``), so a candidate's rank and score in each are what min-max fusion saw.

The lists come as index labels and scores (:class:`FirstPass`), and only the best ``k`` fused
chunks (with their ties) are read, as hybrid search reads them: reading a stored chunk (its payload,
with its sentence vectors) is most of a list's cost, and reading both lists whole (2 × 80 chunks
at 20 candidates) made learned fusion add 7.6 / 13.6 ms p50 to a search on XQuAD-ro / HotpotQA
instead of 2.2 / 3.2 ms. A list signal of a chunk the hop or PageRank adds is looked up by its
label in the graph (every stored chunk has a node).

Access and filters hold for everything added: the follow-up searches and the chunks the walk reached
go through the same machinery as ``graph_search`` (the caller's ``AccessFilter`` and filters).

The index is a ``backends.base.GraphIndex``, not the concrete embedded index: the embedded backend
implements ``FusionCandidateSource`` with this function, so importing it back would be a cycle. The
result type, ``FusionCandidates``, is declared in ``backends.base`` with that protocol.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rag_retriever.backends.base import AccessFilter, Filters, FusionCandidates, GraphIndex, GraphOptions
from rag_retriever.entities import query_entities
from rag_retriever.fusion_features import CandidateSignals
from rag_retriever.graph_retrieval import asked_entities, pagerank_shares, scaled_first_pass, second_hop
from rag_retriever.records import ScoredChunk


@dataclass(frozen=True, slots=True)
class FirstPass:
    """Min-max hybrid's first pass by index label: the dense and BM25 lists (``(label, score)``,
    best first), every listed label's fused score, and the chunks read (fused scores): the best ``k``
    and every one tied with the ``k``-th, so ties break by chunk id as ``min_max_fusion``'s do."""

    dense: Sequence[tuple[int, float]]
    bm25: Sequence[tuple[int, float]]
    fused: dict[int, float]
    read: dict[int, ScoredChunk]


def fusion_candidates(
    index: GraphIndex,
    query: str,
    lists: FirstPass,
    k: int,
    filters: Filters | None,
    access: AccessFilter | None,
    *,
    with_vectors: bool,
    ppr: bool,
    options: GraphOptions,
) -> FusionCandidates:
    """The candidates in first-pass order, then the hop's additions, then PageRank's; their signals."""
    first = sorted(lists.read.values(), key=lambda hit: (-hit.score, hit.chunk.chunk_id))[:k]
    if not first:
        return FusionCandidates([], [], 0)
    label_of = {hit.chunk.chunk_id: label for label, hit in lists.read.items()}
    dense_by_label = {label: (rank, score) for rank, (label, score) in enumerate(lists.dense, start=1)}
    bm25_by_label = {label: (rank, score) for rank, (label, score) in enumerate(lists.bm25, start=1)}

    # The graph signals see the first pass as graph_search does: scores scaled by the best hit's.
    scaled = list(scaled_first_pass(first).values())
    asked = asked_entities(query, index.graph, options)
    hop = second_hop(index, scaled, asked, filters, access, with_vectors=with_vectors, options=options)
    candidates = list(first)
    known = {hit.chunk.chunk_id for hit in candidates}
    for chunk_id, hit in hop.hits.items():
        if chunk_id not in known:
            candidates.append(ScoredChunk(hit.chunk, 0.0, hit.vector))
            known.add(chunk_id)
    shares: dict[str, float] | None = None
    if ppr:
        shares, added, _ = pagerank_shares(index, candidates, asked, k, filters, access,
                                           with_vectors=with_vectors, options=options)
        candidates += [hit for hit in added if hit.chunk.chunk_id not in known]

    graph = index.graph
    # Overlap counts every entity of the question the graph knows, hubs included ("United States"
    # is still evidence), unlike the walk and the hop, which leave hubs out for cost.
    question = set(query_entities(query, graph.is_entity))
    seeds = [graph.nodes.get(graph.label_of.get(hit.chunk.chunk_id, -1)) for hit in first[: options.seed_hits]]
    seed_sections: dict[str, set[str]] = {}
    seed_documents: dict[str, set[str]] = {}
    for node in seeds:
        if node is not None:
            seed_sections.setdefault(node.section, set()).add(node.chunk_id)
            seed_documents.setdefault(node.document, set()).add(node.chunk_id)

    signals = []
    for hit in candidates:
        chunk_id = hit.chunk.chunk_id
        node = graph.nodes.get(graph.label_of.get(chunk_id, -1))
        overlap, title_match, section_neighbour, document_neighbour = 0.0, False, False, False
        if node is not None:
            names = {*node.entities, node.title_entity} - {""}
            overlap = len(question & names) / len(question) if question else 0.0
            title_match = bool(node.title_entity) and node.title_entity in question
            section_neighbour = bool(seed_sections.get(node.section, set()) - {chunk_id})
            document_neighbour = bool(seed_documents.get(node.document, set()) - {chunk_id})
        label = label_of.get(chunk_id, graph.label_of.get(chunk_id))
        dense_rank, dense_score = dense_by_label.get(label, (None, None))
        bm25_rank, bm25_score = bm25_by_label.get(label, (None, None))
        hop_hit = hop.hits.get(chunk_id)
        signals.append(CandidateSignals(
            dense=dense_score,
            bm25=bm25_score,
            dense_rank=dense_rank,
            bm25_rank=bm25_rank,
            hybrid=lists.fused.get(label),
            hop=hop_hit.score if hop_hit is not None else 0.0,
            hop_found=hop_hit is not None,
            ppr=None if shares is None else shares.get(chunk_id, 0.0),
            entity_overlap=overlap,
            title_match=title_match,
            section_neighbour=section_neighbour,
            document_neighbour=document_neighbour,
        ))
    return FusionCandidates(candidates, signals, len(first))
