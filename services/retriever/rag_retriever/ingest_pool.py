"""Where ingestion's CPU work runs, and how many ingest requests may wait for it (issue 29).

Ingestion is CPU work from end to end: parsing uploads, chunking (the embedder's tokenizer driven by
pure-Python loops), cutting sentences and embedding (about 37 ms of the 2-core machine per chunk).
It used to run in ``asyncio.to_thread``, the default executor that searches use as well, inside the
retriever's process: the chunking held the GIL (one tokenizer call on a multi-megabyte sentence held
it for seconds) and the embedding took both cores from the query embedding, so a search waited 17 s
behind one ingest. Now:

- :class:`IngestAdmission` lets ``RETRIEVER_INGEST_WORKERS`` ingest requests do their work at once
  and ``RETRIEVER_INGEST_QUEUE`` more wait for a turn; one more is refused at once with
  :class:`IngestBusy` (503 with ``Retry-After``: the expected wait, from the mean duration of recent
  requests) instead of waiting blind behind an unknown amount of work. The routes take a turn
  (``app.py``) before parsing anything.
- :class:`IngestWork` is the CPU operations the ingestor and the upload route need (``parse``,
  ``chunk``, ``sentence_inputs``, ``fitted_sentence_inputs``, ``encode_documents``,
  ``encode_documents_pooled``). :class:`ProcessWork` (``RETRIEVER_INGEST_ISOLATION=process``, the
  default) runs them in worker processes that load their own copy of the embedder and lower their
  CPU priority (``RETRIEVER_INGEST_NICE``): neither the GIL nor the cores are taken from searches.
  :class:`ThreadWork` runs them in a pool of threads of this process, the fallback, and what an
  ``Ingestor`` built without one uses (tools and tests: ``asyncio.to_thread``, as before).

Both run the same functions (:data:`OPERATIONS`) on a chunker and an embedder made from the same
settings, so a text gets the same chunks and vectors either way. The index reads and the write stay
in the retriever's process (the backend is there); only their inputs and results cross.

Why processes (``bench/ingest_scaling.py``, a real retriever, hybrid searches every 0.1 s while one
document is ingested, docs/retriever.md "Limits and the ingest pool"): search p95 during a 1 MiB
ingest was 1.3x idle with the work in a worker process, 2.5x with it in a thread pool of the
retriever (the GIL: the chunker's Python and its tokenizer calls; the cores: ONNX Runtime's threads).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import math
import multiprocessing
import os
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from prometheus_client import Counter, Gauge

from rag_common.embedders import Embedder
from rag_common.embedders.span_pooling import Pool
from rag_common.errors import DependencyFailed
from rag_common.schemas import DocumentIn
from rag_common.sentence_vectors import sentence_inputs
from rag_common.settings import EmbedderSettings
from rag_retriever.chunking import SPECIAL_TOKENS, Chunker
from rag_retriever.records import ChunkRecord, SourceDocument

if TYPE_CHECKING:
    from rag_retriever.settings import RetrieverSettings

logger = logging.getLogger(__name__)

#: What ``Retry-After`` assumes an ingest request takes until requests have been measured.
PRIOR_REQUEST_S = 30.0
#: Weight of the newest request in the mean request duration: about the last five count.
_EWMA_WEIGHT = 0.3

RUNNING = Gauge("rag_retriever_ingest_running", "Ingest requests doing their work.")
QUEUED = Gauge("rag_retriever_ingest_queued", "Ingest requests waiting for an ingest worker.")
REJECTED = Counter("rag_retriever_ingest_rejected_total", "Ingest requests refused because the ingest queue was full.")

#: One sentence input of a chunk: ``(context, spans, strings)`` (``rag_common.sentence_vectors``).
SentenceInput = tuple[str, list[tuple[int, int]], list[str]]
#: What the sentence operations need of a chunk: ``(text, title, section_path, language)``.
ChunkFields = tuple[str, str, list[str], str | None]


class IngestBusy(DependencyFailed):
    """Every ingest worker is busy and the queue is full: 503 with ``Retry-After`` (the expected wait)."""

    def __init__(self, reason: str, retry_after_s: float) -> None:
        super().__init__("ingest", "overloaded", reason, retry_after_s=retry_after_s)


class IngestAdmission:
    """At most ``workers`` ingest requests at once, at most ``max_queue`` waiting; more are refused."""

    def __init__(self, workers: int, max_queue: int, *, prior_request_s: float = PRIOR_REQUEST_S) -> None:
        if workers < 1 or max_queue < 0:
            raise ValueError("workers >= 1 and max_queue >= 0 are required")
        self._workers = workers
        self._max_queue = max_queue
        self._semaphore = asyncio.Semaphore(workers)
        self._running = 0
        self._waiting = 0
        self._mean_request_s = prior_request_s

    @property
    def running(self) -> int:
        return self._running

    @property
    def waiting(self) -> int:
        return self._waiting

    def expected_wait_s(self) -> float:
        """How long a request arriving now would wait for a worker, from the mean request duration."""
        if self._running + self._waiting < self._workers:
            return 0.0
        return (self._waiting + 1) / self._workers * self._mean_request_s

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold a worker for one request's work; :class:`IngestBusy` at once when the queue is full."""
        if self._running + self._waiting >= self._workers + self._max_queue:
            REJECTED.inc()
            wait_s = self.expected_wait_s()
            raise IngestBusy(
                f"{self._running} ingest request(s) running and {self._waiting} waiting, the most the retriever "
                f"queues (RETRIEVER_INGEST_WORKERS={self._workers}, RETRIEVER_INGEST_QUEUE={self._max_queue}); "
                f"retry in about {wait_s:.0f} s",
                retry_after_s=float(max(1, math.ceil(wait_s))),
            )
        self._waiting += 1
        QUEUED.set(self._waiting)
        try:
            await self._semaphore.acquire()
        finally:
            self._waiting -= 1
            QUEUED.set(self._waiting)
        self._running += 1
        RUNNING.set(self._running)
        started = time.monotonic()
        try:
            yield
        finally:
            self._running -= 1
            RUNNING.set(self._running)
            self._semaphore.release()
            self._mean_request_s += _EWMA_WEIGHT * (time.monotonic() - started - self._mean_request_s)


