"""Where the embedded index keeps its structure-and-entity graph on disk: one SQLite file, one row per
chunk, so a write costs the chunks it changes (not the whole graph, as the rewritten ``graph.json``
of format 1 did).

``graph.sqlite`` holds ``chunks(label INTEGER PRIMARY KEY, node TEXT)`` (a ``ChunkNode`` as JSON) and
``meta(key, value)`` with the row layout (``format``) and the entity extractor's version. A write is
one transaction: the labels the tantivy commit replaced are deleted and its new chunks inserted. The
file is in WAL mode with ``synchronous=FULL``: a transaction is on disk once ``apply`` returns, and a
kill -9 in the middle leaves the previous transaction's state (SQLite rolls the rest back). Like the
rest of the graph this is *derived* data: whatever a crash leaves, ``EmbeddedIndex._reconcile`` adds
the stored chunks the file lacks and drops the labels tantivy no longer has when the index opens.

Why SQLite: the Python standard library ships it (no new dependency), it gives atomic, durable
transactions on a single file, and deleting a document's rows by their labels is an index lookup.
The adjacency itself stays in memory (``EntityGraph``), rebuilt from the rows on open.

Migration: an index written with ``graph.json`` (format 1) has it read once on open, copied into
``graph.sqlite`` in one transaction, and the JSON file deleted afterwards (a crash between the two
leaves both; the SQLite file wins and the JSON one is deleted on the next open).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from rag_retriever.entities import EXTRACTOR_VERSION
from rag_retriever.entity_graph import ChunkNode, EntityGraph

GRAPH_DB = "graph.sqlite"
#: The whole-file JSON of format 1, migrated on open.
LEGACY_GRAPH_FILE = "graph.json"
#: Row layout of ``graph.sqlite``; another format or extractor version is rebuilt from the chunks.
STORE_FORMAT = 2
#: Files SQLite may keep next to the database while it is open (removed on a clean close).
SIDE_FILES = (GRAPH_DB + "-wal", GRAPH_DB + "-shm", GRAPH_DB + "-journal")


class GraphStore:
    """The graph's rows in ``<index_dir>/graph.sqlite``. Not thread-safe by itself: the index calls it
    under its lock."""

    def __init__(self, index_dir: Path) -> None:
        self.index_dir = index_dir
        self.path = index_dir / GRAPH_DB
        self._db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._db.execute("CREATE TABLE IF NOT EXISTS chunks (label INTEGER PRIMARY KEY, node TEXT NOT NULL)")

    # ------------------------------------------------------------------ reads

    def _meta(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def current(self) -> bool:
        meta = self._meta()
        return meta.get("format") == str(STORE_FORMAT) and meta.get("extractor") == str(EXTRACTOR_VERSION)

    def load(self) -> EntityGraph | None:
        """The stored graph; the legacy ``graph.json`` migrated first if there is one. None when there
        is no graph of the current format and extractor (the caller rebuilds it from the chunks)."""
        legacy = self.index_dir / LEGACY_GRAPH_FILE
        if legacy.exists():
            if not self.current():
                migrated = _load_legacy(legacy)
                if migrated is not None:
                    self.replace_all(migrated)
            legacy.unlink()
        if not self.current():
            return None
        graph = EntityGraph()
        for label, row in self._db.execute("SELECT label, node FROM chunks ORDER BY label"):
            graph.add(int(label), ChunkNode.from_json(json.loads(row)))
        return graph

    def labels(self) -> set[int]:
        return {int(label) for (label,) in self._db.execute("SELECT label FROM chunks")}

    # ------------------------------------------------------------------ writes

    def apply(self, deleted: Iterable[int], added: Iterable[tuple[int, ChunkNode]]) -> None:
        """One transaction: rows of ``deleted`` go, ``added`` rows come (a label already there is replaced)."""
        rows = [(int(label), json.dumps(node.to_json(), ensure_ascii=False, separators=(",", ":"))) for label, node in added]
        gone = [(int(label),) for label in deleted]
        if not rows and not gone:
            return
        with self._transaction() as db:
            db.executemany("DELETE FROM chunks WHERE label = ?", gone)
            db.executemany("INSERT OR REPLACE INTO chunks (label, node) VALUES (?, ?)", rows)

    def replace_all(self, graph: EntityGraph) -> None:
        """The whole graph written anew, with the current format and extractor version (one transaction)."""
        rows = [
            (label, json.dumps(node.to_json(), ensure_ascii=False, separators=(",", ":")))
            for label, node in sorted(graph.nodes.items())
        ]
        with self._transaction() as db:
            db.execute("DELETE FROM chunks")
            db.executemany("INSERT INTO chunks (label, node) VALUES (?, ?)", rows)
            db.execute("DELETE FROM meta")
            db.executemany(
                "INSERT INTO meta (key, value) VALUES (?, ?)",
                [("format", str(STORE_FORMAT)), ("extractor", str(EXTRACTOR_VERSION))],
            )

    def close(self) -> None:
        self._db.close()

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, or ``ROLLBACK`` on an exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> sqlite3.Connection:
        self._db.execute("BEGIN IMMEDIATE")
        return self._db

    def __exit__(self, kind, value, traceback) -> None:  # type: ignore[no-untyped-def]
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")


def _load_legacy(path: Path) -> EntityGraph | None:
    """A format-1 ``graph.json`` (``{"format": 1, "extractor": v, "chunks": {label: row}}``) of the
    current extractor, or None."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if data.get("format") != 1 or data.get("extractor") != EXTRACTOR_VERSION:
        return None
    graph = EntityGraph()
    for label, row in data.get("chunks", {}).items():
        graph.add(int(label), ChunkNode.from_json(row))
    return graph
