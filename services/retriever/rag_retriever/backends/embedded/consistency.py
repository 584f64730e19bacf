"""How the embedded index's derived parts agree with tantivy, its source of truth: the stored chunks
read on open into the access map and the entity graph (``read_stored_chunks``), and the agreement of
the stored chunks, the vector graph and the entity graph measured (``measure``: what the crash tests
and ``bench/ingest_chaos.py`` check). The vector graph's repair is ``VectorGraph.repair``, driven by
``EmbeddedIndex._reconcile``.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

import tantivy
from tantivy import Query

from rag_retriever.backends.embedded.access_map import AccessMap
from rag_retriever.backends.embedded.entity_upkeep import EntityGraphUpkeep
from rag_retriever.backends.embedded.text_index import TextIndex, all_hits, record
from rag_retriever.backends.embedded.vector_graph import VectorGraph
from rag_retriever.records import ChunkRecord


@dataclass(frozen=True, slots=True)
class IndexConsistency:
    chunks: int
    #: Live (not deleted) vectors in the graph.
    graph_vectors: int
    #: Stored chunks the graph lacks: a dense search could never return them.
    missing_from_graph: int
    #: Live graph vectors with no stored chunk: hits a search would have to drop.
    stale_in_graph: int
    #: Stored chunks beyond the first of each ``chunk_id``.
    duplicate_chunk_ids: int
    #: Stored chunks the structure-and-entity graph lacks, and graph chunks with no stored chunk.
    missing_from_entity_graph: int = 0
    stale_in_entity_graph: int = 0

    @property
    def consistent(self) -> bool:
        return not (
            self.missing_from_graph or self.stale_in_graph or self.duplicate_chunk_ids
            or self.missing_from_entity_graph or self.stale_in_entity_graph
        )


def read_stored_chunks(
    searcher: tantivy.Searcher, access: AccessMap, entities: EntityGraphUpkeep
) -> dict[int, tantivy.DocAddress]:
    """Every stored chunk's label -> address; rebuilds the access map from them and brings the
    entity graph in step (chunks it lacks added, chunks tantivy no longer has dropped)."""
    stored = TextIndex.stored_chunks(searcher)
    access.reset()
    in_entity_graph = entities.labels()
    entity_graph_missing: list[tuple[int, ChunkRecord]] = []
    for label, address in stored.items():
        chunk = record(searcher, address)
        access.remember(label, chunk)
        if label not in in_entity_graph:
            entity_graph_missing.append((label, chunk))
    entities.bring_in_step(entity_graph_missing, in_entity_graph - stored.keys())
    return stored


def measure(searcher: tantivy.Searcher, vectors: VectorGraph, entities: EntityGraphUpkeep) -> IndexConsistency:
    """How the stored chunks, the vector graph and the entity graph agree, as loaded."""
    addresses = all_hits(searcher, Query.all_query()) if searcher.num_docs else []
    stored = [int(label) for label in searcher.fast_field_values("label", addresses)] if addresses else []
    chunk_ids = Counter(record(searcher, address).chunk_id for address in addresses)
    labels = vectors.labels()
    in_graph = set(labels) - set(vectors.marked_deleted(labels))
    in_entity_graph = entities.labels()
    return IndexConsistency(
        chunks=len(stored),
        graph_vectors=len(in_graph),
        missing_from_graph=len(set(stored) - in_graph),
        stale_in_graph=len(in_graph - set(stored)),
        duplicate_chunk_ids=sum(count - 1 for count in chunk_ids.values()),
        missing_from_entity_graph=len(set(stored) - in_entity_graph),
        stale_in_entity_graph=len(in_entity_graph - set(stored)),
    )