# ---------------------------------------------------------------------------------------- operations
# Functions of (chunker, embedder, *arguments): the same code in a thread and in a worker process.


def _parse(_chunker: Chunker, _embedder: Embedder, filename: str | None, data: bytes, max_bytes: int,
           content_type: str | None) -> list[DocumentIn]:
    from rag_retriever.parsers import parse_upload

    return parse_upload(filename, data, max_bytes, content_type)


def _chunk(chunker: Chunker, _embedder: Embedder, documents: list[SourceDocument]) -> list[list[ChunkRecord]]:
    return [chunker.chunk_document(document) for document in documents]


def _sentence_inputs(_chunker: Chunker, _embedder: Embedder, chunks: list[ChunkFields]) -> list[SentenceInput]:
    return [
        sentence_inputs(text, title, section_path, language=language) for text, title, section_path, language in chunks
    ]


def _fitted_sentence_inputs(_chunker: Chunker, embedder: Embedder, chunks: list[ChunkFields]) -> list[SentenceInput]:
    """Each chunk's sentence inputs, keeping only the sentences whose string fits the model whole. A
    longer one (a very long title in the context) would be truncated, its sentence cut out of its own
    vector; it is left to the answerer, which embeds the same string (same vector) if it ever scores
    it. Usually the context and the whole chunk fit, and nothing is counted per sentence."""
    budget = embedder.max_seq_length - SPECIAL_TOKENS
    fitted: list[SentenceInput] = []
    for text, title, section_path, language in chunks:
        context, spans, texts = sentence_inputs(text, title, section_path, language=language)
        if texts and embedder.count_tokens(context + text) + SPECIAL_TOKENS > budget:
            kept = [(span, string) for span, string in zip(spans, texts) if embedder.count_tokens(string) <= budget]
            spans, texts = [span for span, _ in kept], [string for _, string in kept]
        fitted.append((context, spans, texts))
    return fitted


def _encode_documents(_chunker: Chunker, embedder: Embedder, texts: list[str]) -> np.ndarray:
    return embedder.encode_documents(texts)


