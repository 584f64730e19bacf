"""A write of the embedded index between its two steps (``EmbeddedIndex.prepare_replacement`` and
``commit_prepared``): what it replaces and adds, staged out of sight of searches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from rag_retriever.entity_graph import ChunkNode
from rag_retriever.records import ChunkRecord


@dataclass(slots=True)
class PreparedWrite:
    """A write whose labels are reserved, whose tantivy operations are queued and whose vectors are
    (``staged`` of them) in the graph, not yet visible (``EmbeddedIndex._prepare``)."""

    #: Live labels the write deletes (the replaced documents' chunks, and chunks of the same ids).
    replaced: list[int]
    #: The new chunks' labels, in the order of ``chunks`` and ``vectors``.
    labels: list[int]
    chunks: list[ChunkRecord]
    vectors: np.ndarray
    #: The new chunks' entity-graph nodes (``chunk_node``), made before the commit.
    nodes: list[tuple[int, ChunkNode]] = field(default_factory=list)
    #: How many of ``labels`` are in the graph already.
    staged: int = 0
