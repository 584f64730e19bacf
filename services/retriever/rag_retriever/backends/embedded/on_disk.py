"""The embedded index's directory: its file names, ``meta.json`` (format, dimension, model, next
label, and the graph state it vouches for), and the format upgrades.

``meta.json`` holds the format version. Format 2 added the ``content_hash`` keyword field; tantivy
cannot add a field to an existing index, so a format-1 directory is upgraded when opened: its chunks
are copied into a new tantivy index (same labels, so the vector graph stays valid), which then takes
the old one's place (see ``upgrade_tantivy``). Those chunks have no content hash until their
document is ingested again. Format 3 added ``readers`` (and made ``tenant`` the owning tenant rather
than a copy of ``metadata.tenant``): chunks of an older index are upgraded the same way and become
tenant ``default``, readers ``["*"]``. Format 4 replaced ``text``/``title`` (English-stemmed) by a
neutral field pair and one pair per configured language (``analyzers``), and records those languages
in ``meta.json``: an older index, or one made for another set of languages, is re-analysed the same
way from its stored chunks (their vectors reused: nothing is embedded again). Chunks without a
language get the one ``identify_document`` names for their document, as a fresh ingest would.

Every file here is replaced by rename (``write_atomically``), so a kill -9 leaves the old or the new
one. Every reader of ``FORMAT_VERSION`` is in this module.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np
import tantivy
from tantivy import Query

from rag_common.identity import EVERYONE
from rag_common.languages import LanguageIdentifier, identify_document
from rag_retriever.backends.base import IndexMismatchError
from rag_retriever.backends.embedded.analyzers import LexicalFields
from rag_retriever.backends.embedded.text_index import (
    WRITER_HEAP_BYTES,
    all_hits,
    build_schema,
    lexical_fields,
    to_document,
)
from rag_retriever.records import DEFAULT_TENANT, ChunkRecord

logger = logging.getLogger(__name__)

#: 2: the ``content_hash`` keyword field. 3: ``readers``, and ``tenant`` the owning tenant. 4: text
#: fields per language. Older formats in ``_UPGRADABLE_FORMATS`` are upgraded on open.
FORMAT_VERSION = 4
_UPGRADABLE_FORMATS = frozenset({1, 2, 3})
#: Characters of a document's chunks an upgrade identifies its language from (as ``identify_document``).
_IDENTIFY_CHARS = 4000
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


def current_fields(languages: list[str]) -> LexicalFields:
    """The text fields of ``FORMAT_VERSION`` for the configured ``languages``."""
    return lexical_fields(FORMAT_VERSION, languages)


def current_schema(lexical: LexicalFields) -> tantivy.Schema:
    """The tantivy schema of ``FORMAT_VERSION`` with the text fields ``lexical``."""
    return build_schema(FORMAT_VERSION, lexical)


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

    def __init__(self, index_dir: Path, dim: int, model_id: str, meta: dict[str, Any], languages: list[str]) -> None:
        self.index_dir = index_dir
        #: The languages the text fields are analysed in (sorted): a change re-analyses the index.
        self.languages = languages
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
            "languages": self.languages,
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


def format_to_upgrade(meta: dict[str, Any], languages: list[str]) -> int | None:
    """The format of an index the open upgrades: an older one, or the current one analysed for other
    languages than ``languages`` (re-analysed); None when it is current (or there is none)."""
    if not meta:
        return None
    if meta.get("format", FORMAT_VERSION) != FORMAT_VERSION:
        return int(meta["format"])
    if meta.get("languages") != languages:
        return FORMAT_VERSION
    return None


def finish_or_undo_upgrade(index_dir: Path, meta: dict[str, Any], languages: list[str]) -> None:
    """Clean up after an upgrade that a crash interrupted. The old index is kept (as
    ``_PREVIOUS_DIR``) until ``meta.json`` names the new format and ``languages``: if the meta still
    says the old ones, the old index goes back in place (and is upgraded again); if it says the new
    ones, the swap was complete and the old copy is removed."""
    tantivy_dir = index_dir / TANTIVY_DIR
    previous = index_dir / _PREVIOUS_DIR
    if previous.exists():
        if format_to_upgrade(meta, languages) is None:
            shutil.rmtree(previous)
        else:
            if tantivy_dir.exists():
                shutil.rmtree(tantivy_dir)
            previous.rename(tantivy_dir)
    shutil.rmtree(index_dir / _UPGRADE_DIR, ignore_errors=True)


def upgrade_tantivy(
    index_dir: Path, old_format: int, lexical: LexicalFields, identifier: LanguageIdentifier | None,
    write_meta: Callable[[], None],
) -> None:
    """Copy every chunk of the ``old_format`` tantivy index into a new one of ``FORMAT_VERSION`` with
    the text fields ``lexical`` (re-analysed from the stored text and title), labels and stored
    vectors unchanged, then swap the directories and ``write_meta()``. A chunk without a language
    takes its document's as ``identifier`` names it (None: left neutral).

    Crash-safe: the copy is built aside (``_UPGRADE_DIR``), the old index moved aside
    (``_PREVIOUS_DIR``) and removed only once ``meta.json`` says the new format, so a restart
    finds either the old index whole (and upgrades again) or the new one (see
    ``finish_or_undo_upgrade``).
    """
    tantivy_dir = index_dir / TANTIVY_DIR
    staging = index_dir / _UPGRADE_DIR
    previous = index_dir / _PREVIOUS_DIR
    # Opened with the schema it was written with: reading stored fields needs none of its tokenizers.
    old = tantivy.Index.open(str(tantivy_dir))
    searcher = old.searcher()
    addresses = all_hits(searcher, Query.all_query()) if searcher.num_docs else []
    labels = searcher.fast_field_values("label", addresses) if addresses else []

    def stored_chunk(address: tantivy.DocAddress) -> tuple[ChunkRecord, tantivy.Document]:
        stored = searcher.doc(address)
        record = ChunkRecord.from_payload(json.loads(stored.get_first("payload")))
        if old_format < 3:
            # Written before tenants and ACLs: everyone's, in the default tenant.
            record.tenant, record.readers = DEFAULT_TENANT, [EVERYONE]
        return record, stored

    languages_of = _document_languages(
        (stored_chunk(address)[0] for address in addresses), lexical.languages, identifier
    )
    staging.mkdir()
    new = tantivy.Index(current_schema(lexical), path=str(staging), reuse=False)
    lexical.register(new)
    writer = new.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
    for address, label in zip(addresses, labels, strict=True):
        record, stored = stored_chunk(address)
        if record.language is None:
            record.language = languages_of.get((record.tenant, record.doc_id))
        vector = np.frombuffer(stored.get_first("vector"), dtype="<f4")
        writer.add_document(to_document(record, vector, int(label), lexical))
    writer.commit()
    writer.wait_merging_threads()
    del writer, new, searcher, old
    tantivy_dir.rename(previous)
    staging.rename(tantivy_dir)
    write_meta()
    shutil.rmtree(previous)
    logger.warning(
        "upgraded the index at %s from format %d to %d (%d chunks re-analysed for languages %s, %d documents "
        "identified%s)", index_dir, old_format, FORMAT_VERSION, len(addresses), ", ".join(lexical.languages) or "none",
        sum(code is not None for code in languages_of.values()),
        f"; chunks now of tenant {DEFAULT_TENANT!r}, readable by all of it" if old_format < 3 else "",
    )
    if old_format < 2:
        logger.warning("documents of the index at %s get a content hash when ingested again", index_dir)


def _document_languages(
    chunks: Iterable[ChunkRecord], languages: list[str], identifier: LanguageIdentifier | None
) -> dict[tuple[str, str], str | None]:
    """(tenant, doc_id) -> the language ``identifier`` names for the documents that have chunks
    without one, from their first ``_IDENTIFY_CHARS`` characters (in stored order)."""
    if identifier is None:
        return {}
    samples: dict[tuple[str, str], list[str]] = {}
    for record in chunks:
        if record.language is not None:
            continue
        sample = samples.setdefault((record.tenant, record.doc_id), [])
        if sum(map(len, sample)) < _IDENTIFY_CHARS:
            sample.append(record.text)
    return {
        key: identify_document(identifier, " ".join(texts), languages).code for key, texts in samples.items()
    }