def _encode_documents_pooled(
    _chunker: Chunker, embedder: Embedder, texts: list[str], pools: list[list[Pool]]
) -> tuple[np.ndarray, list[np.ndarray]]:
    return embedder.encode_documents_pooled(texts, pools)  # type: ignore[attr-defined]


OPERATIONS: dict[str, Callable[..., Any]] = {
    "parse": _parse,
    "chunk": _chunk,
    "sentence_inputs": _sentence_inputs,
    "fitted_sentence_inputs": _fitted_sentence_inputs,
    "encode_documents": _encode_documents,
    "encode_documents_pooled": _encode_documents_pooled,
}


class IngestWork:
    """The CPU operations of ingestion, each awaited off the event loop (see the module docstring)."""

    async def _call(self, operation: str, *args: Any) -> Any:
        raise NotImplementedError

    async def parse(self, filename: str | None, data: bytes, max_bytes: int, content_type: str | None) -> list[DocumentIn]:
        """``parsers.parse_upload``: the file's documents, or ``UploadRejected``."""
        return await self._call("parse", filename, data, max_bytes, content_type)

    async def chunk(self, documents: list[SourceDocument]) -> list[list[ChunkRecord]]:
        return await self._call("chunk", documents)

    async def sentence_inputs(self, chunks: Sequence[ChunkRecord]) -> list[SentenceInput]:
        return await self._call("sentence_inputs", _fields(chunks))

    async def fitted_sentence_inputs(self, chunks: Sequence[ChunkRecord]) -> list[SentenceInput]:
        return await self._call("fitted_sentence_inputs", _fields(chunks))

    async def encode_documents(self, texts: list[str]) -> np.ndarray:
        return await self._call("encode_documents", texts)

    async def encode_documents_pooled(self, texts: list[str], pools: list[list[Pool]]) -> tuple[np.ndarray, list[np.ndarray]]:
        return await self._call("encode_documents_pooled", texts, pools)

    async def close(self) -> None:
        """Stop the workers (after the operations already submitted)."""


def _fields(chunks: Sequence[ChunkRecord]) -> list[ChunkFields]:
    return [(chunk.text, chunk.title, list(chunk.section_path), chunk.language) for chunk in chunks]


class ThreadWork(IngestWork):
    """The operations on ``chunker`` and ``embedder`` in ``executor``'s threads; None: the default
    executor (``asyncio.to_thread``), what an ``Ingestor`` built without a pool uses."""

    def __init__(self, chunker: Chunker, embedder: Embedder, executor: ThreadPoolExecutor | None = None) -> None:
        self._chunker = chunker
        self._embedder = embedder
        self._executor = executor

    async def _call(self, operation: str, *args: Any) -> Any:
        call = functools.partial(OPERATIONS[operation], self._chunker, self._embedder, *args)
        if self._executor is None:
            return await asyncio.to_thread(call)
        # As asyncio.to_thread does: the caller's context (trace and log fields) goes with the call.
        context = contextvars.copy_context()
        return await asyncio.get_running_loop().run_in_executor(self._executor, context.run, call)

    async def close(self) -> None:
        if self._executor is not None:
            await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker process builds its chunker and embedder from: the retriever's settings
    (``open_ingest_pool`` copies them; no defaults of its own)."""

    embedding_model: str
    device: str | None
    embedder: dict[str, Any]
    chunk_tokens: int
    chunk_overlap_tokens: int
    embed_template: str
    sentence_vectors: str
    nice: int
    log_level: str


#: The worker process's chunker and embedder (``_start_worker``).
_WORKER: tuple[Chunker, Embedder] | None = None


def _start_worker(config: WorkerConfig) -> None:
    """Initializer of a worker process: lower its priority, load the embedder, build the chunker."""
    global _WORKER
    from rag_common.embedders.factory import build_embedder
    from rag_common.log_format import configure_logging
    from rag_retriever.tokens import EmbedderTokenizer

    configure_logging(config.log_level)
    _exit_with_parent()
    if config.nice:
        os.nice(config.nice)
    embedder = build_embedder(config.embedding_model, device=config.device, settings=EmbedderSettings(**config.embedder))
    embedder.warm_up()
    chunker = Chunker(
        EmbedderTokenizer(embedder), config.chunk_tokens, config.chunk_overlap_tokens, config.embed_template,
        sentence_vectors=config.sentence_vectors,  # type: ignore[arg-type]
    )
    _WORKER = (chunker, embedder)


#: How often a worker checks that the retriever that started it is alive.
_PARENT_CHECK_S = 1.0


def _exit_with_parent() -> None:
    """End this worker when the retriever that started it is gone (killed: nobody shuts the pool
    down), instead of living on with its model loaded: a thread watching the parent process id."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(_PARENT_CHECK_S)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="ingest-worker-parent-watch", daemon=True).start()


