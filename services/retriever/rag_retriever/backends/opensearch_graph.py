"""The second hop on the OpenSearch backend: the embedded backend's algorithm
(``graph_retrieval.follow_ups`` / ``merge_follow_up``), with the graph read from the chunk documents.

The graph of the OpenSearch backend is two keyword fields on every chunk document (template version
4, ``opensearch_index.ADDED_FIELDS``): ``graph_entities`` (the chunk's entities) and ``graph_title``
(its document's title entity). Being fields of the chunk, they are written by the chunk's own bulk
``index`` action and removed by the same ``delete_by_query`` as the chunk: re-ingesting or deleting a
document updates exactly its part of the graph, with no second index to keep in step. The graph's
other nodes are implicit: a document is its ``doc_id``, an entity the chunks whose field holds it.

Per search, two requests (bodies in ``opensearch_queries``):

1. ``entity_stats_body``: for the query's capitalised spans and 2–4-word n-grams and the top
   ``hop_passages`` passages' entities, how many chunks mention each and how many documents it is the
   title of (aggregations, no hits): which query n-grams are entities, which names are hubs
   (> ``entity_max_chunks``), and which are titles (followed first);
2. ``follow_up_msearch_body``: the chosen follow-up BM25 searches in one ``_msearch``, each with the
   caller's filters and access, over the fields of the query's language (``bm25_fields``: a name
   inflects as the text around it does, "României" / "România").

A top passage's entities are computed from the hit itself (``entity_graph.chunk_node``, the function
that wrote its ``graph_entities``), so the hits need no extra field.

Personalised PageRank is not run here: its neighbourhood (chunk → entity → document → section →
chunk, up to ``graph_retrieval.MAX_NODES`` nodes) would take a dependent request per radius step and
bring back thousands of chunks' graph fields per query (and it measured no better than hybrid:
docs/evaluation.md). ``OpenSearchBackend.graph_search`` answers a request with ``graph`` by the hop
alone (if asked) and ``info["ppr_unavailable"]``, which the search service reports as
``timings_ms["graph_ppr_unavailable"]``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opensearchpy import AsyncOpenSearch

from rag_retriever.backends import opensearch_queries as dsl
from rag_retriever.backends.base import AccessFilter, Filters, GraphOptions
from rag_retriever.entities import capitalised_spans, query_ngrams
from rag_retriever.entity_graph import chunk_node
from rag_retriever.graph_retrieval import asked_entities, follow_ups, merge_follow_up, scaled_first_pass
from rag_retriever.records import ScoredChunk


async def second_hop(
    client: AsyncOpenSearch,
    alias: str,
    query: str,
    hits: Sequence[ScoredChunk],
    k: int,
    scope: tuple[Filters | None, AccessFilter | None, bool],
    options: GraphOptions,
    *,
    fields: Sequence[str],
) -> tuple[list[ScoredChunk], dict[str, Any]]:
    """``hits`` (a first pass, best first) extended by the second hop; the best ``k``, and facts for
    the response's timings. ``scope`` is what every follow-up search keeps: (filters, access,
    with_vectors); ``fields`` the BM25 fields they read (``opensearch_queries.bm25_fields``)."""
    filters, access, with_vectors = scope
    info: dict[str, Any] = {}
    if not hits:
        return [], info
    scored = scaled_first_pass(hits)
    top = [(hit, chunk_node(hit.chunk)) for hit in list(scored.values())[: options.hop_passages]]
    names = {*capitalised_spans(query), *query_ngrams(query)}
    for _, node in top:
        names.update(node.entities)
    names.discard("")
    if not names:
        return _best(scored, k), info
    stats = dsl.entity_stats_from(await client.search(index=alias, body=dsl.entity_stats_body(names)))
    asked = asked_entities(query, stats, options)
    info["query_entities"] = len(asked)
    follow = follow_ups(top, asked, stats, options)
    info["hops"] = len(follow)
    if follow:
        body = dsl.follow_up_msearch_body(
            [name for name, _ in follow], options.hop_k, filters, access=access, with_vectors=with_vectors,
            fields=fields,
        )
        answers = dsl.msearch_hits(await client.msearch(body=body, index=alias), with_vectors=with_vectors)
        for (_, parent_score), found in zip(follow, answers, strict=True):
            merge_follow_up(scored, found, parent_score, options)
    return _best(scored, k), info


def _best(scored: dict[str, ScoredChunk], k: int) -> list[ScoredChunk]:
    return sorted(scored.values(), key=lambda hit: (-hit.score, hit.chunk.chunk_id))[:k]
