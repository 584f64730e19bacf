"""The embedded index's vector graph: the hnswlib HNSW graph (cosine) over the chunks' labels, its
file, its repair against the stored vectors and the background re-link sweep.

The graph is derived from tantivy (``text_index``), which stores every chunk's vector and label.
Labels are never reused, which is what makes the repair on open unambiguous (``repair``: labels
missing from the graph are re-added from the stored vectors, labels tantivy no longer has are marked
deleted). hnswlib's reuse of deleted slots can leave a live element no search reaches: the repair
re-links those, and so does the background sweep after an open that skipped the repair
(``start_sweep``). Locking is the index's: every method but the sweep runs under its lock.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Container, Iterable
from pathlib import Path

import hnswlib
import numpy as np

from rag_retriever.backends.base import HnswParams
from rag_retriever.backends.embedded.on_disk import HNSW_FILE, write_atomically

logger = logging.getLogger(__name__)

_INITIAL_CAPACITY = 1024
#: Labels per batch when the repair compares the graph's vectors with the stored ones.
_VERIFY_BATCH = 4096
#: Labels per locked step of the background re-link sweep: a search waits at most one step
#: (16 self-searches, ~5 ms at 100k chunks).
_SWEEP_BATCH = 16
#: Pause between two steps, outside the lock: without it the sweep takes the lock straight back
#: (Python's locks are not fair) and searches queue behind many steps.
SWEEP_PAUSE_S = 0.002


class VectorGraph:
    """The HNSW graph saved as ``index_dir/vectors.hnsw`` (read from it if readable) and its count of
    live elements."""

    def __init__(self, index_dir: Path, dim: int, hnsw: HnswParams) -> None:
        self.index_dir = index_dir
        self.path = index_dir / HNSW_FILE
        self.dim = dim
        self._hnsw_m = hnsw.m
        self._ef_construction = hnsw.ef_construction
        self._ef_search = hnsw.ef_search
        self.hnsw: hnswlib.Index | None = self._open()
        #: Live (committed, not deleted) elements; a prepared write's staged ones are not counted.
        self.live = 0
        #: The background re-link sweep of a quick open (``start_sweep``).
        self.sweep: threading.Thread | None = None

    def _open(self) -> hnswlib.Index:
        graph = hnswlib.Index(space="cosine", dim=self.dim)
        if self.path.exists():
            try:
                graph.load_index(str(self.path), max_elements=0, allow_replace_deleted=True)
                graph.set_ef(self._ef_search)
                return graph
            except RuntimeError:
                logger.warning("cannot read %s; rebuilding the vector graph from the stored vectors", self.path)
                graph = hnswlib.Index(space="cosine", dim=self.dim)
        graph.init_index(
            max_elements=_INITIAL_CAPACITY,
            ef_construction=self._ef_construction,
            M=self._hnsw_m,
            allow_replace_deleted=True,
        )
        graph.set_ef(self._ef_search)
        return graph

    def save(self) -> None:
        write_atomically(self.path, lambda tmp: self.hnsw.save_index(str(tmp)))

    def close(self) -> None:
        self.hnsw = None

    # ------------------------------------------------------------------ elements

    def labels(self) -> list[int]:
        """Every label in the graph, deleted or not."""
        return [int(label) for label in self.hnsw.get_ids_list()]

    def reserve(self, added: int) -> None:
        # With replace_deleted, deleted slots are reused first: live + new must fit. Resizing is not
        # safe beside a search, so callers hold the index lock.
        needed = self.live + added
        capacity = self.hnsw.get_max_elements()
        if needed > capacity:
            self.hnsw.resize_index(max(needed, capacity * 2))

    def stage(self, vectors: np.ndarray, labels: list[int]) -> None:
        """Put ``labels`` in the graph (reusing deleted slots); not counted live (``reserve`` first)."""
        self.hnsw.add_items(vectors, labels, num_threads=1, replace_deleted=True)

    def mark_deleted(self, label: int) -> None:
        self.hnsw.mark_deleted(label)

    def add(self, labels: list[int], vectors: np.ndarray) -> None:
        self.reserve(len(labels))
        self.stage(vectors, labels)
        self.live += len(labels)

    def apply(self, deleted: list[int], labels: list[int], vectors: np.ndarray, *, staged: bool) -> None:
        """``deleted`` leave the graph, ``labels`` join it (``staged``: they are in it already, added
        by a prepared write, and become live now)."""
        for label in deleted:
            self.hnsw.mark_deleted(label)
            self.live -= 1
        if labels and staged:
            self.live += len(labels)
        elif labels:
            self.add(labels, vectors)

    def marked_deleted(self, labels: list[int]) -> list[int]:
        """Those of ``labels`` (all in the graph) that the graph marks deleted."""
        try:
            self.hnsw.get_items(labels)
            return []  # the usual case: one call for all
        except RuntimeError:
            pass
        deleted = []
        for label in labels:
            try:
                self.hnsw.get_items([label])
            except RuntimeError:
                deleted.append(label)
        return deleted

    # ------------------------------------------------------------------ search

    def nearest(
        self, query: np.ndarray, k: int, allowed: Callable[[int], bool] | None, live: Iterable[int]
    ) -> tuple[list[int], list[float]]:
        """The ``k`` nearest ``allowed`` labels and their cosine distances; ``live``: every live label."""
        self.hnsw.set_ef(max(self._ef_search, k))
        try:
            labels, distances = self.hnsw.knn_query(query, k=k, num_threads=1, filter=allowed)
            return [int(x) for x in labels[0]], [float(x) for x in distances[0]]
        except RuntimeError:
            # The graph walk reached fewer than k allowed points (a very selective filter):
            # an exact scan over the allowed vectors is both correct and cheap in that case.
            return self._exact_nearest(query, k, allowed, live)

    def _exact_nearest(
        self, query: np.ndarray, k: int, allowed: Callable[[int], bool] | None, live: Iterable[int]
    ) -> tuple[list[int], list[float]]:
        labels = sorted(label for label in live if allowed is None or allowed(label))
        k = min(k, len(labels))
        if k <= 0:
            return [], []
        vectors = np.asarray(self.hnsw.get_items(labels, return_type="numpy"), dtype=np.float32)
        unit_query = query / max(float(np.linalg.norm(query)), 1e-12)
        distances = 1.0 - vectors @ unit_query
        order = np.argsort(distances, kind="stable")[:k]
        return [labels[i] for i in order], [float(distances[i]) for i in order]

    # ------------------------------------------------------------------ repair

    def repair(
        self,
        stored: Collection[int],
        in_graph: set[int],
        wrong_vectors: Callable[[list[int]], dict[int, np.ndarray]],
        stored_vectors: Callable[[list[int]], np.ndarray],
    ) -> bool:
        """Bring the graph in step with the ``stored`` labels, element by element: stale labels
        deleted, stored ones revived, re-added (``stored_vectors``), rewritten where
        ``wrong_vectors`` says the graph holds another vector, and re-linked where no search reaches
        them. Sets ``live``; True if the graph changed (or has no file yet)."""
        stored_set = set(stored)
        changed = not self.path.exists()
        for label in in_graph - stored_set:
            try:
                self.hnsw.mark_deleted(label)
                changed = True
            except RuntimeError:
                pass  # already deleted
        # A stored chunk whose vector the graph holds but marks deleted (the graph saw a delete that
        # tantivy does not have) is live again: unmark it; its label names the same vector forever.
        revived = self.marked_deleted(sorted(stored_set & in_graph))
        if revived:
            logger.warning("reviving %d stored chunks the graph marks deleted in %s: %s", len(revived), self.index_dir, revived)
        for label in revived:
            self.hnsw.unmark_deleted(label)
            changed = True
        wrong = wrong_vectors(sorted(stored_set & in_graph))
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
            self.hnsw.add_items(np.stack([wrong[label] for label in labels_wrong]), labels_wrong,
                                num_threads=1, replace_deleted=False)
            changed = True
        missing = sorted(stored_set - in_graph)
        if missing:
            logger.warning("re-adding %d vectors missing from the graph in %s", len(missing), self.index_dir)
            vectors = stored_vectors(missing)
            self.live = len(stored) - len(missing)
            self.add(missing, vectors)
            changed = True
        self.live = len(stored)
        unreachable = self.unreachable(sorted(stored))
        if unreachable:
            # hnswlib reuses a deleted slot by updating it in place (replace_deleted), which re-selects
            # its old neighbours' links; a live element can end with no link pointing to it, and a
            # search, even for its own vector, never reaches it. Updating it in place (a live label:
            # its own slot) links it again: it selects neighbours and they link back.
            logger.warning("re-linking %d graph vectors no search reaches in %s: %s",
                           len(unreachable), self.index_dir, unreachable)
            self.relink(unreachable)
            changed = True
        return changed

    def wrong_vectors(
        self, labels: list[int], stored_vectors: Callable[[list[int]], np.ndarray]
    ) -> dict[int, np.ndarray]:
        """Those of ``labels`` (live in the graph and stored) whose graph vector is not their stored
        vector (the graph keeps a normalised copy): label -> the stored vector."""
        wrong: dict[int, np.ndarray] = {}
        for start in range(0, len(labels), _VERIFY_BATCH):
            batch = labels[start : start + _VERIFY_BATCH]
            in_graph = np.asarray(self.hnsw.get_items(batch, return_type="numpy"), dtype=np.float32)
            vectors = stored_vectors(batch).astype(np.float32)
            unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            agree = np.einsum("ij,ij->i", unit, in_graph) >= 1.0 - 1e-4
            wrong.update((label, vectors[row]) for row, label in enumerate(batch) if not agree[row])
        return wrong

    def unreachable(self, labels: list[int]) -> list[int]:
        """Those of ``labels`` (all live in the graph) that a search for their own vector does not find
        (nor an element with the same vector)."""
        unreachable: list[int] = []
        self.hnsw.set_ef(self._ef_search)
        for start in range(0, len(labels), _VERIFY_BATCH):
            batch = labels[start : start + _VERIFY_BATCH]
            vectors = np.asarray(self.hnsw.get_items(batch, return_type="numpy"), dtype=np.float32)
            found, distances = self.hnsw.knn_query(vectors, k=1, num_threads=1)
            unreachable.extend(
                label for label, hit, distance in zip(batch, found[:, 0], distances[:, 0], strict=True)
                if int(hit) != label and float(distance) > 1e-5
            )
        return unreachable

    def relink(self, labels: list[int]) -> int:
        """Update ``labels`` (live in the graph) in place with their own vectors, which gives each
        neighbours that link back; returns how many."""
        if labels:
            vectors = np.asarray(self.hnsw.get_items(labels, return_type="numpy"), dtype=np.float32)
            self.hnsw.add_items(vectors, labels, num_threads=1, replace_deleted=False)
        return len(labels)

    # ------------------------------------------------------------------ background re-link sweep

    def start_sweep(
        self, labels: list[int], *, lock: threading.RLock, closed: Callable[[], bool], live: Container[int],
        save: Callable[[], None],
    ) -> None:
        """Re-link, in a background thread, the ``live`` ones of ``labels`` that no search reaches
        (``_sweep_unreachable``); ``save`` the graph at the end if any were."""
        self.sweep = threading.Thread(
            target=self._sweep_unreachable, args=(labels, lock, closed, live, save), name="hnsw-relink-sweep",
            daemon=True,
        )
        self.sweep.start()

    def _sweep_unreachable(
        self, labels: list[int], lock: threading.RLock, closed: Callable[[], bool], live: Container[int],
        save: Callable[[], None],
    ) -> None:
        """``_SWEEP_BATCH`` labels at a time under ``lock`` (searches interleave), until ``closed()``."""
        relinked = 0
        try:
            for start in range(0, len(labels), _SWEEP_BATCH):
                with lock:
                    if closed():
                        return
                    batch = [label for label in labels[start : start + _SWEEP_BATCH] if label in live]
                    relinked += self.relink(self.unreachable(batch)) if batch else 0
                time.sleep(SWEEP_PAUSE_S)
            with lock:
                if relinked and not closed():
                    logger.warning("re-linked %d graph vectors no search reached in %s (the sweep after opening)",
                                   relinked, self.index_dir)
                    save()
        except Exception:
            # The sweep only improves the graph; a failure leaves it as it was opened.
            logger.exception("the re-link sweep of %s failed", self.index_dir)

    def wait_for_sweep(self, timeout: float | None = None) -> bool:
        """True once no sweep is running (after waiting up to ``timeout`` for it)."""
        sweep = self.sweep
        if sweep is not None and sweep is not threading.current_thread():
            sweep.join(timeout)
            return not sweep.is_alive()
        return True
