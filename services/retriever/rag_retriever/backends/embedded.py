"""The embedded backend: tantivy (BM25, stored chunks, filter terms) + hnswlib (dense ANN) on local disk.

``EmbeddedIndex`` is the synchronous engine; ``EmbeddedBackend`` is the async ``SearchBackend`` over
it (each call in a worker thread, hybrid fused in-process by ``fusion.py``).

Tantivy is the source of truth: every chunk is stored there together with its vector and the integer
label it has in the HNSW graph. The graph is a derived index saved next to it. On open the two are
reconciled (labels missing from the graph are re-added from the stored vectors, labels tantivy no
longer has are marked deleted), so a crash between the tantivy commit and the graph save loses
nothing. Labels are never reused, which is what makes that reconciliation unambiguous. An open after
a clean close skips its per-chunk checks: ``meta.json`` records the state the saved graph matches
(``_graph_state``), and unreachable graph elements are re-linked by a background sweep. Every write
(an upsert, a delete, an ingest request's replacement of its documents) is one tantivy commit, which
tantivy makes atomic (segments first, then its ``meta.json`` swapped in), and the graph and this
index's ``meta.json`` are replaced by rename: a kill -9 at any point leaves each document as it was
before the write or as after it (``tests/retriever/test_retriever_crash_consistency.py`` kills a writer at each
of those points and at random ones).

The structure-and-entity graph (``rag_retriever.entity_graph``: chunk → section → document, chunk ↔
entity) is a second derived index, handled like the vector graph: updated right after the
tantivy commit, its changed rows written in one SQLite transaction (``graph.sqlite``,
``rag_retriever.entity_graph_store``: a write costs its own chunks; an older ``graph.json`` is
migrated on open), reconciled with the stored chunks on open
(re-extracted from their payloads where missing, dropped where tantivy no longer has them), and
counted by ``consistency()``. ``graph_search`` runs the graph signals over it
(``rag_retriever.graph_retrieval``).

``with_vectors`` reads a hit's vector from the same stored tantivy document as its payload (the
exact float32 bytes upserted), not from hnswlib, whose cosine space keeps a re-normalised copy.

``meta.json`` holds the format version. Format 2 added the ``content_hash`` keyword field; tantivy
cannot add a field to an existing index, so a format-1 directory is upgraded when opened: its chunks
are copied into a new tantivy index (same labels, so the vector graph stays valid), which then takes
the old one's place (see ``_upgrade_tantivy``). Those chunks have no content hash until their
document is ingested again. Format 3 added ``readers`` (and made ``tenant`` the owning tenant rather
than a copy of ``metadata.tenant``): chunks of an older index are upgraded the same way and become
tenant ``default``, readers ``["*"]``.

Access (``AccessFilter``) is enforced inside both searches: the BM25 query is the user's query AND
``tenant`` AND any of the ``readers``; the ANN search passes hnswlib a filter over labels, answered
from an in-memory ``label -> (tenant, readers)`` map (``_access_of``, rebuilt on open, kept in step
with every write), so a narrow ACL still returns ``k`` hits: the graph walk skips unreadable
neighbours instead of a too-small candidate set being filtered afterwards.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import threading
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hnswlib
import numpy as np
import tantivy
from tantivy import Occur, Query

from rag_common.identity import EVERYONE
from rag_common.schemas import DocumentInfo, SentenceVectors
from rag_retriever.backends.base import (
    FILTER_FIELDS,
    AccessFilter,
    MAX_DOCUMENTS_PER_CONTENT,
    Filters,
    FusionSettings,
    IndexMismatchError,
)
from rag_retriever.entity_graph import ChunkNode, EntityGraph, chunk_node
from rag_retriever.entity_graph_store import GraphStore
from rag_retriever.fusion import candidates_per_list, min_max_scores, rrf_scores
from rag_retriever.fusion_candidates import FusionCandidates, fusion_candidates
from rag_retriever.graph_retrieval import GraphOptions, graph_search
from rag_retriever.records import DEFAULT_TENANT, ChunkRecord, ScoredChunk

logger = logging.getLogger(__name__)

#: 2: the ``content_hash`` keyword field. 3: ``readers``, and ``tenant`` the owning tenant. Older
#: formats in ``_UPGRADABLE_FORMATS`` are upgraded on open.
FORMAT_VERSION = 3
_UPGRADABLE_FORMATS = frozenset({1, 2})
TANTIVY_DIR = "tantivy"
#: Where the upgrade builds the new tantivy index, and where the old one waits until ``meta.json``
#: says the new format (see ``_upgrade_tantivy``).
_UPGRADE_DIR = "tantivy.upgrading"
_PREVIOUS_DIR = "tantivy.previous"
HNSW_FILE = "vectors.hnsw"
META_FILE = "meta.json"

_KEYWORD_FIELDS = ("chunk_id", "doc_id", "source", "tenant", "content_type", "content_hash", "readers")
#: The format that added each keyword field not in format 1.
_FIELD_SINCE = {"content_hash": 2, "readers": 3}
#: Keyword fields that aggregations read (``list_documents``, ``documents_with_content``).
_FAST_FIELDS = ("doc_id", "content_hash")
_TEXT_FIELDS = ("text", "title")
_INITIAL_CAPACITY = 1024
_WRITER_HEAP_BYTES = 50_000_000
# Tantivy's default cap on aggregation buckets; list_documents cannot list more documents than this.
_MAX_LISTED_DOCUMENTS = 65_000
#: Content hashes per aggregation in ``documents_with_content``.
_LOOKUP_BATCH = 1000
#: Labels per batch when reconcile compares the graph's vectors with the stored ones.
_VERIFY_BATCH = 4096
#: Labels per locked step of the background re-link sweep: a search waits at most one step
#: (16 self-searches, ~5 ms at 100k chunks).
_SWEEP_BATCH = 16
#: Pause between two steps, outside the lock: without it the sweep takes the lock straight back
#: (Python's locks are not fair) and searches queue behind many steps.
_SWEEP_PAUSE_S = 0.002
#: Distinct (tenant, readers) pairs up to which a dense search checks whether the caller reads them
#: all (then the graph walk runs unfiltered); an index with more always filters.
_MAX_ACCESS_PAIRS_CHECKED = 64
#: Vectors a write adds to the graph per locked step while it is prepared: a search waits at most one
#: step (64 insertions, ~20 ms at ef_construction 200), instead of the whole write's (8,000 chunks:
#: 2.5 s; issue 29). Paused between steps like the sweep, for the same reason.
_STAGE_STEP = 64


def _build_schema(format_version: int) -> tantivy.Schema:
    """The tantivy schema of ``format_version`` (older ones lack fields; the upgrade reads them)."""
    builder = tantivy.SchemaBuilder()
    for name in _KEYWORD_FIELDS:
        if _FIELD_SINCE.get(name, 1) > format_version:
            continue
        # "raw" keeps the whole value as one term: filters and deletes are exact matches.
        builder.add_text_field(name, fast=(name in _FAST_FIELDS), tokenizer_name="raw", index_option="basic")
    for name in _TEXT_FIELDS:
        builder.add_text_field(name, tokenizer_name="en_stem")
    builder.add_unsigned_field("label", indexed=True, fast=True)
    builder.add_bytes_field("payload", stored=True)
    builder.add_bytes_field("vector", stored=True)
    return builder.build()


def _query_analyzer() -> tantivy.TextAnalyzer:
    # Same chain as tantivy's built-in "en_stem", so query terms equal the indexed terms.
    return (
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
        .filter(tantivy.Filter.remove_long(40))
        .filter(tantivy.Filter.lowercase())
        .filter(tantivy.Filter.stemmer("english"))
        .build()
    )


def _write_atomically(path: Path, write: Any) -> None:
    """``write(tmp_path)`` then rename over ``path``, so a reader never sees a half-written file."""
    tmp = path.with_name(path.name + ".tmp")
    write(tmp)
    with open(tmp, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(tmp, path)


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


class EmbeddedIndex:
    def __init__(
        self,
        index_dir: str | Path,
        dim: int,
        hnsw_m: int = 16,
        ef_construction: int = 200,
        ef_search: int = 100,
        *,
        model_id: str = "",
    ) -> None:
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self.index_dir = Path(index_dir)
        self.dim = dim
        self._hnsw_m = hnsw_m
        self._ef_construction = ef_construction
        self._ef_search = ef_search
        self._lock = threading.RLock()
        #: Serialises writes (taken before ``_lock``, never after it): a write prepares outside
        #: ``_lock`` (``_prepare``), so another write must not start meanwhile.
        self._write_lock = threading.RLock()
        #: The write prepared and not yet committed: its labels are in the graph but not live.
        self._pending: PreparedWrite | None = None
        self._closed = False

        self.index_dir.mkdir(parents=True, exist_ok=True)
        meta = self._read_meta()
        self._check_meta(meta, model_id)
        self._model_id = model_id or meta.get("model_id", "")
        self._next_label = int(meta.get("next_label", 0))

        #: The graph is known to hold exactly the stored chunks' vectors, so ``meta.json`` may vouch
        #: for it (``_graph_state``). False until opened, and from a tantivy commit that raised until
        #: a full repair.
        self._graph_verified = False
        self._saved_graph_state: dict[str, int] | None = meta.get("graph_state")
        self._sweep: threading.Thread | None = None

        self._schema = _build_schema(FORMAT_VERSION)
        tantivy_dir = self.index_dir / TANTIVY_DIR
        self._finish_or_undo_upgrade(meta)
        if meta.get("format", FORMAT_VERSION) != FORMAT_VERSION:
            self._upgrade_tantivy(int(meta["format"]))
        tantivy_dir.mkdir(exist_ok=True)
        self._index = tantivy.Index(self._schema, path=str(tantivy_dir), reuse=True)
        try:
            self._writer = self._index.writer(heap_size=_WRITER_HEAP_BYTES, num_threads=1)
        except ValueError as exc:
            raise RuntimeError(f"index at {self.index_dir} is locked (in use by another process?): {exc}") from exc
        # A writer killed between writing a commit's files and swapping tantivy's meta.json leaves those
        # files behind, and the next commit reuses its opstamps, so it names its delete file
        # `<segment>.<opstamp>.del` exactly as the dead one did: the write fails (FileAlreadyExists), or
        # a later garbage collection takes the new file for the leftover and the acknowledged deletes
        # are undone. Collecting now, before any commit of ours, removes the leftovers first
        # (tests/retriever/test_retriever_crash_consistency.py, the stale-delete-file test).
        self._writer.garbage_collect_files()
        self._analyzer = _query_analyzer()
        self._hnsw = self._open_graph()
        self._graph_store = GraphStore(self.index_dir)
        loaded = self._graph_store.load()
        #: Rebuilt from the stored chunks when absent, unreadable or of another extractor version.
        self._entity_graph_loaded = loaded is not None
        self._entity_graph = loaded or EntityGraph()
        self._live = 0
        #: label -> (tenant, readers) of every live chunk: what the ANN filter reads.
        self._access_of: dict[int, tuple[str, frozenset[str]]] = {}
        #: How many live labels carry each (tenant, readers) pair: ``_reads_everything`` asks these.
        self._access_pairs: Counter[tuple[str, frozenset[str]]] = Counter()
        if self._saved_graph_state is not None and self._saved_graph_state == self._graph_state():
            self._open_verified_graph()
        else:
            self._reconcile()

    # ------------------------------------------------------------------ writes

    def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        self._write([], chunks, vectors)

    def replace_documents(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> None:
        """Delete ``doc_ids`` of ``tenant`` and add ``chunks`` in one tantivy commit (see ``_write``)."""
        self._write([self._doc_query(doc_id, tenant) for doc_id in dict.fromkeys(doc_ids)], chunks, vectors)

    def prepare_replacement(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> PreparedWrite | None:
        """The first half of ``replace_documents``, out of sight of searches: commit it with
        ``commit_prepared`` (or drop it with ``abandon_prepared``); no other write may come between.
        None when there is nothing to write. Lets the ingestor hold its readers-writer lock alone for
        the commit only (``Ingestor._write``)."""
        with self._write_lock:
            return self._prepare([self._doc_query(doc_id, tenant) for doc_id in dict.fromkeys(doc_ids)], chunks, vectors)

    def commit_prepared(self, prepared: PreparedWrite | None) -> None:
        """The second half of ``replace_documents`` (see ``_commit``)."""
        if prepared is not None:
            with self._write_lock:
                self._commit(prepared)

    def abandon_prepared(self, prepared: PreparedWrite | None) -> None:
        """Drop a prepared write that will not be committed: nothing of it was ever visible."""
        if prepared is not None:
            with self._write_lock:
                self._abandon(prepared)

    def _write(self, removed: list[tantivy.Query], chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        """Delete the chunks matching any of ``removed`` or sharing a ``chunk_id`` with ``chunks``, add
        ``chunks``: one tantivy commit, so a kill -9 leaves all of it or none of it on disk. The graph
        follows (``_update_graph``); a crash before it is saved is repaired on open (``_reconcile``).

        Two steps (``_prepare``, ``_commit``) so that searches wait for the commit only: preparing
        8,000 chunks (their tantivy documents, entity nodes and graph insertions) took seconds under
        the lock a search needs, the commit a fraction of that (docs/retriever.md, "Limits and the
        ingest pool")."""
        with self._write_lock:
            prepared = self._prepare(removed, chunks, vectors)
            if prepared is not None:
                self._commit(prepared)

    def _prepare(self, removed: list[tantivy.Query], chunks: list[ChunkRecord], vectors: np.ndarray) -> PreparedWrite | None:
        """Everything of a write that searches cannot see yet: the labels it replaces (read now: no
        other write comes between), new labels reserved, its deletes and documents queued in tantivy's
        writer (invisible until the commit), its entity nodes, and its vectors added to the HNSW graph
        in steps of ``_STAGE_STEP`` under the index lock, a search waiting at most one step. Searches
        skip those labels until the commit makes them live (``_dense_labels``: only labels in the
        access map are returned while a write is pending)."""
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(chunks), self.dim):
            raise ValueError(f"expected vectors of shape ({len(chunks)}, {self.dim}), got {vectors.shape}")
        if not chunks and not removed:
            return None
        if not np.isfinite(vectors).all():
            raise ValueError("vectors contain NaN or infinity")
        # The same chunk_id twice in one batch: the last one wins, as if upserted one after the other.
        row_of = {chunk.chunk_id: row for row, chunk in enumerate(chunks)}
        rows = sorted(row_of.values())
        with self._lock:
            self._ensure_open()
            if self._pending is not None:
                # Its owner went away without committing or abandoning it (a cancelled request).
                logger.warning("dropping a prepared write that was never committed")
                self._abandon(self._pending)
            searcher = self._index.searcher()
            replaced = set(self._labels_matching(searcher, Query.term_set_query(self._schema, "chunk_id", list(row_of))))
            for query in removed:
                replaced.update(self._labels_matching(searcher, query))
            if not replaced and not rows:
                return None
            # Reserved now and never handed out again, whatever becomes of this write: two chunks must
            # never share a label (a commit that raised may still be on disk).
            labels = list(range(self._next_label, self._next_label + len(rows)))
            self._next_label += len(rows)
            prepared = PreparedWrite(
                replaced=sorted(replaced), labels=labels, chunks=[chunks[row] for row in rows], vectors=vectors[rows]
            )
            # With replace_deleted, deleted slots are reused first: live + new must fit. Resizing is
            # not safe beside a search, so it happens here, under the lock.
            needed = self._live + len(labels)
            capacity = self._hnsw.get_max_elements()
            if needed > capacity:
                self._hnsw.resize_index(max(needed, capacity * 2))
            self._pending = prepared
        try:
            for query in removed:
                self._writer.delete_documents_by_query(query)
            for chunk_id in row_of:
                self._writer.delete_documents_by_term("chunk_id", chunk_id)
            for label, chunk, vector in zip(labels, prepared.chunks, prepared.vectors, strict=True):
                self._writer.add_document(self._to_document(chunk, vector, label))
            prepared.nodes = [(label, chunk_node(chunk)) for label, chunk in zip(labels, prepared.chunks, strict=True)]
            for start in range(0, len(labels), _STAGE_STEP):
                with self._lock:
                    self._ensure_open()
                    stop = min(start + _STAGE_STEP, len(labels))
                    self._hnsw.add_items(prepared.vectors[start:stop], labels[start:stop], num_threads=1, replace_deleted=True)
                    prepared.staged = stop
                time.sleep(_SWEEP_PAUSE_S)
        except BaseException:
            self._abandon(prepared)
            raise
        return prepared

    def _commit(self, prepared: PreparedWrite) -> None:
        """Make a prepared write visible, under the lock searches take: tantivy's commit, the access
        map, the entity graph, the replaced labels deleted from the graph (its new vectors are in
        already) and the graph saved."""
        with self._lock:
            self._ensure_open()
            if self._pending is not prepared:
                raise RuntimeError("this write was dropped: another write came between its preparation and commit")
            try:
                self._writer.commit()
            except Exception:
                # A commit that raised may still be on disk (tantivy swaps its meta.json before some of
                # its clean-up): the graph may lack its chunks until the next open repairs it in full.
                self._abandon(prepared)
                self._graph_verified = False
                raise
            self._pending = None
            self._index.reload()
            for label in prepared.replaced:
                self._forget_access(label)
            for label, chunk in zip(prepared.labels, prepared.chunks, strict=True):
                self._remember_access(label, chunk)
            self._update_entity_graph(
                prepared.replaced, list(zip(prepared.labels, prepared.chunks, strict=True)), nodes=prepared.nodes
            )
            self._update_graph(deleted=prepared.replaced, labels=prepared.labels, vectors=prepared.vectors, staged=True)

    def _abandon(self, prepared: PreparedWrite) -> None:
        """Undo a prepared write: tantivy's queued operations rolled back, its staged vectors marked
        deleted (their labels are never reused). The graph file on disk never had them."""
        with self._lock:
            if self._pending is not prepared:
                return  # committed, or dropped already
            self._pending = None
            if self._closed:
                return
            self._writer.rollback()
            for label in prepared.labels[: prepared.staged]:
                self._hnsw.mark_deleted(label)
            prepared.staged = 0

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> int:
        with self._write_lock:
            self._ensure_open()
            query = self._doc_query(doc_id, tenant)
            deleted = len(self._labels_matching(self._index.searcher(), query))
            if deleted:
                self._write([query], [], np.zeros((0, self.dim), dtype=np.float32))
            return deleted

    def close(self) -> None:
        with self._write_lock, self._lock:
            if self._closed:
                return
            if self._pending is not None:
                self._abandon(self._pending)
            self._closed = True
            try:
                self._writer.wait_merging_threads()
            finally:
                # Dropping the writer releases tantivy's directory lock, so the index can be reopened.
                self._writer = None
                self._hnsw = None
                self._graph_store.close()
        # Outside the lock: the sweep takes it for each step and stops at the first one after close.
        self.wait_for_graph_sweep()

    def wait_for_graph_sweep(self, timeout: float | None = None) -> bool:
        """Wait for the background re-link sweep of a verified open (``_open_verified_graph``);
        True once none is running."""
        sweep = self._sweep
        if sweep is not None and sweep is not threading.current_thread():
            sweep.join(timeout)
            return not sweep.is_alive()
        return True

    # ------------------------------------------------------------------ reads

    def document_chunk_ids(self, doc_id: str, *, tenant: str | None = None) -> set[str]:
        searcher = self._searcher()
        return {record.chunk_id for record in self._records_matching(searcher, self._doc_query(doc_id, tenant))}

    def document_fingerprint(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        searcher = self._searcher()
        hits = searcher.search(self._doc_query(doc_id, tenant), limit=1).hits
        return self._record(searcher, hits[0][1]).doc_fingerprint if hits else None

    def document_vectors(self, doc_id: str, *, tenant: str | None = None) -> dict[str, np.ndarray]:
        searcher = self._searcher()
        vectors = {}
        for address in self._all_hits(searcher, self._doc_query(doc_id, tenant)):
            stored = searcher.doc(address)
            record = ChunkRecord.from_payload(json.loads(stored.get_first("payload")))
            vectors[record.chunk_id] = np.frombuffer(stored.get_first("vector"), dtype="<f4").astype(np.float32)
        return vectors

    def document_sentence_vectors(
        self, doc_id: str, *, tenant: str | None = None
    ) -> dict[str, tuple[str, SentenceVectors | None]]:
        searcher = self._searcher()
        return {
            record.chunk_id: (record.text, record.sentence_vectors)
            for record in self._records_matching(searcher, self._doc_query(doc_id, tenant))
        }

    def document_readers(self, doc_ids: Collection[str], *, tenant: str) -> dict[str, list[str]]:
        searcher = self._searcher()
        readers = {}
        for doc_id in sorted(set(doc_ids)):
            # Every chunk of a document carries the same readers: one hit says them.
            hits = searcher.search(self._doc_query(doc_id, tenant), limit=1).hits
            if hits:
                readers[doc_id] = list(self._record(searcher, hits[0][1]).readers)
        return readers

    def search_bm25(
        self, query: str, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        text_query = self._bm25_query(query, filters, access)
        if text_query is None or k <= 0:
            return []
        searcher = self._searcher()
        hits = searcher.search(text_query, limit=k).hits
        return [self._scored(searcher.doc(address), float(score), with_vectors) for score, address in hits]

    def _bm25_query(self, query: str, filters: Filters | None, access: AccessFilter | None) -> tantivy.Query | None:
        """BM25 over text and title, restricted by the field filters and the caller's access; None
        when the query has no term."""
        filter_query = self._restricted(self._filter_query(filters), access)
        terms = list(dict.fromkeys(self._analyzer.analyze(query)))
        if not terms:
            return None
        text_query = Query.boolean_query(
            [(Occur.Should, Query.term_query(self._schema, field, term)) for term in terms for field in _TEXT_FIELDS]
        )
        if filter_query is not None:
            # Constant score 0: the filter decides membership and leaves the BM25 score untouched.
            text_query = Query.boolean_query(
                [(Occur.Must, text_query), (Occur.Must, Query.const_score_query(filter_query, 0.0))]
            )
        return text_query

    def search_dense(
        self, vector: np.ndarray, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        with self._lock:
            self._ensure_open()
            searcher = self._index.searcher()
            labels, scores = self._dense_labels(searcher, vector, k, filters, access)
            documents = self._documents_by_label(searcher, labels)
        return [
            self._scored(documents[label], score, with_vectors)
            for label, score in zip(labels, scores, strict=True)
            if label in documents
        ]

    def _dense_labels(
        self, searcher: tantivy.Searcher, vector: np.ndarray, k: int, filters: Filters | None, access: AccessFilter | None
    ) -> tuple[list[int], list[float]]:
        """The ``k`` nearest readable labels and their ``(1 + cosine) / 2`` scores (under the lock)."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self.dim:
            raise ValueError(f"query vector has dimension {query.shape[0]}, index has {self.dim}")
        filter_query = self._filter_query(filters)
        allowed: Callable[[int], bool] | None = None
        k = min(k, self._live)
        if filter_query is not None:
            # Field filters: the exact set of matching (and readable) labels, from tantivy.
            matching = set(self._labels_matching(searcher, self._restricted(filter_query, access)))
            allowed = matching.__contains__
            k = min(k, len(matching))
        elif access is not None and not self._reads_everything(access):
            access_of = self._access_of

            def allowed(label: int) -> bool:
                entry = access_of.get(label)
                return entry is not None and access.allows(*entry)

        elif self._pending is not None:
            # A write is being prepared: its vectors are in the graph but not live yet (the access map
            # has the live labels only).
            allowed = self._access_of.__contains__
        if k <= 0:
            return [], []
        labels, distances = self._nearest(query, k, allowed)
        # hnswlib's cosine distance is 1 - cos; (1 + cos) / 2 = 1 - distance / 2.
        scores = np.clip(1.0 - np.asarray(distances, dtype=np.float64) / 2.0, 0.0, 1.0)
        return labels, [float(score) for score in scores]

    def _remember_access(self, label: int, record: ChunkRecord) -> None:
        pair = (record.tenant, frozenset(record.readers))
        self._access_of[label] = pair
        self._access_pairs[pair] += 1

    def _forget_access(self, label: int) -> None:
        pair = self._access_of.pop(label, None)
        if pair is not None:
            self._access_pairs[pair] -= 1
            if self._access_pairs[pair] <= 0:
                del self._access_pairs[pair]

    def _reads_everything(self, access: AccessFilter) -> bool:
        """Whether ``access`` may read every live chunk, so the graph walk needs no per-node filter
        (a Python call per visited node: a quarter of a dense search at 100k chunks). Decided over
        the index's distinct (tenant, readers) pairs, which are few; with many, the filter runs."""
        pairs = self._access_pairs
        return len(pairs) <= _MAX_ACCESS_PAIRS_CHECKED and all(access.allows(*pair) for pair in pairs)

    def search_hybrid(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, fusion: FusionSettings,
        *, access: AccessFilter | None = None, with_vectors: bool = False,
    ) -> list[ScoredChunk]:
        """Both lists as labels and scores, fused, and only then the documents of the fused top ``k``
        read: reading and decoding a stored chunk (its payload, with its sentence vectors) is most of
        a list's cost, and fusion keeps ``k`` of ``2 * candidates_per_list(k)``. The order is
        ``min_max_fusion``'s / ``rrf_fusion``'s: score, then chunk id among equal scores (every
        label tied with the ``k``-th is read to break ties as they do)."""
        candidates = candidates_per_list(k)
        text_query = self._bm25_query(query, filters, access)
        with self._lock:
            self._ensure_open()
            searcher = self._index.searcher()
            labels, scores = self._dense_labels(searcher, vector, candidates, filters, access)
            bm25 = searcher.search(text_query, limit=candidates).hits if text_query is not None else []
            addresses = [address for _, address in bm25]
            bm25_labels = [int(label) for label in searcher.fast_field_values("label", addresses)] if addresses else []
            dense_list = list(zip(labels, scores, strict=True))
            bm25_list = [(label, float(score)) for label, (score, _) in zip(bm25_labels, bm25, strict=True)]
            if fusion.method == "rrf":
                fused = rrf_scores(dense_list, bm25_list, fusion.rank_constant)
            else:
                fused = min_max_scores(dense_list, bm25_list, fusion.dense_weight)
            ranked = sorted(fused, key=lambda label: -fused[label])
            address_of = dict(zip(bm25_labels, addresses, strict=True))
            documents: dict[int, tantivy.Document] = {}
            start = 0
            # Normally one round: the top k and their ties. More only if a label has no document.
            while start < len(ranked) and len(documents) < k:
                stop = min(start + k - len(documents), len(ranked))
                while stop < len(ranked) and fused[ranked[stop]] == fused[ranked[stop - 1]]:
                    stop += 1
                chosen = ranked[start:stop]
                documents.update((label, searcher.doc(address_of[label])) for label in chosen if label in address_of)
                documents.update(self._documents_by_label(searcher, [label for label in chosen if label not in address_of]))
                start = stop
        hits = [self._scored(document, fused[label], with_vectors) for label, document in documents.items()]
        hits.sort(key=lambda hit: (-hit.score, hit.chunk.chunk_id))
        return hits[:k]

    def documents_with_content(
        self, hashes: Collection[str], *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> dict[str, list[str]]:
        wanted = sorted(set(hashes))
        searcher = self._searcher()
        holders: dict[str, list[str]] = {}
        if searcher.num_docs == 0:
            return holders
        # One bucket per hash, so a batch stays far below tantivy's cap on aggregation buckets.
        for start in range(0, len(wanted), _LOOKUP_BATCH):
            batch = wanted[start : start + _LOOKUP_BATCH]
            aggregation = {
                "hashes": {
                    "terms": {"field": "content_hash", "size": len(batch)},
                    "aggs": {"docs": {"terms": {"field": "doc_id", "size": MAX_DOCUMENTS_PER_CONTENT}}},
                }
            }
            query = self._in_tenant(Query.term_set_query(self._schema, "content_hash", batch), tenant)
            result = searcher.aggregate(self._restricted(query, access), aggregation)
            for bucket in result["hashes"]["buckets"]:
                holders[bucket["key"]] = sorted(doc["key"] for doc in bucket["docs"]["buckets"])
        return holders

    def list_documents(self, *, tenant: str | None = None, access: AccessFilter | None = None) -> list[DocumentInfo]:
        searcher = self._searcher()
        if searcher.num_docs == 0:
            return []
        result = searcher.aggregate(
            self._restricted(self._in_tenant(Query.all_query(), tenant), access),
            {"docs": {"terms": {"field": "doc_id", "size": _MAX_LISTED_DOCUMENTS}}},
        )
        documents = []
        for bucket in result["docs"]["buckets"]:
            hits = searcher.search(self._doc_query(bucket["key"], tenant), limit=1).hits
            if not hits:
                continue
            record = self._record(searcher, hits[0][1])
            documents.append(
                DocumentInfo(
                    doc_id=record.doc_id,
                    title=record.title,
                    source=record.source,
                    chunks=bucket["doc_count"],
                    content_hash=record.content_hash,
                )
            )
        return sorted(documents, key=lambda info: info.doc_id)

    def consistency(self) -> IndexConsistency:
        """How the stored chunks and the vector graph agree, read from what is loaded (after
        ``_reconcile``); what the crash tests and ``bench/ingest_chaos.py`` check."""
        with self._lock:
            self._ensure_open()
            searcher = self._index.searcher()
            addresses = self._all_hits(searcher, Query.all_query()) if searcher.num_docs else []
            stored = [int(label) for label in searcher.fast_field_values("label", addresses)] if addresses else []
            chunk_ids = Counter(self._record(searcher, address).chunk_id for address in addresses)
            labels = [int(label) for label in self._hnsw.get_ids_list()]
            in_graph = set(labels) - set(self._marked_deleted(labels))
            in_entity_graph = self._entity_graph.labels()
            return IndexConsistency(
                chunks=len(stored),
                graph_vectors=len(in_graph),
                missing_from_graph=len(set(stored) - in_graph),
                stale_in_graph=len(in_graph - set(stored)),
                duplicate_chunk_ids=sum(count - 1 for count in chunk_ids.values()),
                missing_from_entity_graph=len(set(stored) - in_entity_graph),
                stale_in_entity_graph=len(in_entity_graph - set(stored)),
            )

    # ------------------------------------------------------------------ structure-and-entity graph

    @property
    def graph(self) -> EntityGraph:
        return self._entity_graph

    def chunks_by_labels(
        self, labels: Collection[int], filters: Filters | None, access: AccessFilter | None, *, with_vectors: bool
    ) -> dict[int, ScoredChunk]:
        """The stored chunks of ``labels`` that pass ``filters`` and ``access`` (score 0)."""
        if not labels:
            return {}
        query = Query.term_set_query(self._schema, "label", [int(label) for label in labels])
        restriction = self._restricted(self._filter_query(filters), access)
        if restriction is not None:
            query = Query.boolean_query([(Occur.Must, query), (Occur.Must, restriction)])
        with self._lock:
            searcher = self._searcher()
            addresses = self._all_hits(searcher, query)
            if not addresses:
                return {}
            found = searcher.fast_field_values("label", addresses)
            return {
                int(label): self._scored(searcher.doc(address), 0.0, with_vectors)
                for label, address in zip(found, addresses, strict=True)
            }

    def graph_search(
        self, query: str, hits: list[ScoredChunk], k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, hop: bool, options: GraphOptions,
    ) -> tuple[list[ScoredChunk], dict[str, Any]]:
        """``hits`` re-scored and extended by the graph signals (``rag_retriever.graph_retrieval``)."""
        with self._lock:
            self._ensure_open()
            return graph_search(self, query, hits, k, filters, access, with_vectors=with_vectors, ppr=ppr, hop=hop,
                                options=options)

    def fusion_candidates(
        self, query: str, dense: list[ScoredChunk], bm25: list[ScoredChunk], k: int, filters: Filters | None,
        access: AccessFilter | None, *, with_vectors: bool, ppr: bool, options: GraphOptions, dense_weight: float,
    ) -> FusionCandidates:
        """Learned fusion's candidates and their signals (``rag_retriever.fusion_candidates``)."""
        with self._lock:
            self._ensure_open()
            return fusion_candidates(self, query, dense, bm25, k, filters, access, with_vectors=with_vectors,
                                     ppr=ppr, options=options, dense_weight=dense_weight)

    def _update_entity_graph(
        self, deleted: list[int], added: list[tuple[int, ChunkRecord]], *, nodes: list[tuple[int, ChunkNode]] | None = None
    ) -> None:
        """After a tantivy commit: its replaced labels leave the graph, its new chunks join; their rows
        written in one SQLite transaction (cost: the write's chunks, not the graph). A crash before it
        commits is repaired on open (``_reconcile``). ``nodes``: the chunks' nodes, made beforehand
        (``_prepare``: entity extraction is most of the cost, and needs no lock)."""
        try:
            if nodes is None:
                nodes = [(label, chunk_node(chunk)) for label, chunk in added]
            self._entity_graph.remove(deleted)
            for label, node in nodes:
                self._entity_graph.add(label, node)
            self._graph_store.apply(deleted, nodes)
        except Exception:
            logger.exception("entity graph update failed; reconciling with the stored chunks")
            # Start again from what the file holds, so the repair writes whatever it lacks.
            loaded = self._graph_store.load()
            self._entity_graph_loaded = loaded is not None
            self._entity_graph = loaded or EntityGraph()
            self._reconcile()
            raise

    def count(self) -> int:
        return self._searcher().num_docs

    # ------------------------------------------------------------------ tantivy helpers

    def _searcher(self) -> tantivy.Searcher:
        self._ensure_open()
        return self._index.searcher()

    def _ensure_open(self) -> None:
        if self._closed:
            raise RuntimeError("the index is closed")

    def _doc_query(self, doc_id: str, tenant: str | None = None) -> tantivy.Query:
        return self._in_tenant(Query.term_query(self._schema, "doc_id", doc_id), tenant)

    def _in_tenant(self, query: tantivy.Query, tenant: str | None) -> tantivy.Query:
        """``query`` AND ``tenant`` (None: any tenant)."""
        if tenant is None:
            return query
        in_tenant = Query.term_query(self._schema, "tenant", tenant)
        return Query.boolean_query([(Occur.Must, query), (Occur.Must, in_tenant)])

    def _access_query(self, access: AccessFilter) -> tantivy.Query:
        """The chunks ``access`` may read: its tenant AND any of its principals among the readers."""
        return Query.boolean_query(
            [
                (Occur.Must, Query.term_query(self._schema, "tenant", access.tenant)),
                (Occur.Must, Query.term_set_query(self._schema, "readers", list(access.principals))),
            ]
        )

    def _restricted(self, filter_query: tantivy.Query | None, access: AccessFilter | None) -> tantivy.Query | None:
        """The field filters AND the access filter (either may be absent)."""
        if access is None:
            return filter_query
        access_query = self._access_query(access)
        if filter_query is None:
            return access_query
        return Query.boolean_query([(Occur.Must, filter_query), (Occur.Must, access_query)])

    def _filter_query(self, filters: Filters | None) -> tantivy.Query | None:
        if not filters:
            return None
        clauses = []
        for field, values in filters.items():
            if field not in FILTER_FIELDS:
                raise ValueError(f"unknown filter field {field!r}; allowed: {', '.join(FILTER_FIELDS)}")
            values = [values] if isinstance(values, str) else list(values)
            clauses.append((Occur.Must, Query.term_set_query(self._schema, field, values)))
        return Query.boolean_query(clauses)

    def _to_document(self, chunk: ChunkRecord, vector: np.ndarray, label: int) -> tantivy.Document:
        document = tantivy.Document()
        keywords = {
            "chunk_id": chunk.chunk_id,
            "doc_id": chunk.doc_id,
            "source": chunk.source,
            "tenant": chunk.tenant,
            "content_type": chunk.content_type,
            "content_hash": chunk.content_hash,
        }
        for field, value in keywords.items():
            if value is not None:
                document.add_text(field, value)
        for reader in chunk.readers:
            document.add_text("readers", reader)
        document.add_text("text", chunk.text)
        document.add_text("title", chunk.title)
        document.add_unsigned("label", label)
        document.add_bytes("payload", json.dumps(chunk.to_payload(), ensure_ascii=False).encode("utf-8"))
        document.add_bytes("vector", np.asarray(vector, dtype="<f4").tobytes())
        return document

    @staticmethod
    def _record(searcher: tantivy.Searcher, address: tantivy.DocAddress) -> ChunkRecord:
        return ChunkRecord.from_payload(json.loads(searcher.doc(address).get_first("payload")))

    @staticmethod
    def _scored(document: tantivy.Document, score: float, with_vectors: bool) -> ScoredChunk:
        record = ChunkRecord.from_payload(json.loads(document.get_first("payload")))
        # The stored little-endian float32 bytes, copied into a writable native array.
        vector = np.frombuffer(document.get_first("vector"), dtype="<f4").astype(np.float32) if with_vectors else None
        return ScoredChunk(record, score, vector)

    def _all_hits(self, searcher: tantivy.Searcher, query: tantivy.Query) -> list[tantivy.DocAddress]:
        return [address for _, address in searcher.search(query, limit=max(1, searcher.num_docs)).hits]

    def _labels_matching(self, searcher: tantivy.Searcher, query: tantivy.Query) -> list[int]:
        addresses = self._all_hits(searcher, query)
        return [int(label) for label in searcher.fast_field_values("label", addresses)] if addresses else []

    def _records_matching(self, searcher: tantivy.Searcher, query: tantivy.Query) -> list[ChunkRecord]:
        return [self._record(searcher, address) for address in self._all_hits(searcher, query)]

    def _documents_by_label(self, searcher: tantivy.Searcher, labels: Iterable[int]) -> dict[int, tantivy.Document]:
        addresses = self._all_hits(searcher, Query.term_set_query(self._schema, "label", [int(x) for x in labels]))
        if not addresses:
            return {}
        found = searcher.fast_field_values("label", addresses)
        return {int(label): searcher.doc(address) for label, address in zip(found, addresses, strict=True)}

    # ------------------------------------------------------------------ hnsw helpers

    def _open_graph(self) -> hnswlib.Index:
        path = self.index_dir / HNSW_FILE
        graph = hnswlib.Index(space="cosine", dim=self.dim)
        if path.exists():
            try:
                graph.load_index(str(path), max_elements=0, allow_replace_deleted=True)
                graph.set_ef(self._ef_search)
                return graph
            except RuntimeError:
                logger.warning("cannot read %s; rebuilding the vector graph from the stored vectors", path)
                graph = hnswlib.Index(space="cosine", dim=self.dim)
        graph.init_index(
            max_elements=_INITIAL_CAPACITY,
            ef_construction=self._ef_construction,
            M=self._hnsw_m,
            allow_replace_deleted=True,
        )
        graph.set_ef(self._ef_search)
        return graph

    def _graph_state(self) -> dict[str, int] | None:
        """What ties the saved graph file to the tantivy commit it reflects: tantivy's opstamp (every
        commit raises it; merges keep it) and the graph file's size and modification time. Written to
        ``meta.json`` after every graph save while the graph is verified; an open that finds the same
        state skips the per-chunk repair. A crash between a commit and the graph save, a write that
        raised, or a graph file replaced on disk all leave a different state, hence the full repair."""
        try:
            tantivy_meta = json.loads((self.index_dir / TANTIVY_DIR / "meta.json").read_text(encoding="utf-8"))
            graph = (self.index_dir / HNSW_FILE).stat()
            return {"tantivy_opstamp": int(tantivy_meta["opstamp"]), "graph_bytes": graph.st_size,
                    "graph_mtime_ns": graph.st_mtime_ns}
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _open_verified_graph(self) -> None:
        """Open with a graph ``meta.json`` vouches for (``_graph_state``): the stored chunks are read
        once for the access map and the entity graph, and the graph's labels are checked against them
        (a set comparison). The per-chunk checks of ``_reconcile`` are skipped: at 100k chunks they
        take most of a minute. Elements no search reaches are re-linked by a background sweep
        (``_sweep_unreachable``), since writes that reuse deleted slots create them
        (docs/reliability.md); searches are served meanwhile."""
        searcher = self._index.searcher()
        stored = self._read_stored_chunks(searcher)
        in_graph = {int(label) for label in self._hnsw.get_ids_list()}
        if not stored.keys() <= in_graph:
            logger.warning("the vector graph in %s lacks stored chunks its saved state vouched for; repairing",
                           self.index_dir)
            self._reconcile()
            return
        self._live = len(stored)
        self._next_label = max([self._next_label, *(label + 1 for label in in_graph)])
        self._graph_verified = True
        if stored:
            self._sweep = threading.Thread(
                target=self._sweep_unreachable, args=(sorted(stored),), name="hnsw-relink-sweep", daemon=True
            )
            self._sweep.start()

    def _sweep_unreachable(self, labels: list[int]) -> None:
        """Re-link the live ones of ``labels`` that no search reaches, ``_SWEEP_BATCH`` at a time under
        the lock (searches interleave); save the graph at the end if any were."""
        relinked = 0
        try:
            for start in range(0, len(labels), _SWEEP_BATCH):
                with self._lock:
                    if self._closed:
                        return
                    live = [label for label in labels[start : start + _SWEEP_BATCH] if label in self._access_of]
                    relinked += self._relink(self._unreachable(live)) if live else 0
                time.sleep(_SWEEP_PAUSE_S)
            with self._lock:
                if relinked and not self._closed:
                    logger.warning("re-linked %d graph vectors no search reached in %s (the sweep after opening)",
                                   relinked, self.index_dir)
                    self._save_graph()
        except Exception:
            # The sweep only improves the graph; a failure leaves it as it was opened.
            logger.exception("the re-link sweep of %s failed", self.index_dir)

    def _relink(self, labels: list[int]) -> int:
        """Update ``labels`` (live in the graph) in place with their own vectors, which gives each
        neighbours that link back; returns how many."""
        if labels:
            vectors = np.asarray(self._hnsw.get_items(labels, return_type="numpy"), dtype=np.float32)
            self._hnsw.add_items(vectors, labels, num_threads=1, replace_deleted=False)
        return len(labels)

    def _read_stored_chunks(self, searcher: tantivy.Searcher) -> dict[int, tantivy.DocAddress]:
        """Every stored chunk's label -> address; rebuilds the access map from them and brings the
        entity graph in step (chunks it lacks added, chunks tantivy no longer has dropped)."""
        addresses = self._all_hits(searcher, Query.all_query()) if searcher.num_docs else []
        labels = searcher.fast_field_values("label", addresses) if addresses else []
        stored = {int(label): address for label, address in zip(labels, addresses, strict=True)}
        self._access_of, self._access_pairs = {}, Counter()
        in_entity_graph = self._entity_graph.labels()
        entity_graph_missing: list[tuple[int, ChunkRecord]] = []
        for label, address in stored.items():
            record = self._record(searcher, address)
            self._remember_access(label, record)
            if label not in in_entity_graph:
                entity_graph_missing.append((label, record))
        entity_graph_stale = in_entity_graph - stored.keys()
        if entity_graph_missing or entity_graph_stale or not self._entity_graph_loaded:
            if self._entity_graph_loaded and (entity_graph_missing or entity_graph_stale):
                logger.warning(
                    "entity graph in %s: adding %d chunks, dropping %d (reconciled with the stored chunks)",
                    self.index_dir, len(entity_graph_missing), len(entity_graph_stale),
                )
            nodes = [(label, chunk_node(record)) for label, record in entity_graph_missing]
            self._entity_graph.remove(entity_graph_stale)
            for label, node in nodes:
                self._entity_graph.add(label, node)
            if self._entity_graph_loaded:
                self._graph_store.apply(sorted(entity_graph_stale), nodes)
            else:
                self._graph_store.replace_all(self._entity_graph)
            self._entity_graph_loaded = True
        return stored

    def _reconcile(self) -> None:
        """The full repair: bring the vector graph in step with the stored chunks, element by element
        (on open without a state ``meta.json`` vouches for, and after a failed graph or entity-graph
        update). Ends verified, so the next open can skip it."""
        searcher = self._index.searcher()
        stored = self._read_stored_chunks(searcher)
        in_graph = {int(label) for label in self._hnsw.get_ids_list()}
        changed = not (self.index_dir / HNSW_FILE).exists()
        for label in in_graph - stored.keys():
            try:
                self._hnsw.mark_deleted(label)
                changed = True
            except RuntimeError:
                pass  # already deleted
        # A stored chunk whose vector the graph holds but marks deleted (the graph saw a delete that
        # tantivy does not have) is live again: unmark it; its label names the same vector forever.
        revived = self._marked_deleted(sorted(stored.keys() & in_graph))
        if revived:
            logger.warning("reviving %d stored chunks the graph marks deleted in %s: %s", len(revived), self.index_dir, revived)
        for label in revived:
            self._hnsw.unmark_deleted(label)
            changed = True
        wrong = self._wrong_graph_vectors(searcher, stored, sorted(stored.keys() & in_graph))
        if wrong:
            # Each of these labels is live in the graph with a vector that is not its stored chunk's: a
            # dense search for that chunk would find another one (or miss it). Updated in place
            # (replace_deleted=False on a live label rewrites its own slot; it never takes a second
            # slot, which would leave the label twice in the graph).
            logger.warning(
                "replacing %d graph vectors that differ from their stored chunks' in %s: %s",
                len(wrong), self.index_dir, sorted(wrong),
            )
            labels_wrong = sorted(wrong)
            self._hnsw.add_items(np.stack([wrong[label] for label in labels_wrong]), labels_wrong,
                                 num_threads=1, replace_deleted=False)
            changed = True
        missing = sorted(stored.keys() - in_graph)
        if missing:
            logger.warning("re-adding %d vectors missing from the graph in %s", len(missing), self.index_dir)
            vectors = np.stack(
                [np.frombuffer(searcher.doc(stored[label]).get_first("vector"), dtype="<f4") for label in missing]
            )
            self._live = len(stored) - len(missing)
            self._add_to_graph(missing, vectors)
            changed = True
        self._live = len(stored)
        unreachable = self._unreachable(sorted(stored))
        if unreachable:
            # hnswlib reuses a deleted slot by updating it in place (replace_deleted), which re-selects
            # its old neighbours' links; a live element can end with no link pointing to it, and a
            # search, even for its own vector, never reaches it. Updating it in place (a live label:
            # its own slot) links it again: it selects neighbours and they link back.
            logger.warning("re-linking %d graph vectors no search reaches in %s: %s",
                           len(unreachable), self.index_dir, unreachable)
            self._relink(unreachable)
            changed = True
        self._next_label = max([self._next_label, *(label + 1 for label in stored), *(label + 1 for label in in_graph)])
        self._graph_verified = True
        if changed:
            self._save_graph()
        elif self._saved_graph_state != self._graph_state():
            self._write_meta()  # vouch for the graph as it is, so the next open is the quick one

    def _wrong_graph_vectors(
        self, searcher: tantivy.Searcher, stored: dict[int, tantivy.DocAddress], labels: list[int]
    ) -> dict[int, np.ndarray]:
        """Those of ``labels`` (live in the graph and stored) whose graph vector is not their stored
        vector (the graph keeps a normalised copy): label -> the stored vector."""
        wrong: dict[int, np.ndarray] = {}
        for start in range(0, len(labels), _VERIFY_BATCH):
            batch = labels[start : start + _VERIFY_BATCH]
            in_graph = np.asarray(self._hnsw.get_items(batch, return_type="numpy"), dtype=np.float32)
            vectors = np.stack(
                [np.frombuffer(searcher.doc(stored[label]).get_first("vector"), dtype="<f4") for label in batch]
            ).astype(np.float32)
            unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            agree = np.einsum("ij,ij->i", unit, in_graph) >= 1.0 - 1e-4
            wrong.update((label, vectors[row]) for row, label in enumerate(batch) if not agree[row])
        return wrong

    def _unreachable(self, labels: list[int]) -> list[int]:
        """Those of ``labels`` (all live in the graph) that a search for their own vector does not find
        (nor an element with the same vector)."""
        unreachable: list[int] = []
        self._hnsw.set_ef(self._ef_search)
        for start in range(0, len(labels), _VERIFY_BATCH):
            batch = labels[start : start + _VERIFY_BATCH]
            vectors = np.asarray(self._hnsw.get_items(batch, return_type="numpy"), dtype=np.float32)
            found, distances = self._hnsw.knn_query(vectors, k=1, num_threads=1)
            unreachable.extend(
                label for label, hit, distance in zip(batch, found[:, 0], distances[:, 0], strict=True)
                if int(hit) != label and float(distance) > 1e-5
            )
        return unreachable

    def _marked_deleted(self, labels: list[int]) -> list[int]:
        """Those of ``labels`` (all in the graph) that the graph marks deleted."""
        try:
            self._hnsw.get_items(labels)
            return []  # the usual case: one call for all
        except RuntimeError:
            pass
        deleted = []
        for label in labels:
            try:
                self._hnsw.get_items([label])
            except RuntimeError:
                deleted.append(label)
        return deleted

    def _update_graph(self, deleted: list[int], labels: list[int], vectors: np.ndarray, *, staged: bool = False) -> None:
        """``deleted`` leave the graph, ``labels`` join it (``staged``: they are in it already, added
        by ``_prepare``, and become live now), and the graph is saved."""
        try:
            for label in deleted:
                self._hnsw.mark_deleted(label)
                self._live -= 1
            if labels and staged:
                self._live += len(labels)
            elif labels:
                self._add_to_graph(labels, vectors)
            self._save_graph()
        except Exception:
            # Tantivy already committed; rebuild the graph's view from it rather than diverge.
            logger.exception("vector graph update failed; reconciling with the stored chunks")
            self._reconcile()
            raise

    def _add_to_graph(self, labels: list[int], vectors: np.ndarray) -> None:
        # With replace_deleted, deleted slots are reused first, so only live + new must fit.
        needed = self._live + len(labels)
        capacity = self._hnsw.get_max_elements()
        if needed > capacity:
            self._hnsw.resize_index(max(needed, capacity * 2))
        self._hnsw.add_items(vectors, labels, num_threads=1, replace_deleted=True)
        self._live += len(labels)

    def _nearest(
        self, query: np.ndarray, k: int, allowed: Callable[[int], bool] | None
    ) -> tuple[list[int], list[float]]:
        self._hnsw.set_ef(max(self._ef_search, k))
        try:
            labels, distances = self._hnsw.knn_query(query, k=k, num_threads=1, filter=allowed)
            return [int(x) for x in labels[0]], [float(x) for x in distances[0]]
        except RuntimeError:
            # The graph walk reached fewer than k allowed points (a very selective filter):
            # an exact scan over the allowed vectors is both correct and cheap in that case.
            return self._exact_nearest(query, k, allowed)

    def _exact_nearest(
        self, query: np.ndarray, k: int, allowed: Callable[[int], bool] | None
    ) -> tuple[list[int], list[float]]:
        labels = sorted(label for label in self._access_of if allowed is None or allowed(label))
        k = min(k, len(labels))
        if k <= 0:
            return [], []
        vectors = np.asarray(self._hnsw.get_items(labels, return_type="numpy"), dtype=np.float32)
        unit_query = query / max(float(np.linalg.norm(query)), 1e-12)
        distances = 1.0 - vectors @ unit_query
        order = np.argsort(distances, kind="stable")[:k]
        return [labels[i] for i in order], [float(distances[i]) for i in order]

    def _save_graph(self) -> None:
        _write_atomically(self.index_dir / HNSW_FILE, lambda tmp: self._hnsw.save_index(str(tmp)))
        self._write_meta()

    # ------------------------------------------------------------------ format upgrade

    def _finish_or_undo_upgrade(self, meta: dict[str, Any]) -> None:
        """Clean up after an upgrade that a crash interrupted. The old index is kept (as
        ``_PREVIOUS_DIR``) until ``meta.json`` names the new format: if the meta still says the old
        format, the old index goes back in place (and is upgraded again); if it says the new one,
        the swap was complete and the old copy is removed."""
        tantivy_dir = self.index_dir / TANTIVY_DIR
        previous = self.index_dir / _PREVIOUS_DIR
        if previous.exists():
            if meta.get("format", FORMAT_VERSION) == FORMAT_VERSION:
                shutil.rmtree(previous)
            else:
                if tantivy_dir.exists():
                    shutil.rmtree(tantivy_dir)
                previous.rename(tantivy_dir)
        shutil.rmtree(self.index_dir / _UPGRADE_DIR, ignore_errors=True)

    def _upgrade_tantivy(self, old_format: int) -> None:
        """Copy every chunk of the ``old_format`` tantivy index into a new one of ``FORMAT_VERSION``,
        labels and stored vectors unchanged, then swap the directories and write ``meta.json``.

        Crash-safe: the copy is built aside (``_UPGRADE_DIR``), the old index moved aside
        (``_PREVIOUS_DIR``) and removed only once ``meta.json`` says the new format, so a restart
        finds either the old index whole (and upgrades again) or the new one (see
        ``_finish_or_undo_upgrade``).
        """
        tantivy_dir = self.index_dir / TANTIVY_DIR
        staging = self.index_dir / _UPGRADE_DIR
        previous = self.index_dir / _PREVIOUS_DIR
        old = tantivy.Index(_build_schema(old_format), path=str(tantivy_dir), reuse=True)
        searcher = old.searcher()
        addresses = self._all_hits(searcher, Query.all_query()) if searcher.num_docs else []
        labels = searcher.fast_field_values("label", addresses) if addresses else []
        staging.mkdir()
        new = tantivy.Index(self._schema, path=str(staging), reuse=False)
        writer = new.writer(heap_size=_WRITER_HEAP_BYTES, num_threads=1)
        for address, label in zip(addresses, labels, strict=True):
            stored = searcher.doc(address)
            record = ChunkRecord.from_payload(json.loads(stored.get_first("payload")))
            if old_format < 3:
                # Written before tenants and ACLs: everyone's, in the default tenant.
                record.tenant, record.readers = DEFAULT_TENANT, [EVERYONE]
            vector = np.frombuffer(stored.get_first("vector"), dtype="<f4")
            writer.add_document(self._to_document(record, vector, int(label)))
        writer.commit()
        writer.wait_merging_threads()
        del writer, new, searcher, old
        tantivy_dir.rename(previous)
        staging.rename(tantivy_dir)
        self._write_meta()
        shutil.rmtree(previous)
        logger.warning(
            "upgraded the index at %s from format %d to %d (%d chunks, now of tenant %r, readable by all "
            "of it); documents get a content hash when ingested again",
            self.index_dir, old_format, FORMAT_VERSION, len(addresses), DEFAULT_TENANT,
        )

    # ------------------------------------------------------------------ metadata file

    def _read_meta(self) -> dict[str, Any]:
        path = self.index_dir / META_FILE
        if not path.exists():
            return {}
        return json.loads(path.read_text(encoding="utf-8"))

    def _check_meta(self, meta: dict[str, Any], model_id: str) -> None:
        if not meta:
            return
        if meta.get("format") != FORMAT_VERSION and meta.get("format") not in _UPGRADABLE_FORMATS:
            raise IndexMismatchError(
                f"index at {self.index_dir} has format {meta.get('format')}, this code reads format {FORMAT_VERSION}"
                f" and upgrades formats {', '.join(map(str, sorted(_UPGRADABLE_FORMATS)))}"
            )
        if meta.get("dim") != self.dim:
            raise IndexMismatchError(
                f"index at {self.index_dir} holds {meta.get('dim')}-dimensional vectors (model "
                f"{meta.get('model_id')!r}) but the embedder makes {self.dim}-dimensional ones; "
                "use another index_dir or re-ingest"
            )
        if model_id and meta.get("model_id") and meta["model_id"] != model_id:
            raise IndexMismatchError(
                f"index at {self.index_dir} was built with model {meta['model_id']!r}, not {model_id!r}; "
                "vectors of different models are not comparable: use another index_dir or re-ingest"
            )

    def _write_meta(self) -> None:
        meta = {
            "format": FORMAT_VERSION,
            "dim": self.dim,
            "space": "cosine",
            "model_id": self._model_id,
            "next_label": self._next_label,
        }
        # Only for a verified graph (never by the format upgrade, which runs before the open's check).
        state = self._graph_state() if self._graph_verified else None
        if state is not None:
            meta["graph_state"] = state
        self._saved_graph_state = state
        _write_atomically(
            self.index_dir / META_FILE, lambda tmp: tmp.write_text(json.dumps(meta, indent=2), encoding="utf-8")
        )


class EmbeddedBackend:
    """``SearchBackend`` over an ``EmbeddedIndex``: its blocking calls run in worker threads."""

    def __init__(
        self,
        index_dir: str | Path,
        dim: int,
        hnsw_m: int = 16,
        ef_construction: int = 200,
        ef_search: int = 100,
        *,
        model_id: str = "",
    ) -> None:
        self.index = EmbeddedIndex(index_dir, dim, hnsw_m, ef_construction, ef_search, model_id=model_id)

    async def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        await asyncio.to_thread(self.index.upsert, chunks, vectors)

    async def delete_document(self, doc_id: str, *, tenant: str | None = None) -> int:
        return await asyncio.to_thread(self.index.delete_document, doc_id, tenant=tenant)

    async def replace_documents(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> None:
        await asyncio.to_thread(self.index.replace_documents, doc_ids, chunks, vectors, tenant=tenant)

    # A replacement in two steps (``EmbeddedIndex.prepare_replacement``): the ingestor lets searches run
    # while it is prepared and holds its lock alone for the commit (``Ingestor._write``).
    async def prepare_replacement(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> PreparedWrite | None:
        return await asyncio.to_thread(self.index.prepare_replacement, doc_ids, chunks, vectors, tenant=tenant)

    async def commit_prepared(self, prepared: PreparedWrite | None) -> None:
        await asyncio.to_thread(self.index.commit_prepared, prepared)

    async def abandon_prepared(self, prepared: PreparedWrite | None) -> None:
        await asyncio.to_thread(self.index.abandon_prepared, prepared)

    async def document_chunk_ids(self, doc_id: str, *, tenant: str | None = None) -> set[str]:
        return await asyncio.to_thread(self.index.document_chunk_ids, doc_id, tenant=tenant)

    async def document_fingerprint(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        return await asyncio.to_thread(self.index.document_fingerprint, doc_id, tenant=tenant)

    async def document_vectors(self, doc_id: str, *, tenant: str | None = None) -> dict[str, np.ndarray]:
        return await asyncio.to_thread(self.index.document_vectors, doc_id, tenant=tenant)

    async def document_sentence_vectors(
        self, doc_id: str, *, tenant: str | None = None
    ) -> dict[str, tuple[str, SentenceVectors | None]]:
        return await asyncio.to_thread(self.index.document_sentence_vectors, doc_id, tenant=tenant)

    async def document_readers(self, doc_ids: Collection[str], *, tenant: str) -> dict[str, list[str]]:
        return await asyncio.to_thread(self.index.document_readers, doc_ids, tenant=tenant)

    async def documents_with_content(
        self, hashes: Collection[str], *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> dict[str, list[str]]:
        return await asyncio.to_thread(self.index.documents_with_content, hashes, tenant=tenant, access=access)

    async def search_dense(
        self, vector: np.ndarray, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        return await asyncio.to_thread(
            self.index.search_dense, vector, k, filters, access=access, with_vectors=with_vectors
        )

    async def search_bm25(
        self, query: str, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        return await asyncio.to_thread(
            self.index.search_bm25, query, k, filters, access=access, with_vectors=with_vectors
        )

    async def search_hybrid(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, fusion: FusionSettings,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        if fusion.method == "z_score":
            raise ValueError("the embedded backend fuses with min_max or rrf; z_score needs the opensearch backend")
        # One thread hop: both lists, fused by label, then only the winners' documents read.
        return await asyncio.to_thread(
            self.index.search_hybrid, query, vector, k, filters, fusion, access=access, with_vectors=with_vectors
        )

    async def graph_search(
        self, query: str, hits: list[ScoredChunk], k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, hop: bool, options: GraphOptions,
    ) -> tuple[list[ScoredChunk], dict[str, Any]]:
        return await asyncio.to_thread(
            self.index.graph_search, query, hits, k, filters, access,
            with_vectors=with_vectors, ppr=ppr, hop=hop, options=options,
        )

    async def fusion_candidates(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, options: GraphOptions, dense_weight: float,
    ) -> FusionCandidates:
        """Learned fusion's candidates: the two lists hybrid search fuses (same depth, searched
        concurrently, access inside each), then the graph's additions and every candidate's signals."""
        candidates = candidates_per_list(k)
        dense, bm25 = await asyncio.gather(
            self.search_dense(vector, candidates, filters, access=access, with_vectors=with_vectors),
            self.search_bm25(query, candidates, filters, access=access, with_vectors=with_vectors),
        )
        return await asyncio.to_thread(
            self.index.fusion_candidates, query, dense, bm25, k, filters, access,
            with_vectors=with_vectors, ppr=ppr, options=options, dense_weight=dense_weight,
        )

    async def list_documents(
        self, *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> list[DocumentInfo]:
        return await asyncio.to_thread(self.index.list_documents, tenant=tenant, access=access)

    async def count(self) -> int:
        return await asyncio.to_thread(self.index.count)

    async def close(self) -> None:
        await asyncio.to_thread(self.index.close)
