"""The embedded index's directory: its file names, ``meta.json`` (format, dimension, model, next
label, and the graph state it vouches for), and the format upgrades.

``meta.json`` holds the format version. Format 2 added the ``content_hash`` keyword field; tantivy
cannot add a field to an existing index, so a format-1 directory is upgraded when opened: its chunks
are copied into a new tantivy index (same labels, so the vector graph stays valid), which then takes
the old one's place (see ``upgrade_tantivy``). Those chunks have no content hash until their
document is ingested again. Format 3 added ``readers`` (and made ``tenant`` the owning tenant rather
than a copy of ``metadata.tenant``): chunks of an older index are upgraded the same way and become
tenant ``default``, readers ``["*"]``.

Every file here is replaced by rename (``write_atomically``), so a kill -9 leaves the old or the new
one. Every reader of ``FORMAT_VERSION`` is in this module.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import tantivy
from tantivy import Query

from rag_common.identity import EVERYONE
from rag_retriever.backends.base import IndexMismatchError
from rag_retriever.backends.embedded.text_index import WRITER_HEAP_BYTES, all_hits, build_schema, to_document
from rag_retriever.records import DEFAULT_TENANT, ChunkRecord

logger = logging.getLogger(__name__)

#: 2: the ``content_hash`` keyword field. 3: ``readers``, and ``tenant`` the owning tenant. Older
#: formats in ``_UPGRADABLE_FORMATS`` are upgraded on open.
FORMAT_VERSION = 3
_UPGRADABLE_FORMATS = frozenset({1, 2})
TANTIVY_DIR = "tantivy"
#: Where the upgrade builds the new tantivy index, and where the old one waits until ``meta.json``
#: says the new format (see ``upgrade_tantivy``).
_UPGRADE_DIR = "tantivy.upgrading"
_PREVIOUS_DIR = "tantivy.previous"
HNSW_FILE = "vectors.hnsw"
META_FILE = "meta.json"


def write_atomically(path: Path, write: Any) -> None:
    """``write(tmp_path)`` then rename over ``path``, so a reader never sees a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def current_schema() -> tantivy.Schema:
    """The tantivy schema of ``FORMAT_VERSION``."""
    return build_schema(FORMAT_VERSION)


# ------------------------------------------------------------------ meta.json


def read_meta(index_dir: Path) -> dict[str, Any]:
    path = index_dir / META_FILE
    if not path.exists():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def check_meta(index_dir: Path, meta: dict[str, Any], dim: int, model_id: str) -> None:
    if not meta:
        return
    if meta.get("format") != FORMAT_VERSION and meta.get("format") not in _UPGRADABLE_FORMATS:
        raise IndexMismatchError(
            f"index at {index_dir} has format {meta.get('format')}, this code reads format {FORMAT_VERSION}"
            f" and upgrades formats {', '.join(map(str, sorted(_UPGRADABLE_FORMATS)))}"
        )
    if meta.get("dim") != dim:
        raise IndexMismatchError(
            f"index at {index_dir} holds {meta.get('dim')}-dimensional vectors (model "
            f"{meta.get('model_id')!r}) but the embedder makes {dim}-dimensional ones; "
            "use another index_dir or re-ingest"
        )
    if model_id and meta.get("model_id") and meta["model_id"] != model_id:
        raise IndexMismatchError(
            f"index at {index_dir} was built with model {meta['model_id']!r}, not {model_id!r}; "
            "vectors of different models are not comparable: use another index_dir or re-ingest"
        )


class IndexMeta:
    """What ``meta.json`` records of an open index: its model, the next label never handed out, and
    the graph state it vouches for (``graph_state``)."""

    def __init__(self, index_dir: Path, dim: int, model_id: str, meta: dict[str, Any]) -> None:
        self.index_dir = index_dir
        self.dim = dim
        self.model_id = model_id or meta.get("model_id", "")
        self.next_label = int(meta.get("next_label", 0))
        #: The graph is known to hold exactly the stored chunks' vectors, so ``meta.json`` may vouch
        #: for it. False until opened, and from a tantivy commit that raised until a full repair.
        self.graph_verified = False
        self.saved_graph_state: dict[str, int] | None = meta.get("graph_state")

    def reserve_labels(self, count: int) -> list[int]:
        """``count`` new labels, never handed out again whatever becomes of them."""
        labels = list(range(self.next_label, self.next_label + count))
        self.next_label += count
        return labels

    def vouches_for_graph(self) -> bool:
        """The saved graph state is the one on disk: the graph file matches tantivy's last commit."""
        return self.saved_graph_state is not None and self.saved_graph_state == graph_state(self.index_dir)

    def is_stale(self) -> bool:
        return self.saved_graph_state != graph_state(self.index_dir)

    def write(self) -> None:
        meta: dict[str, Any] = {
            "format": FORMAT_VERSION,
            "dim": self.dim,
            "space": "cosine",
            "model_id": self.model_id,
            "next_label": self.next_label,
        }
        # Only for a verified graph (never by the format upgrade, which runs before the open's check).
        state = graph_state(self.index_dir) if self.graph_verified else None
        if state is not None:
            meta["graph_state"] = state
        self.saved_graph_state = state
        write_atomically(
            self.index_dir / META_FILE, lambda tmp: tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8")
        )


