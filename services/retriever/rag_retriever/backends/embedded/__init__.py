"""The embedded backend: tantivy (BM25, stored chunks, filter terms) + hnswlib (dense ANN) on local disk.

``EmbeddedIndex`` (``index``) is the synchronous engine; ``EmbeddedBackend`` (``backend``) is the
async ``SearchBackend`` over it. One module per part of the index:

- ``analyzers``: the text fields (neutral, and one pair per configured language) and their analyzers;
- ``text_index``: the tantivy schema, a chunk as a document, every query (BM25, filters, access);
- ``vector_graph``: the hnswlib graph, its file, its repair and the background re-link sweep;
- ``access_map``: label -> (tenant, readers) of the live chunks, the ANN search's filter;
- ``entity_upkeep``: the structure-and-entity graph kept in step with the stored chunks;
- ``on_disk``: the directory's files, ``meta.json``, the format upgrades;
- ``consistency``: the stored chunks read into the derived parts on open, and their agreement measured;
- ``catalog``: per-document lookups, the document list, content lookups;
- ``search``: dense, hybrid and by-label searches over the parts;
- ``prepared_write``: a write between its two steps (prepared, not yet committed);
- ``index``: ``EmbeddedIndex``, which owns the parts and commits across them (writes, repair on open).
"""

from rag_retriever.backends.base import IndexMismatchError
from rag_retriever.backends.embedded.backend import EmbeddedBackend
from rag_retriever.backends.embedded.consistency import IndexConsistency
from rag_retriever.backends.embedded.index import EmbeddedIndex
from rag_retriever.backends.embedded.prepared_write import PreparedWrite
from rag_retriever.backends.embedded.on_disk import FORMAT_VERSION, HNSW_FILE, META_FILE, TANTIVY_DIR

__all__ = [
    "FORMAT_VERSION",
    "HNSW_FILE",
    "META_FILE",
    "TANTIVY_DIR",
    "EmbeddedBackend",
    "EmbeddedIndex",
    "IndexConsistency",
    "IndexMismatchError",
    "PreparedWrite",
]
