"""Index backends: where chunks, their vectors and their BM25 postings live."""

from rag_retriever.backends.base import (
    FILTER_FIELDS,
    MAX_DOCUMENTS_PER_CONTENT,
    Catalog,
    ChunkWriteError,
    ChunkWriteFailure,
    ContentLookup,
    Filters,
    FusionSettings,
    Indexer,
    IndexMismatchError,
    IngestTarget,
    SearchBackend,
    Searcher,
)

__all__ = [
    "FILTER_FIELDS",
    "MAX_DOCUMENTS_PER_CONTENT",
    "Catalog",
    "ChunkWriteError",
    "ChunkWriteFailure",
    "ContentLookup",
    "Filters",
    "FusionSettings",
    "IndexMismatchError",
    "Indexer",
    "IngestTarget",
    "SearchBackend",
    "Searcher",
]
