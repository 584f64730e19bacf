"""``EmbeddedIndex``, the synchronous engine of the embedded backend. It owns the parts (``text_index``,
``vector_graph``, ``access_map``, ``entity_upkeep``, ``on_disk``) and commits across them: the write
path, the searches and the repair on open.

Every write (an upsert, a delete, an ingest request's replacement of its documents) is one tantivy
commit, which tantivy makes atomic; the derived parts follow it, and the graph and ``meta.json`` are
replaced by rename. A crash between the commit and the graph save loses nothing: the open repairs
the graph from the stored chunks (``_reconcile``), or, after a clean close that ``meta.json`` vouches
for, trusts it and re-links in the background. So a kill -9 at any point leaves each document as it
was before the write or as after it: ``tests/retriever/test_retriever_crash_consistency.py`` kills a
writer at each of those points through ``_update_graph``, ``_save_graph``, ``_write_meta`` and
``_update_entity_graph`` (and counts repairs by ``_wrong_graph_vectors``), hence these methods.

It is the embedded ``GraphIndex`` (``backends.base``: ``graph``, ``search_bm25``, ``chunks_by_labels``)
that ``rag_retriever.graph_retrieval`` and ``rag_retriever.fusion_candidates`` read: ``graph_search``
and ``fusion_candidates`` here call them with ``self``, under the index's lock. The dependency runs
one way (this package imports them; they know only the protocol), so there is no import cycle.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Collection
from pathlib import Path
from typing import Any

import numpy as np
import tantivy

from rag_common.languages import LANGUAGES, LanguageIdentifier
from rag_common.schemas import DocumentInfo, SentenceVectors
from rag_retriever.backends.base import AccessFilter, Filters, FusionCandidates, FusionSettings, GraphOptions, HnswParams
from rag_retriever.backends.embedded import on_disk
from rag_retriever.backends.embedded.access_map import AccessMap
from rag_retriever.backends.embedded.catalog import TantivyCatalog
from rag_retriever.backends.embedded.consistency import IndexConsistency, measure, read_stored_chunks
from rag_retriever.backends.embedded.entity_upkeep import EntityGraphUpkeep
from rag_retriever.backends.embedded.prepared_write import PreparedWrite
from rag_retriever.backends.embedded.search import IndexSearch
from rag_retriever.backends.embedded.text_index import TextIndex, all_hits, record, scored
from rag_retriever.backends.embedded.vector_graph import SWEEP_PAUSE_S, VectorGraph
from rag_retriever.entity_graph import ChunkNode, EntityGraph
from rag_retriever.fusion import candidates_per_list, min_max_scores
from rag_retriever.fusion_candidates import FirstPass, fusion_candidates
from rag_retriever.graph_retrieval import graph_search
from rag_retriever.records import ChunkRecord, ScoredChunk

logger = logging.getLogger(__name__)

#: Vectors a write adds to the graph per locked step while it is prepared: a search waits at most one
#: step (64 insertions, ~20 ms at ef_construction 200), instead of the whole write's (8,000 chunks:
#: 2.5 s; issue 29). Paused between steps like the sweep, for the same reason.
_STAGE_STEP = 64


class EmbeddedIndex:
    def __init__(
        self,
        index_dir: str | Path,
        dim: int,
        hnsw: HnswParams,
        *,
        model_id: str = "",
        languages: Collection[str] | None = None,
        identifier: LanguageIdentifier | None = None,
        neutral_weight: float = 1.0,
    ) -> None:
        """``hnsw``: ``HnswParams.of(settings)``; ``model_id``: the embedder's, checked against the
        index's ``meta.json`` (empty: not checked); ``languages``: the configured ``RAG_LANGUAGES``,
        each with its own lexical fields (None: every supported one, as that setting's default); an
        index made for others is re-analysed on open, its chunks without a language identified by
        ``identifier`` (None: they stay neutral)."""
        if dim <= 0:
            raise ValueError(f"dim must be positive, got {dim}")
        self.index_dir = Path(index_dir)
        self.dim = dim
        self._lock = threading.RLock()
        #: Serialises writes (taken before ``_lock``, never after it): a write prepares outside
        #: ``_lock`` (``_prepare``), so another write must not start meanwhile.
        self._write_lock = threading.RLock()
        #: The write prepared and not yet committed: its labels are in the graph but not live.
        self._pending: PreparedWrite | None = None
        self._closed = False

        self.index_dir.mkdir(parents=True, exist_ok=True)
        meta = on_disk.read_meta(self.index_dir)
        on_disk.check_meta(self.index_dir, meta, dim, model_id)
        lexical = on_disk.current_fields(sorted(set(LANGUAGES if languages is None else languages)))
        self._meta = on_disk.IndexMeta(self.index_dir, dim, model_id, meta, lexical.languages)
        on_disk.finish_or_undo_upgrade(self.index_dir, meta, lexical.languages)
        old_format = on_disk.format_to_upgrade(meta, lexical.languages)
        if old_format is not None:
            on_disk.upgrade_tantivy(self.index_dir, old_format, lexical, identifier, self._write_meta)
        # neutral_weight: RETRIEVER_NEUTRAL_FIELD_WEIGHT, handed in by the runtime (1.0: unweighted, tools and tests).
        self._text = TextIndex(
            self.index_dir / on_disk.TANTIVY_DIR, on_disk.current_schema(lexical), lexical, self.index_dir,
            neutral_weight,
        )
        self._vectors = VectorGraph(self.index_dir, dim, hnsw)
        self._entities = EntityGraphUpkeep(self.index_dir)
        self._access = AccessMap()
        self._catalog = TantivyCatalog(self._text, self._searcher)
        self._search = IndexSearch(self._text, self._vectors, self._access, dim)
        if self._meta.vouches_for_graph():
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
        self._write([self._text.doc_query(doc_id, tenant) for doc_id in dict.fromkeys(doc_ids)], chunks, vectors)

    def prepare_replacement(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> PreparedWrite | None:
        """The first half of ``replace_documents``, out of sight of searches: commit it with
        ``commit_prepared`` (or drop it with ``abandon_prepared``); no other write may come between.
        None when there is nothing to write. Lets the ingestor hold its readers-writer lock alone for
        the commit only (``Ingestor._write``)."""
        with self._write_lock:
            removed = [self._text.doc_query(doc_id, tenant) for doc_id in dict.fromkeys(doc_ids)]
            return self._prepare(removed, chunks, vectors)

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
        skip those labels until the commit makes them live (``IndexSearch``: only labels in the
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
            replaced = self._text.labels_replaced(self._text.index.searcher(), row_of, removed)
            if not replaced and not rows:
                return None
            # Reserved now and never handed out again, whatever becomes of this write: two chunks must
            # never share a label (a commit that raised may still be on disk).
            labels = self._meta.reserve_labels(len(rows))
            prepared = PreparedWrite(
                replaced=sorted(replaced), labels=labels, chunks=[chunks[row] for row in rows], vectors=vectors[rows]
            )
            self._vectors.reserve(len(labels))
            self._pending = prepared
        try:
            self._text.queue_write(removed, row_of, labels, prepared.chunks, prepared.vectors)
            prepared.nodes = self._entities.nodes_of(zip(labels, prepared.chunks, strict=True))
            for start in range(0, len(labels), _STAGE_STEP):
                with self._lock:
                    self._ensure_open()
                    stop = min(start + _STAGE_STEP, len(labels))
                    self._vectors.stage(prepared.vectors[start:stop], labels[start:stop])
                    prepared.staged = stop
                time.sleep(SWEEP_PAUSE_S)
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
                self._text.writer.commit()
            except Exception:
                # A commit that raised may still be on disk (tantivy swaps its meta.json before some of
                # its clean-up): the graph may lack its chunks until the next open repairs it in full.
                self._abandon(prepared)
                self._meta.graph_verified = False
                raise
            self._pending = None
            self._text.index.reload()
            for label in prepared.replaced:
                self._access.forget(label)
            for label, chunk in zip(prepared.labels, prepared.chunks, strict=True):
                self._access.remember(label, chunk)
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
            self._text.writer.rollback()
            for label in prepared.labels[: prepared.staged]:
                self._vectors.mark_deleted(label)
            prepared.staged = 0

    def delete_document(self, doc_id: str, *, tenant: str | None = None) -> int:
        with self._write_lock:
            self._ensure_open()
            query = self._text.doc_query(doc_id, tenant)
            deleted = len(self._text.labels_matching(self._text.index.searcher(), query))
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
                self._text.close()
            finally:
                self._vectors.close()
                self._entities.close()
        # Outside the lock: the sweep takes it for each step and stops at the first one after close.
        self.wait_for_graph_sweep()

    def wait_for_graph_sweep(self, timeout: float | None = None) -> bool:
        """Wait for the background re-link sweep of a verified open (``_open_verified_graph``);
        True once none is running."""
        return self._vectors.wait_for_sweep(timeout)

    def _update_entity_graph(
        self, deleted: list[int], added: list[tuple[int, ChunkRecord]], *, nodes: list[tuple[int, ChunkNode]] | None = None
    ) -> None:
        """After a tantivy commit: its replaced labels leave the entity graph, its new chunks join (their
        ``nodes`` made beforehand by ``_prepare``). A crash before it commits is repaired on open."""
        try:
            self._entities.apply(deleted, nodes if nodes is not None else self._entities.nodes_of(added))
        except Exception:
            logger.exception("entity graph update failed; reconciling with the stored chunks")
            # Start again from what the file holds, so the repair writes whatever it lacks.
            self._entities.reload()
            self._reconcile()
            raise

    def _update_graph(self, deleted: list[int], labels: list[int], vectors: np.ndarray, *, staged: bool = False) -> None:
        """``deleted`` leave the graph, ``labels`` join it (``staged``: they are in it already, added
        by ``_prepare``, and become live now), and the graph is saved."""
        try:
            self._vectors.apply(deleted, labels, vectors, staged=staged)
            self._save_graph()
        except Exception:
            # Tantivy already committed; rebuild the graph's view from it rather than diverge.
            logger.exception("vector graph update failed; reconciling with the stored chunks")
            self._reconcile()
            raise

    def _save_graph(self) -> None:
        self._vectors.save()
        self._write_meta()

    def _write_meta(self) -> None:
        self._meta.write()

    # ------------------------------------------------------------------ catalog lookups (``catalog``)

    def document_chunk_ids(self, doc_id: str, *, tenant: str | None = None) -> set[str]:
        return self._catalog.document_chunk_ids(doc_id, tenant=tenant)

    def document_fingerprint(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        return self._catalog.document_fingerprint(doc_id, tenant=tenant)

    def document_vectors(self, doc_id: str, *, tenant: str | None = None) -> dict[str, np.ndarray]:
        return self._catalog.document_vectors(doc_id, tenant=tenant)

    def document_sentence_vectors(
        self, doc_id: str, *, tenant: str | None = None
    ) -> dict[str, tuple[str, SentenceVectors | None]]:
        return self._catalog.document_sentence_vectors(doc_id, tenant=tenant)

    def document_readers(self, doc_ids: Collection[str], *, tenant: str) -> dict[str, list[str]]:
        return self._catalog.document_readers(doc_ids, tenant=tenant)

    def documents_with_content(
        self, hashes: Collection[str], *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> dict[str, list[str]]:
        return self._catalog.documents_with_content(hashes, tenant=tenant, access=access)

    def list_documents(self, *, tenant: str | None = None, access: AccessFilter | None = None) -> list[DocumentInfo]:
        return self._catalog.list_documents(tenant=tenant, access=access)

    def count(self) -> int:
        return self._catalog.count()

    # ------------------------------------------------------------------ searches

    def search_bm25(
        self, query: str, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
        language: str | None = None,
    ) -> list[ScoredChunk]:
        """``language``: the query's, analysed as ``LexicalFields.query_groups`` says."""
        searcher = self._searcher()
        text_query = self._text.bm25_query(searcher, query, filters, access, language)
        if text_query is None or k <= 0:
            return []
        hits = searcher.search(text_query, limit=k).hits
        return [self._scored(searcher.doc(address), float(score), with_vectors) for score, address in hits]

    def search_dense(
        self, vector: np.ndarray, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        with self._lock:
            self._ensure_open()
            found = self._search.dense(
                self._text.index.searcher(), vector, k, filters, access, pending=self._pending is not None
            )
        return [self._scored(document, score, with_vectors) for document, score in found]

    def search_hybrid(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, fusion: FusionSettings,
        *, access: AccessFilter | None = None, with_vectors: bool = False, language: str | None = None,
    ) -> list[ScoredChunk]:
        """Fused by label before any document is read (``IndexSearch.hybrid``); the order is
        ``min_max_fusion``'s / ``rrf_fusion``'s: score, then chunk id among equal scores."""
        with self._lock:
            self._ensure_open()
            searcher = self._text.index.searcher()
            text_query = self._text.bm25_query(searcher, query, filters, access, language)
            found = self._search.hybrid(
                searcher, text_query, vector, k, filters, fusion, access,
                pending=self._pending is not None,
            )
        hits = [self._scored(document, score, with_vectors) for document, score in found]
        hits.sort(key=lambda hit: (-hit.score, hit.chunk.chunk_id))
        return hits[:k]

    # ------------------------------------------------------------------ structure-and-entity graph

    @property
    def graph(self) -> EntityGraph:
        return self._entities.graph

    def chunks_by_labels(
        self, labels: Collection[int], filters: Filters | None, access: AccessFilter | None, *, with_vectors: bool
    ) -> dict[int, ScoredChunk]:
        """The stored chunks of ``labels`` that pass ``filters`` and ``access`` (score 0)."""
        if not labels:
            return {}
        query = self._search.restricted_labels_query(labels, filters, access)
        with self._lock:
            found = self._search.by_labels(self._searcher(), query)
            return {label: self._scored(document, 0.0, with_vectors) for label, document in found.items()}

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
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, options: GraphOptions, dense_weight: float, language: str | None = None,
    ) -> FusionCandidates:
        """Learned fusion's candidates and their signals (``rag_retriever.fusion_candidates``): the two
        lists min-max hybrid fuses (BM25 analysed for ``language``), fused by label, and only the
        best ``k``'s documents read (``IndexSearch.lists``, ``best_documents``)."""
        with self._lock:
            self._ensure_open()
            searcher = self._text.index.searcher()
            text_query = self._text.bm25_query(searcher, query, filters, access, language)
            lists = self._search.lists(searcher, text_query, vector, candidates_per_list(k), filters, access,
                                       pending=self._pending is not None)
            fused = min_max_scores(lists.dense, lists.bm25, dense_weight)
            read = {label: self._scored(document, fused[label], with_vectors)
                    for label, document in self._search.best_documents(searcher, fused, k, lists.address_of).items()}
            return fusion_candidates(self, query, FirstPass(lists.dense, lists.bm25, fused, read), k, filters, access,
                                     with_vectors=with_vectors, ppr=ppr, options=options)

    # ------------------------------------------------------------------ consistency and repair

    def consistency(self) -> IndexConsistency:
        """How the stored chunks and the vector graph agree, read from what is loaded (after
        ``_reconcile``); what the crash tests and ``bench/ingest_chaos.py`` check."""
        with self._lock:
            self._ensure_open()
            return measure(self._text.index.searcher(), self._vectors, self._entities)

    def _open_verified_graph(self) -> None:
        """Open with a graph ``meta.json`` vouches for (``on_disk.graph_state``): the stored chunks are
        read once for the access map and the entity graph, and the graph's labels are checked against
        them (a set comparison). The per-chunk checks of ``_reconcile`` are skipped: at 100k chunks they
        take most of a minute. Elements no search reaches are re-linked by a background sweep
        (``VectorGraph.start_sweep``), since writes that reuse deleted slots create them
        (docs/reliability.md); searches are served meanwhile."""
        stored = read_stored_chunks(self._text.index.searcher(), self._access, self._entities)
        in_graph = set(self._vectors.labels())
        if not stored.keys() <= in_graph:
            logger.warning("the vector graph in %s lacks stored chunks its saved state vouched for; repairing",
                           self.index_dir)
            self._reconcile()
            return
        self._vectors.live = len(stored)
        self._meta.next_label = max([self._meta.next_label, *(label + 1 for label in in_graph)])
        self._meta.graph_verified = True
        if stored:
            self._vectors.start_sweep(
                sorted(stored), lock=self._lock, closed=lambda: self._closed, live=self._access, save=self._save_graph
            )

    def _reconcile(self) -> None:
        """The full repair: bring the vector graph in step with the stored chunks, element by element
        (on open without a state ``meta.json`` vouches for, and after a failed graph or entity-graph
        update). Ends verified, so the next open can skip it."""
        searcher = self._text.index.searcher()
        stored = read_stored_chunks(searcher, self._access, self._entities)
        in_graph = set(self._vectors.labels())
        changed = self._vectors.repair(
            stored.keys(), in_graph,
            wrong_vectors=lambda labels: self._wrong_graph_vectors(searcher, stored, labels),
            stored_vectors=lambda labels: self._text.stored_vectors(searcher, [stored[label] for label in labels]),
        )
        self._meta.next_label = max(
            [self._meta.next_label, *(label + 1 for label in stored), *(label + 1 for label in in_graph)]
        )
        self._meta.graph_verified = True
        if changed:
            self._save_graph()
        elif self._meta.is_stale():
            self._write_meta()  # vouch for the graph as it is, so the next open is the quick one

    def _wrong_graph_vectors(
        self, searcher: tantivy.Searcher, stored: dict[int, tantivy.DocAddress], labels: list[int]
    ) -> dict[int, np.ndarray]:
        """Those of ``labels`` whose graph vector is not their stored one (``VectorGraph.wrong_vectors``)."""
        return self._vectors.wrong_vectors(
            labels, lambda batch: self._text.stored_vectors(searcher, [stored[label] for label in batch])
        )

    # ------------------------------------------------------------------ helpers, and the parts as tests reach them

    def _searcher(self) -> tantivy.Searcher:
        self._ensure_open()
        return self._text.index.searcher()

    def _ensure_open(self) -> None:
        if self._closed:
            raise RuntimeError("the index is closed")

    # Searches build their hits through this name: tests count the documents a search reads with it.
    _scored = staticmethod(scored)
    # The crash tests read the stored chunks, replace the writer and save the graph through these.
    _all_hits = staticmethod(all_hits)
    _record = staticmethod(record)

    @property
    def _index(self) -> tantivy.Index:
        return self._text.index

    @property
    def _writer(self) -> Any:
        return self._text.writer

    @_writer.setter
    def _writer(self, writer: Any) -> None:
        self._text.writer = writer

    @property
    def _hnsw(self) -> Any:
        return self._vectors.hnsw

    @property
    def _sweep(self) -> threading.Thread | None:
        return self._vectors.sweep

    def _reads_everything(self, access: AccessFilter) -> bool:
        return self._access.reads_everything(access)
