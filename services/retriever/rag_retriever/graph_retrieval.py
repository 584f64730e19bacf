"""Graph retrieval signals over the embedded index's structure-and-entity graph (``entity_graph.py``):
what a search does after its first pass when ``graph`` / ``second_hop`` are on. The second hop's
pieces (``scaled_first_pass``, ``asked_entities``, ``follow_ups``, ``merge_follow_up``) are shared with
the OpenSearch backend, which answers the same questions from fields of its chunk documents
(``backends/opensearch_graph.py``).

1. **Second hop** (``hop``): the entities and titles of the first-pass top ``hop_passages`` passages
   that are not the query's own entities (nor the passage's own title) become follow-up BM25
   searches, at most ``hop_entities`` of them (titles of indexed documents first, then the other
   entities, taken in turn from each passage), ``hop_k`` hits each. A follow-up hit scores
   ``hop_weight × parent score × its BM25 score / the list's best``; a chunk found twice keeps its
   best score. No LLM, bounded cost: at most ``hop_entities`` BM25 searches.
2. **Personalised PageRank** (``ppr``): seeds are the top ``seed_hits`` passages so far (weighted by
   their scores) and the query's entities (each the mean seed weight); the walk runs over the seeds'
   neighbourhood in the graph (chunk–section–document–entity, hub entities above
   ``entity_max_chunks`` left out, at most ``MAX_NODES`` nodes) with damping ``damping``. A chunk's
   graph score is the mass the walk brought it (π minus its own restart mass), scaled by the best
   chunk's; its new score is ``(1 − weight) × first-pass score + weight × graph score`` (the
   first-pass score scaled by the best hit's), and chunks the walk reached that the first pass missed
   enter with their graph share only.

Access and filters hold for everything added: follow-up searches are ordinary BM25 searches with the
caller's ``AccessFilter`` and filters, and chunks the walk reached are read back through a tantivy
query restricted the same way (an unreadable chunk is never returned, whatever the graph links).

The signals take the index as a ``backends.base.GraphIndex`` (its graph, BM25 and chunks by graph
label), never the concrete embedded index: the embedded backend implements ``GraphSearcher`` by
calling ``graph_search`` here, so this module importing it back would close an import cycle.
``GraphOptions`` lives in ``backends.base`` beside the protocols whose calls carry it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from rag_retriever.backends.base import AccessFilter, Filters, GraphIndex, GraphOptions
from rag_retriever.entities import query_entities
from rag_retriever.entity_graph import ChunkNode
from rag_retriever.pagerank import personalised_pagerank
from rag_retriever.records import ScoredChunk

#: Largest neighbourhood the walk runs over (a bound on its cost at any index size).
MAX_NODES = 20_000
#: Hops from the seeds the neighbourhood reaches: chunk → entity → document → section → chunk.
RADIUS = 4


def graph_search(
    index: GraphIndex,
    query: str,
    hits: Sequence[ScoredChunk],
    k: int,
    filters: Filters | None,
    access: AccessFilter | None,
    *,
    with_vectors: bool,
    ppr: bool,
    hop: bool,
    options: GraphOptions,
) -> tuple[list[ScoredChunk], dict[str, Any]]:
    """``hits`` (a first pass, best first) re-scored and extended by the enabled signals; the best
    ``k``. Returns them with facts for the response's timings (entities found, hops searched)."""
    info: dict[str, Any] = {}
    if not hits or not (ppr or hop):
        return list(hits[:k]), info
    graph = index.graph
    scored = scaled_first_pass(hits)
    asked = asked_entities(query, graph, options)
    info["query_entities"] = len(asked)

    if hop:
        found = second_hop(index, list(scored.values()), asked, filters, access, with_vectors=with_vectors,
                           options=options)
        info["hops"] = found.searches
        for hit in found.hits.values():
            keep_best(scored, hit)

    if ppr:
        ranked = sorted(scored.values(), key=lambda hit: (-hit.score, hit.chunk.chunk_id))
        shares, added, info["walk_nodes"] = pagerank_shares(index, ranked, asked, k, filters, access,
                                                            with_vectors=with_vectors, options=options)
        for hit in added:
            scored[hit.chunk.chunk_id] = hit
        if shares:
            for chunk_id, hit in list(scored.items()):
                share = shares.get(chunk_id, 0.0)
                scored[chunk_id] = ScoredChunk(
                    hit.chunk, (1.0 - options.weight) * hit.score + options.weight * share, hit.vector
                )
    ranked = sorted(scored.values(), key=lambda hit: (-hit.score, hit.chunk.chunk_id))
    return ranked[:k], info


