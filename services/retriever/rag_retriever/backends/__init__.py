"""Index backends: where chunks, their vectors and their BM25 postings live."""

from rag_retriever.backends.base import (
    FILTER_FIELDS,
    Catalog,
    ChunkWriteError,
    ChunkWriteFailure,
    Filters,
    FusionSettings,
    Indexer,
    IndexMismatchError,
    SearchBackend,
    Searcher,
)

__all__ = [
    "FILTER_FIELDS",
    "Catalog",
    "ChunkWriteError",
    "ChunkWriteFailure",
    "Filters",
    "FusionSettings",
    "IndexMismatchError",
    "Indexer",
    "SearchBackend",
    "Searcher",
]