def _run(operation: str, *args: Any) -> Any:
    """One operation in a worker process."""
    if _WORKER is None:
        raise RuntimeError("ingest worker not started")
    return OPERATIONS[operation](*_WORKER, *args)


def _ready() -> int:
    return os.getpid()


class ProcessWork(IngestWork):
    """The operations in ``workers`` worker processes (spawned: the retriever's threads are not
    forked) that load the embedder ``config`` names. A worker that dies (killed, out of memory) fails
    the operations in flight with a 503 and the pool is started again for the next request."""

    def __init__(self, config: WorkerConfig, workers: int) -> None:
        self._config = config
        self._workers = workers
        self._executor = self._start()

    def _start(self) -> ProcessPoolExecutor:
        executor = ProcessPoolExecutor(
            max_workers=self._workers, mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_worker, initargs=(self._config,),
        )
        # Start (and load) the workers now, in the background, so the first request does not wait for it.
        for _ in range(self._workers):
            executor.submit(_ready)
        return executor

    async def _call(self, operation: str, *args: Any) -> Any:
        executor = self._executor
        try:
            return await asyncio.wrap_future(executor.submit(_run, operation, *args))
        except BrokenProcessPool as exc:
            if self._executor is executor:
                logger.error("an ingest worker process ended; starting the ingest pool again")
                executor.shutdown(wait=False, cancel_futures=True)
                self._executor = self._start()
            raise DependencyFailed(
                "ingest worker", "unavailable", "the worker process ended during the request (started again; send it again)"
            ) from exc

    async def worker_pids(self) -> list[int]:
        """The worker processes' ids (they are started if they were not yet): for the benchmarks."""
        futures = [asyncio.wrap_future(self._executor.submit(_ready)) for _ in range(self._workers)]
        await asyncio.gather(*futures)
        return [process.pid for process in list(getattr(self._executor, "_processes", {}).values())]

    async def close(self) -> None:
        await asyncio.to_thread(self._executor.shutdown, wait=True, cancel_futures=True)


Isolation = Literal["process", "thread"]


@dataclass
class IngestPool:
    """The admission and the work of the runtime's ingestion (``open_ingest_pool``)."""

    admission: IngestAdmission
    work: IngestWork
    isolation: Isolation

    async def close(self) -> None:
        await self.work.close()


def open_ingest_pool(
    settings: RetrieverSettings, chunker: Chunker, embedder: Embedder, *, isolation: Isolation | None = None
) -> IngestPool:
    """The pool ``settings`` (``RetrieverSettings``) ask for: ``ingest_workers`` workers of
    ``isolation`` (default ``settings.ingest_isolation``) behind a queue of ``ingest_queue``. Thread
    workers use ``chunker`` and ``embedder``; process workers build theirs from the same settings."""
    isolation = isolation or settings.ingest_isolation
    admission = IngestAdmission(settings.ingest_workers, settings.ingest_queue)
    if isolation == "thread":
        executor = ThreadPoolExecutor(max_workers=settings.ingest_workers, thread_name_prefix="ingest")
        return IngestPool(admission, ThreadWork(chunker, embedder, executor), "thread")
    config = WorkerConfig(
        embedding_model=settings.embedding_model,
        device=settings.device,
        embedder=EmbedderSettings().model_dump(),
        chunk_tokens=settings.chunk_tokens,
        chunk_overlap_tokens=settings.chunk_overlap_tokens,
        embed_template=settings.embed_template,
        sentence_vectors=settings.sentence_vectors,
        nice=settings.ingest_nice,
        log_level=settings.log_level,
    )
    return IngestPool(admission, ProcessWork(config, settings.ingest_workers), "process")