class EntityStats(Protocol):
    """What the signals need to know of an entity: the embedded ``EntityGraph``, or the counts the
    OpenSearch backend aggregates per query (``opensearch_queries.entity_stats_from``)."""

    def is_entity(self, name: str) -> bool: ...

    def entity_degree(self, name: str) -> int: ...

    def is_title(self, name: str) -> bool: ...


def scaled_first_pass(hits: Sequence[ScoredChunk]) -> dict[str, ScoredChunk]:
    """The first pass by chunk id, best first, each score divided by the best (by rank when none is > 0)."""
    top = max(hit.score for hit in hits)
    scored: dict[str, ScoredChunk] = {}
    for rank, hit in enumerate(hits):
        score = hit.score / top if top > 0 else 1.0 / (1 + rank)
        scored[hit.chunk.chunk_id] = ScoredChunk(hit.chunk, score, hit.vector)
    return scored


def asked_entities(query: str, stats: EntityStats, options: GraphOptions) -> set[str]:
    """The query's entities that the index holds and that are not hubs."""
    cap = options.entity_max_chunks
    return {name for name in query_entities(query, stats.is_entity) if 0 < stats.entity_degree(name) <= cap}


def follow_ups(
    top: Sequence[tuple[ScoredChunk, ChunkNode]], asked: set[str], stats: EntityStats, options: GraphOptions
) -> list[tuple[str, float]]:
    """(entity, parent score) pairs of the second hop: per top passage (with its graph node) its
    not-asked entities, titles of indexed documents first; then taken in turn from each passage up to
    ``hop_entities``."""
    per_passage: list[list[tuple[str, float]]] = []
    for hit, node in top:
        names = [
            name for name in node.entities
            if name not in asked and name != node.title_entity and 0 < stats.entity_degree(name) <= options.entity_max_chunks
        ]
        titles = [name for name in names if stats.is_title(name)]
        others = [name for name in names if not stats.is_title(name)]
        per_passage.append([(name, hit.score) for name in [*titles, *others]])
    chosen: dict[str, float] = {}
    depth = 0
    while len(chosen) < options.hop_entities and any(depth < len(names) for names in per_passage):
        for names in per_passage:
            if depth < len(names) and len(chosen) < options.hop_entities:
                name, score = names[depth]
                chosen.setdefault(name, score)
        depth += 1
    return list(chosen.items())


def merge_follow_up(
    scored: dict[str, ScoredChunk], found: Sequence[ScoredChunk], parent_score: float, options: GraphOptions
) -> None:
    """A follow-up search's hits into ``scored``: ``hop_weight × parent score × BM25 / the list's best``;
    a chunk found twice keeps its best score (and the vector it came with first)."""
    best = max((hit.score for hit in found), default=0.0)
    for hit in found:
        score = options.hop_weight * parent_score * (hit.score / best if best > 0 else 0.0)
        keep_best(scored, ScoredChunk(hit.chunk, score, hit.vector))


def keep_best(scored: dict[str, ScoredChunk], hit: ScoredChunk) -> None:
    """``hit`` into ``scored`` unless its chunk is there with a higher score; a chunk keeps the vector
    it came with first."""
    known = scored.get(hit.chunk.chunk_id)
    if known is None or known.score < hit.score:
        scored[hit.chunk.chunk_id] = hit if known is None else ScoredChunk(hit.chunk, hit.score, known.vector)


@dataclass(frozen=True, slots=True)
class HopResult:
    #: chunk id -> the follow-up hit, scored ``hop_weight × parent score × BM25 / the list's best``
    #: (a chunk found by several follow-ups keeps its best score).
    hits: dict[str, ScoredChunk]
    searches: int


