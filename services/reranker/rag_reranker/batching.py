"""Dynamic micro-batching: pairs from concurrent requests share one cross-encoder call.

A model call costs much the same for 8 pairs as for 64 on a GPU (and has a fixed per-call
overhead on CPU), so under concurrency one call for many requests beats many small calls. The
first request of a batch waits at most ``max_wait_s`` for company; whatever arrives while the
model is busy joins the next batch without waiting at all, so the wait only costs latency when
the service is idle. Inside a batch pairs are sorted by length, so the model's own mini-batches
hold pairs of similar length and little padding.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from rag_reranker.metrics import BATCH_PAIRS, QUEUE_PAIRS

logger = logging.getLogger(__name__)

Pair = tuple[str, str]
PairScoringFn = Callable[[list[Pair]], np.ndarray]


@dataclass
class _Job:
    pairs: Sequence[Pair]
    future: asyncio.Future[np.ndarray] = field(repr=False)


def length_sorted_order(pairs: Sequence[Pair]) -> np.ndarray:
    """Indices of ``pairs`` longest first (characters as a cheap proxy for tokens)."""
    lengths = np.fromiter((len(q) + len(p) for q, p in pairs), dtype=np.int64, count=len(pairs))
    return np.argsort(-lengths, kind="stable")


def score_length_sorted(score_pairs: PairScoringFn, pairs: Sequence[Pair]) -> np.ndarray:
    """``score_pairs`` on the pairs sorted by length; scores returned in the input order."""
    order = length_sorted_order(pairs)
    sorted_scores = np.asarray(score_pairs([pairs[i] for i in order]), dtype=np.float64)
    scores = np.empty(len(pairs), dtype=np.float64)
    scores[order] = sorted_scores
    return scores


class MicroBatcher:
    """Queues scoring jobs and runs them in as few model calls as the limits allow.

    One worker task owns the model, so calls never overlap (two concurrent forward passes on one
    device only fight for it). A job larger than ``max_pairs`` runs as a batch of its own.
    """

    def __init__(self, score_pairs: PairScoringFn, *, max_pairs: int, max_wait_s: float) -> None:
        """``max_pairs``, ``max_wait_s``: the settings' (``runtime.build_pair_queue``: batch_max_pairs,
        batch_max_wait_ms), the one source of their defaults."""
        if max_pairs < 1:
            raise ValueError(f"max_pairs must be positive, got {max_pairs}")
        if max_wait_s < 0:
            raise ValueError(f"max_wait_s must be >= 0, got {max_wait_s}")
        self._score_pairs = score_pairs
        self.max_pairs = max_pairs
        self.max_wait_s = max_wait_s
        self._queue: asyncio.Queue[_Job] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._running: list[_Job] = []  # the batch being gathered or scored (aclose fails it)
        self._held: _Job | None = None  # a job that would have overfilled the last batch: it opens the next
        #: Model calls made and pairs scored, for tests and the benchmark.
        self.calls = 0
        self.pairs_scored = 0

    def start(self) -> None:
        if self._worker is None:
            self._worker = asyncio.get_running_loop().create_task(self._run(), name="rerank-micro-batcher")

    async def aclose(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
            self._worker = None
        for job in self._running:
            self._finish(job, error=RuntimeError("reranker is shutting down"))
        self._running = []
        if self._held is not None:
            self._finish(self._held, error=RuntimeError("reranker is shutting down"))
            self._held = None
        while not self._queue.empty():
            self._finish(self._queue.get_nowait(), error=RuntimeError("reranker is shutting down"))

    async def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        """Scores for ``pairs`` in their order, once the batch holding them has run."""
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        if self._worker is None:
            raise RuntimeError("MicroBatcher.start() was not called")
        job = _Job(pairs, asyncio.get_running_loop().create_future())
        QUEUE_PAIRS.inc(len(pairs))
        self._queue.put_nowait(job)
        return await job.future

    async def _next_batch(self) -> list[_Job]:
        first = self._held or await self._queue.get()
        self._held = None
        batch = [first]
        self._running = batch  # taken off the queue: if aclose() comes while we wait, it must fail these
        size = len(first.pairs)
        deadline = asyncio.get_running_loop().time() + self.max_wait_s
        while size < self.max_pairs:
            if not self._queue.empty():
                job = self._queue.get_nowait()  # already waiting: take it without any delay
            else:
                remaining = deadline - asyncio.get_running_loop().time()
                if remaining <= 0:
                    break
                try:
                    job = await asyncio.wait_for(self._queue.get(), remaining)
                except TimeoutError:
                    break
            if size + len(job.pairs) > self.max_pairs:
                self._held = job  # would overfill this batch: it starts the next one instead
                break
            batch.append(job)
            size += len(job.pairs)
        return batch

    async def _run(self) -> None:
        while True:
            batch = await self._next_batch()
            live = [job for job in batch if not job.future.done()]  # a cancelled caller needs no scores
            for job in batch:
                if job.future.done():
                    QUEUE_PAIRS.dec(len(job.pairs))
            if not live:
                continue
            self._running = live
            pairs = [pair for job in live for pair in job.pairs]
            BATCH_PAIRS.observe(len(pairs))
            try:
                scores = await asyncio.to_thread(score_length_sorted, self._score_pairs, pairs)
                if scores.shape != (len(pairs),):
                    raise RuntimeError(f"model returned {scores.shape[0]} scores for {len(pairs)} pairs")
            except Exception as exc:  # every waiting request must hear about it, not hang
                logger.exception("cross-encoder batch of %d pairs failed", len(pairs))
                for job in live:
                    self._finish(job, error=exc)
                self._running = []
                continue
            self.calls += 1
            self.pairs_scored += len(pairs)
            start = 0
            for job in live:
                self._finish(job, result=scores[start : start + len(job.pairs)])
                start += len(job.pairs)
            self._running = []

    @staticmethod
    def _finish(job: _Job, *, result: np.ndarray | None = None, error: BaseException | None = None) -> None:
        QUEUE_PAIRS.dec(len(job.pairs))
        if job.future.done():
            return
        if error is not None:
            job.future.set_exception(error)
        else:
            job.future.set_result(result)


class UnbatchedScorer:
    """The same interface without batching: every request runs its own model call, in a thread."""

    def __init__(self, score_pairs: PairScoringFn) -> None:
        self._score_pairs = score_pairs

    def start(self) -> None:
        pass

    async def aclose(self) -> None:
        pass

    async def score(self, pairs: Sequence[Pair]) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float64)
        QUEUE_PAIRS.inc(len(pairs))
        try:
            return await asyncio.to_thread(score_length_sorted, self._score_pairs, list(pairs))
        finally:
            QUEUE_PAIRS.dec(len(pairs))
