"""The query log: one record per chat turn, and one per feedback given on a turn.

A record says what was asked and what came of it (tenant, hashed user, question, refined query,
intent, per-stage milliseconds, answer mode, abstained and why, answerability, citation count,
whether an answer span was marked and whether (and on what, between how many values) the sources
disagreed, degraded reasons, feedback, the OpenTelemetry trace id). It goes to a :class:`QueryLogSink`:

* :class:`JsonlFileSink`: a JSON-lines file rotated by size (the stdlib's ``RotatingFileHandler``),
  read back by ``ragctl logs``; the local default;
* ``OpenSearchQueryLogSink`` (``rag_gateway/query_log_opensearch.py``): daily indices
  ``rag-query-logs-YYYY.MM.DD`` written with opensearch-py's bulk helper; production.

Writing never fails or slows a chat turn: :meth:`QueryLogWriter.submit` only puts the record on a
bounded asyncio queue (never awaits); one background task takes records off in batches and hands
them to the sink. A full queue or a failing sink drops records, counted in
``rag_gateway_query_log_dropped_total{reason}`` on the gateway's ``/metrics``; nothing is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import logging
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from logging.handlers import RotatingFileHandler
from pathlib import Path
from typing import Any, Literal, Protocol

from prometheus_client import Counter, Gauge
from pydantic import BaseModel, ConfigDict, Field

from rag_common.identity import Identity
from rag_common.telemetry import trace_id_of_current_span
from rag_common.schemas import AnswerSpan, Conflict
from rag_gateway.chat_models import Feedback, Turn
from rag_gateway.chat_state import ChatResult


logger = logging.getLogger(__name__)

#: Stage timings a record may carry (``ChatResponse.timings_ms``): each is a float field of the index template.
STAGES = ("history", "refine", "retrieve", "rerank", "generate", "first_token", "meta", "save", "total")

DROPPED = Counter(
    "rag_gateway_query_log_dropped_total",
    "Query-log records dropped: the queue was full, the sink failed, or the record could not be built",
    ["reason"],
)
WRITTEN = Counter("rag_gateway_query_log_written_total", "Query-log records handed to the sink without error")
QUEUED = Gauge("rag_gateway_query_log_queue_length", "Query-log records waiting for the background writer")

Event = Literal["turn", "feedback"]
Endpoint = Literal["chat", "chat_stream", "completions", "completions_stream", "feedback"]


class FeedbackLog(BaseModel):
    rating: Literal["up", "down"]
    comment: str | None = None
    created_at: str


class QueryLogRecord(BaseModel):
    """One line of the query log; ``deploy/opensearch/query-logs-template.json`` maps every field."""

    model_config = ConfigDict(populate_by_name=True)

    timestamp: str = Field(alias="@timestamp", description="When the turn ended (or the feedback came), ISO 8601 UTC")
    event: Event = Field(description="turn: a chat turn; feedback: a thumbs up/down given later on one")
    #: The OpenSearch document ``_id``: the turn id for a turn, a fresh id for each feedback.
    record_id: str
    turn_id: str
    conversation_id: str | None = Field(description="None for the stateless OpenAI-compatible endpoint")
    turn_index: int | None = Field(description="0-based position in the conversation when stored (feedback's path)")
    endpoint: Endpoint
    tenant: str
    user_hash: str = Field(description="HMAC-SHA256 of tenant/user under GATEWAY_QUERY_LOG_USER_SALT, 16 hex digits")
    trace_id: str | None = Field(description="The OpenTelemetry trace id (32 hex digits) of the request, if traced")
    question: str
    refined_query: str
    intent: str
    language: str | None = Field(default=None, description="The question's language (ISO 639-1), None when not told")
    answer: str
    answer_mode: str | None = None
    abstained: bool
    abstain_reason: str | None = None
    answerability: float | None = None
    citation_count: int
    citation_precision: float | None = None
    has_answer_span: bool = Field(default=False, description="The answer marked the phrase that answers (answer_span)")
    conflict: bool = Field(default=False, description="The cited sources disagreed on the answer")
    conflict_kind: str | None = Field(default=None, description="What they disagreed on (person, date, ...) when they did")
    conflict_values: int = Field(default=0, description="How many different values the sources gave (0: no conflict)")
    degraded: list[str] = Field(default_factory=list)
    degraded_count: int = 0
    stage_ms: dict[str, float] = Field(default_factory=dict)
    feedback: FeedbackLog | None = None

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", by_alias=True)


def user_hash(identity: Identity, salt: str) -> str:
    """A stable pseudonym of ``tenant/user``: the same user gives the same hash in every record, and
    the name is not in the log. With a secret salt, only someone holding it can test a guess."""
    return hmac.new(salt.encode(), identity.owner_key.encode(), hashlib.sha256).hexdigest()[:16]


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _evidence(answer_span: AnswerSpan | None, conflict: Conflict | None) -> dict[str, Any]:
    """The record's answer-span and conflict fields: whether each was given, the conflict's kind and size."""
    return {
        "has_answer_span": answer_span is not None,
        "conflict": conflict is not None,
        "conflict_kind": None if conflict is None else conflict.kind,
        "conflict_values": 0 if conflict is None else len(conflict.values),
    }


def turn_record(
    result: ChatResult,
    *,
    endpoint: Endpoint,
    timings_ms: Mapping[str, float],
    salt: str,
    now: float | None = None,
) -> QueryLogRecord:
    """The record of a finished chat turn, from its result (as the stored turn and the response are)."""
    identity = result.identity
    generation = result.generation
    refined = result.refined
    degraded = list(result.degraded)
    return QueryLogRecord(
        timestamp=_iso(time.time() if now is None else now),
        event="turn",
        record_id=result.turn_id,
        turn_id=result.turn_id,
        conversation_id=result.conversation_id,
        turn_index=result.turn_index,
        endpoint=endpoint,
        tenant=identity.tenant,
        user_hash=user_hash(identity, salt),
        trace_id=trace_id_of_current_span(),
        question=result.message,
        refined_query=refined.query,
        intent=refined.intent,
        language=result.language,
        answer=generation.answer,
        answer_mode=generation.mode,
        abstained=generation.abstained,
        abstain_reason=(generation.abstain_reason or None) if generation.abstained else None,
        answerability=generation.answerability,
        citation_count=len(generation.citations),
        citation_precision=generation.citation_precision,
        **_evidence(generation.answer_span, generation.conflict),
        degraded=degraded,
        degraded_count=len(degraded),
        stage_ms={stage: float(ms) for stage, ms in timings_ms.items() if stage in STAGES},
    )


def feedback_record(
    identity: Identity,
    conversation_id: str,
    turn_index: int,
    turn: Turn,
    feedback: Feedback,
    *,
    salt: str,
) -> QueryLogRecord:
    """The record of feedback on a stored turn: the turn's question and answer again (so a thumbs-down
    reads on its own), its ``turn_id`` (to find the turn's own record, timings and trace) and the
    feedback. Fields the stored turn does not keep (mode, answerability, timings) stay empty."""
    turn_id = turn.turn_id or f"{conversation_id}:{turn_index}"
    return QueryLogRecord(
        timestamp=_iso(feedback.created_at),
        event="feedback",
        record_id=uuid.uuid4().hex,
        turn_id=turn_id,
        conversation_id=conversation_id,
        turn_index=turn_index,
        endpoint="feedback",
        tenant=identity.tenant,
        user_hash=user_hash(identity, salt),
        trace_id=trace_id_of_current_span(),
        question=turn.message,
        refined_query=turn.refined_query,
        intent=turn.intent,
        answer=turn.answer,
        abstained=turn.abstained,
        citation_count=len(turn.citations),
        **_evidence(turn.answer_span, turn.conflict),
        feedback=FeedbackLog(rating=feedback.rating, comment=feedback.comment, created_at=_iso(feedback.created_at)),
    )


# --------------------------------------------------------------------------- sinks


class QueryLogSink(Protocol):
    """Where query-log records go. ``write`` may raise: the writer counts the batch as dropped, or
    only ``exc.refused`` of it when the exception carries that count."""

    async def write(self, records: Sequence[Mapping[str, Any]]) -> None: ...

    async def close(self) -> None: ...


class _RaisingRotatingFileHandler(RotatingFileHandler):
    # logging's default prints the error to stderr and carries on; the writer must know, to count it.
    def handleError(self, record: logging.LogRecord) -> None:  # noqa: N802 - logging's name
        raise  # noqa: PLE0704 - re-raises the exception emit() is handling


class JsonlFileSink:
    """One JSON object per line in ``path``, rotated by the stdlib's ``RotatingFileHandler`` when the
    file would pass ``max_bytes`` (``path.1`` is the newest old file, ``path.{backups}`` the oldest;
    older ones are deleted). File I/O runs in a worker thread, never on the event loop; the directory
    is made at the first write."""

    def __init__(self, path: Path, *, max_bytes: int, backups: int) -> None:
        self.path = Path(path)
        self._handler = _RaisingRotatingFileHandler(
            self.path, maxBytes=max_bytes, backupCount=backups, encoding="utf-8", delay=True
        )
        self._handler.setFormatter(logging.Formatter("%(message)s"))

    def _write_lines(self, lines: list[str]) -> None:
        # Here, not at start: a log directory that cannot be made costs records, never the gateway's start.
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for line in lines:
            self._handler.handle(logging.makeLogRecord({"msg": line, "levelno": logging.INFO, "levelname": "INFO"}))
        self._handler.flush()

    async def write(self, records: Sequence[Mapping[str, Any]]) -> None:
        lines = [json.dumps(record, ensure_ascii=False, separators=(",", ":")) for record in records]
        await asyncio.to_thread(self._write_lines, lines)

    async def close(self) -> None:
        await asyncio.to_thread(self._handler.close)


class NullSink:
    """``GATEWAY_QUERY_LOG_SINK=off``: records are discarded."""

    async def write(self, records: Sequence[Mapping[str, Any]]) -> None:
        return None

    async def close(self) -> None:
        return None


# --------------------------------------------------------------------------- writer


class QueryLogWriter:
    """Bounded queue + one background task between the chat path and a sink.

    ``submit`` never blocks and never raises; ``start`` launches the task, ``close`` gives it up
    to ``drain_timeout_s`` to write what is queued, then stops it and closes the sink.
    """

    def __init__(
        self,
        sink: QueryLogSink,
        *,
        queue_size: int,
        batch_size: int,
        salt: str,
        drain_timeout_s: float = 5.0,
    ) -> None:
        self.sink = sink
        self.salt = salt
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=queue_size)
        self._batch_size = batch_size
        self._drain_timeout_s = drain_timeout_s
        self._task: asyncio.Task[None] | None = None
        self.dropped = 0

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="query-log-writer")

    def submit(self, record: QueryLogRecord | Mapping[str, Any]) -> bool:
        """Queue ``record``; False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait(record.as_json() if isinstance(record, QueryLogRecord) else dict(record))
        except asyncio.QueueFull:
            self._drop("queue_full", 1)
            return False
        QUEUED.set(self._queue.qsize())
        return True

    def drop_unbuildable(self) -> None:
        """Count a record that could not be built (logged by the caller)."""
        self._drop("build_failed", 1)

    def _drop(self, reason: str, count: int) -> None:
        self.dropped += count
        DROPPED.labels(reason).inc(count)

    def _take_batch(self, first: dict[str, Any]) -> list[dict[str, Any]]:
        batch = [first]
        while len(batch) < self._batch_size:
            try:
                batch.append(self._queue.get_nowait())
            except asyncio.QueueEmpty:
                break
        return batch

    async def _write(self, batch: list[dict[str, Any]]) -> None:
        try:
            await self.sink.write(batch)
        except Exception as exc:  # noqa: BLE001 - a failing sink loses records, never the writer
            # A sink that wrote part of the batch says how many it refused (``refused``).
            lost = min(len(batch), int(getattr(exc, "refused", len(batch))))
            logger.exception("query log: %d of %d record(s) not written", lost, len(batch))
            self._drop("sink_failed", lost)
            WRITTEN.inc(len(batch) - lost)
        else:
            WRITTEN.inc(len(batch))
        finally:
            for _ in batch:
                self._queue.task_done()
            QUEUED.set(self._queue.qsize())

    async def _run(self) -> None:
        while True:
            first = await self._queue.get()
            await self._write(self._take_batch(first))

    async def flush(self) -> None:
        """Wait until every record queued so far has been handed to the sink (tests, shutdown)."""
        await self._queue.join()

    async def close(self) -> None:
        if self._task is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.flush(), self._drain_timeout_s)
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if (left := self._queue.qsize()) > 0:
            self._drop("shutdown", left)
        await self.sink.close()