def second_hop(
    index: GraphIndex, ranked: Sequence[ScoredChunk], asked: set[str], filters: Filters | None,
    access: AccessFilter | None, *, with_vectors: bool, options: GraphOptions,
) -> HopResult:
    """The follow-up BM25 searches of the entities of ``ranked``'s top ``hop_passages`` (scores
    max-scaled, best first), under the caller's filters and access."""
    graph = index.graph
    top = [
        (hit, graph.nodes[label])
        for hit in ranked[: options.hop_passages]
        if (label := graph.label_of.get(hit.chunk.chunk_id)) is not None
    ]
    follow = follow_ups(top, asked, graph, options)
    hits: dict[str, ScoredChunk] = {}
    for name, parent_score in follow:
        found = index.search_bm25(name, options.hop_k, filters, access=access, with_vectors=with_vectors)
        merge_follow_up(hits, found, parent_score, options)
    return HopResult(hits, len(follow))


def pagerank_shares(
    index: GraphIndex, ranked: Sequence[ScoredChunk], asked: set[str], k: int, filters: Filters | None,
    access: AccessFilter | None, *, with_vectors: bool, options: GraphOptions,
) -> tuple[dict[str, float], list[ScoredChunk], int]:
    """Personalised PageRank seeded by ``ranked``'s top ``seed_hits`` (best first) and ``asked``:
    (chunk id -> walk mass scaled by the best chunk's, up to ``k`` readable chunks the walk reached
    that ``ranked`` lacks (score 0), nodes walked)."""
    graph = index.graph
    walk = _walk(index, ranked[: options.seed_hits], asked, options)
    nodes = walk.pop(-1, 0)
    if not walk:
        return {}, [], nodes
    best_walk = max(walk.values())
    known = {hit.chunk.chunk_id for hit in ranked}
    new_labels = [label for label in sorted(walk, key=walk.get, reverse=True)
                  if graph.nodes[label].chunk_id not in known][:k]
    added = [ScoredChunk(hit.chunk, 0.0, hit.vector)
             for hit in index.chunks_by_labels(new_labels, filters, access, with_vectors=with_vectors).values()]
    shares = {graph.nodes[label].chunk_id: value / best_walk for label, value in walk.items()} if best_walk > 0 else {}
    return shares, added, nodes


def _walk(index: GraphIndex, seeds: Sequence[ScoredChunk], asked: set[str], options: GraphOptions) -> dict[int, float]:
    """label → the walk's mass at that chunk beyond its own restart mass; key -1 holds the node count."""
    graph = index.graph
    seed_weights: dict[str, float] = {}
    for hit in seeds:
        label = graph.label_of.get(hit.chunk.chunk_id)
        if label is not None:
            seed_weights[f"c:{label}"] = max(hit.score, 1e-6)
    if asked:
        share = (sum(seed_weights.values()) / len(seed_weights)) if seed_weights else 1.0
        for name in asked:
            seed_weights[f"e:{name}"] = share
    if not seed_weights:
        return {}
    ids: dict[str, int] = {}
    edges: set[tuple[int, int]] = set()
    frontier = list(seed_weights)
    for node in frontier:
        ids.setdefault(node, len(ids))
    for _ in range(RADIUS):
        following: list[str] = []
        for node in frontier:
            if node.startswith("e:") and graph.entity_degree(node[2:]) > options.entity_max_chunks:
                continue  # a hub: reached, not walked through
            for neighbour in graph.neighbours(node):
                if neighbour.startswith("e:") and graph.entity_degree(neighbour[2:]) > options.entity_max_chunks:
                    continue
                if neighbour not in ids:
                    if len(ids) >= MAX_NODES:
                        continue
                    ids[neighbour] = len(ids)
                    following.append(neighbour)
                a, b = ids[node], ids[neighbour]
                edges.add((a, b) if a < b else (b, a))
        frontier = following
        if not frontier:
            break
    seeds_by_id = {ids[node]: weight for node, weight in seed_weights.items()}
    pi = personalised_pagerank(len(ids), sorted(edges), seeds_by_id, options.damping)
    total = sum(seeds_by_id.values())
    restart = np.zeros(len(ids))
    for node_id, weight in seeds_by_id.items():
        restart[node_id] = (1.0 - options.damping) * weight / total
    mass = pi - restart
    walk = {int(node[2:]): float(mass[node_id]) for node, node_id in ids.items() if node.startswith("c:")}
    walk = {label: value for label, value in walk.items() if value > 0 and label in graph.nodes}
    walk[-1] = len(ids)
    return walk