def graph_state(index_dir: Path) -> dict[str, int] | None:
    """What ties the saved graph file to the tantivy commit it reflects: tantivy's opstamp (every
    commit raises it; merges keep it) and the graph file's size and modification time. Written to
    ``meta.json`` after every graph save while the graph is verified; an open that finds the same
    state skips the per-chunk repair. A crash between a commit and the graph save, a write that
    raised, or a graph file replaced on disk all leave a different state, hence the full repair."""
    try:
        tantivy_meta = json.loads((index_dir / TANTIVY_DIR / "meta.json").read_text(encoding="utf-8"))
        graph = (index_dir / HNSW_FILE).stat()
        return {"tantivy_opstamp": int(tantivy_meta["opstamp"]), "graph_bytes": graph.st_size,
                "graph_mtime_ns": graph.st_mtime_ns}
    except (OSError, ValueError, KeyError, TypeError):
        return None


# ------------------------------------------------------------------ format upgrade


def format_to_upgrade(meta: dict[str, Any]) -> int | None:
    """The older format ``meta`` names, which the open upgrades; None for the current one (or none)."""
    if meta.get("format", FORMAT_VERSION) != FORMAT_VERSION:
        return int(meta["format"])
    return None


def finish_or_undo_upgrade(index_dir: Path, meta: dict[str, Any]) -> None:
    """Clean up after an upgrade that a crash interrupted. The old index is kept (as
    ``_PREVIOUS_DIR``) until ``meta.json`` names the new format: if the meta still says the old
    format, the old index goes back in place (and is upgraded again); if it says the new one,
    the swap was complete and the old copy is removed."""
    tantivy_dir = index_dir / TANTIVY_DIR
    previous = index_dir / _PREVIOUS_DIR
    if previous.exists():
        if meta.get("format", FORMAT_VERSION) == FORMAT_VERSION:
            shutil.rmtree(previous)
        else:
            if tantivy_dir.exists():
                shutil.rmtree(tantivy_dir)
            previous.rename(tantivy_dir)
    shutil.rmtree(index_dir / _UPGRADE_DIR, ignore_errors=True)


def upgrade_tantivy(index_dir: Path, old_format: int, write_meta: Callable[[], None]) -> None:
    """Copy every chunk of the ``old_format`` tantivy index into a new one of ``FORMAT_VERSION``,
    labels and stored vectors unchanged, then swap the directories and ``write_meta()``.

    Crash-safe: the copy is built aside (``_UPGRADE_DIR``), the old index moved aside
    (``_PREVIOUS_DIR``) and removed only once ``meta.json`` says the new format, so a restart
    finds either the old index whole (and upgrades again) or the new one (see
    ``finish_or_undo_upgrade``).
    """
    tantivy_dir = index_dir / TANTIVY_DIR
    staging = index_dir / _UPGRADE_DIR
    previous = index_dir / _PREVIOUS_DIR
    old = tantivy.Index(build_schema(old_format), path=str(tantivy_dir), reuse=True)
    searcher = old.searcher()
    addresses = all_hits(searcher, Query.all_query()) if searcher.num_docs else []
    labels = searcher.fast_field_values("label", addresses) if addresses else []
    staging.mkdir()
    new = tantivy.Index(current_schema(), path=str(staging), reuse=False)
    writer = new.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
    for address, label in zip(addresses, labels, strict=True):
        stored = searcher.doc(address)
        record = ChunkRecord.from_payload(json.loads(stored.get_first("payload")))
        if old_format < 3:
            # Written before tenants and ACLs: everyone's, in the default tenant.
            record.tenant, record.readers = DEFAULT_TENANT, [EVERYONE]
        vector = np.frombuffer(stored.get_first("vector"), dtype="<f4")
        writer.add_document(to_document(record, vector, int(label)))
    writer.commit()
    writer.wait_merging_threads()
    del writer, new, searcher, old
    tantivy_dir.rename(previous)
    staging.rename(tantivy_dir)
    write_meta()
    shutil.rmtree(previous)
    logger.warning(
        "upgraded the index at %s from format %d to %d (%d chunks, now of tenant %r, readable by all "
        "of it); documents get a content hash when ingested again",
        index_dir, old_format, FORMAT_VERSION, len(addresses), DEFAULT_TENANT,
    )