# --------------------------------------------------------------------------- reading (ragctl logs)


def log_files(path: Path) -> list[Path]:
    """The file and its rotated copies, oldest first."""
    path = Path(path)
    rotated = sorted(
        (p for p in path.parent.glob(path.name + ".*") if p.suffix[1:].isdigit()),
        key=lambda p: int(p.suffix[1:]),
        reverse=True,
    )
    return [*rotated, *([path] if path.exists() else [])]


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every record of the log at ``path`` (rotated files included), oldest first; a line that is not
    a JSON object (a torn last line) is skipped."""
    for file in log_files(path):
        with file.open(encoding="utf-8") as lines:
            for line in lines:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if isinstance(record, dict):
                    yield record


@dataclass(frozen=True)
class RecordFilter:
    """What ``ragctl logs`` keeps; every field set must match."""

    tenant: str | None = None
    user_hash: str | None = None
    conversation_id: str | None = None
    turn_id: str | None = None
    trace_id: str | None = None
    event: Event | None = None
    intent: str | None = None
    abstained: bool | None = None
    degraded: bool | None = None
    #: ``up``/``down``: records carrying that feedback; ``any``: records carrying feedback.
    feedback: Literal["up", "down", "any"] | None = None
    since: str | None = None

    def matches(self, record: Mapping[str, Any]) -> bool:
        exact = {
            "tenant": self.tenant,
            "user_hash": self.user_hash,
            "conversation_id": self.conversation_id,
            "turn_id": self.turn_id,
            "trace_id": self.trace_id,
            "event": self.event,
            "intent": self.intent,
            "abstained": self.abstained,
        }
        if any(want is not None and record.get(key) != want for key, want in exact.items()):
            return False
        if self.degraded is not None and bool(record.get("degraded_count")) != self.degraded:
            return False
        if self.feedback is not None:
            feedback = record.get("feedback") or {}
            if not feedback or (self.feedback != "any" and feedback.get("rating") != self.feedback):
                return False
        return self.since is None or str(record.get("@timestamp", "")) >= self.since


def select(records: Iterable[Mapping[str, Any]], where: RecordFilter, *, last: int | None = None) -> list[Mapping[str, Any]]:
    kept = [record for record in records if where.matches(record)]
    return kept[-last:] if last else kept
