"""The embedded index's structure-and-entity graph (``rag_retriever.entity_graph``: chunk -> section ->
document, chunk <-> entity): a second derived index, handled like the vector graph.

Updated right after the tantivy commit, its changed rows written in one SQLite transaction
(``graph.sqlite``, ``rag_retriever.entity_graph_store``: a write costs its own chunks; an older
``graph.json`` is migrated on open), and brought in step with the stored chunks on open
(re-extracted from their payloads where missing, dropped where tantivy no longer has them). Every
chunk's node is made here (``nodes_of``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from pathlib import Path

from rag_retriever.entity_graph import ChunkNode, EntityGraph, chunk_node
from rag_retriever.entity_graph_store import GraphStore
from rag_retriever.records import ChunkRecord

logger = logging.getLogger(__name__)


class EntityGraphUpkeep:
    """The entity graph in memory and its rows in ``index_dir``'s graph store."""

    def __init__(self, index_dir: Path) -> None:
        self.index_dir = index_dir
        self.store = GraphStore(index_dir)
        self.reload()

    def reload(self) -> None:
        """Start again from what the store holds (on open, and after a failed update)."""
        loaded = self.store.load()
        #: Rebuilt from the stored chunks when absent, unreadable or of another extractor version.
        self.loaded = loaded is not None
        self.graph = loaded or EntityGraph()

    def labels(self) -> set[int]:
        return self.graph.labels()

    @staticmethod
    def nodes_of(added: Iterable[tuple[int, ChunkRecord]]) -> list[tuple[int, ChunkNode]]:
        """The chunks' nodes (entity extraction: most of an update's cost, and it needs no lock)."""
        return [(label, chunk_node(chunk)) for label, chunk in added]

    def apply(self, deleted: list[int], nodes: list[tuple[int, ChunkNode]]) -> None:
        """``deleted`` leave the graph, ``nodes`` join it; their rows written in one transaction."""
        self.graph.remove(deleted)
        for label, node in nodes:
            self.graph.add(label, node)
        self.store.apply(deleted, nodes)

    def bring_in_step(self, missing: list[tuple[int, ChunkRecord]], stale: set[int]) -> None:
        """Add the stored chunks the graph lacks (``missing``), drop the ``stale`` labels tantivy no
        longer has; a graph that was not loaded is written whole."""
        if missing or stale or not self.loaded:
            if self.loaded and (missing or stale):
                logger.warning(
                    "entity graph in %s: adding %d chunks, dropping %d (reconciled with the stored chunks)",
                    self.index_dir, len(missing), len(stale),
                )
            nodes = self.nodes_of(missing)
            self.graph.remove(stale)
            for label, node in nodes:
                self.graph.add(label, node)
            if self.loaded:
                self.store.apply(sorted(stale), nodes)
            else:
                self.store.replace_all(self.graph)
            self.loaded = True

    def close(self) -> None:
        self.store.close()
