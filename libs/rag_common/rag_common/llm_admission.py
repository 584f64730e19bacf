"""Admission control in front of the LLM: a bounded queue whose expected wait is known.

An LLM endpoint decodes a few requests at a time (the local llama.cpp server: 2 slots); the rest
wait in its queue, blind, until the caller's timeout. Under 8 concurrent clients that was 20 of 32
chat requests ending in 504 after 90 s (issue 12). Here every model call first asks for a slot with
the time it has left: it is admitted when a slot is free, or when the expected wait for one is at
most ``max_wait_s``, that wait plus one call fits in the budget and the queue has room, and refused
at once otherwise. A queued call still waiting after ``max_wait_s``, or given a slot with less than a
mean call's time left, is refused then (the estimate was wrong; the caller still gets an answer in
time) (:class:`LLMBusy`, a ``DependencyFailed``
of kind ``overloaded`` carrying the expected wait as ``retry_after_s``). The caller then takes its
fallback at once (the generator's extractive answer, the refiner's context-append rewrite) or answers
503 with ``Retry-After``.

The expected wait for a newcomer is ``(queued + 1) / slots`` calls when every slot is busy, zero
otherwise, times the mean duration of a call: an exponentially weighted mean of the calls this
process made, starting from a configured prior. Each process keeps its own count, so calls another
service makes to the same endpoint are not seen directly; they show up as longer calls here, which
raises the mean and the estimate.

Plain asyncio on purpose: rate limiters (aiolimiter, limits) bound requests per second, not
concurrency with a known wait, which is what a decoding server with fixed slots needs.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from prometheus_client import Counter, Gauge, Histogram

from rag_common.errors import DependencyFailed

#: Weight of the newest call in the mean call duration: about the last five calls count.
_EWMA_WEIGHT = 0.3

QUEUE_LENGTH = Gauge("rag_llm_queue_length", "LLM calls waiting for a slot.", ["service"])
IN_FLIGHT = Gauge("rag_llm_in_flight", "LLM calls holding a slot.", ["service"])
EXPECTED_WAIT = Gauge(
    "rag_llm_expected_wait_seconds", "Expected wait for a slot of a call arriving now (last computed).", ["service"]
)
MEAN_CALL = Gauge("rag_llm_call_mean_seconds", "Weighted mean duration of recent LLM calls.", ["service"])
QUEUE_WAIT = Histogram(
    "rag_llm_queue_wait_seconds",
    "Time an admitted call waited for a slot.",
    ["service"],
    buckets=(0.01, 0.1, 0.5, 1, 2.5, 5, 10, 20, 40, 80),
)
REJECTED = Counter("rag_llm_rejected_total", "LLM calls refused at once because they could not be served in time.", ["service"])


class LLMBusy(DependencyFailed):
    """The LLM could not serve this call within its budget; ``retry_after_s`` is the expected wait."""

    def __init__(self, reason: str, retry_after_s: float) -> None:
        super().__init__("llm", "overloaded", reason, retry_after_s=retry_after_s)


class LLMAdmission:
    def __init__(
        self, service: str, *, slots: int, max_queue: int, expected_call_s: float, max_wait_s: float
    ) -> None:
        """The limits are ``LLMSettings``' (``slots``, ``max_queue``, ``expected_call_s``, ``max_queue_wait_s``)."""
        if slots < 1 or max_queue < 0 or expected_call_s <= 0 or max_wait_s <= 0:
            raise ValueError("slots >= 1, max_queue >= 0, expected_call_s > 0 and max_wait_s > 0 are required")
        self._service = service
        self._slots = slots
        self._max_queue = max_queue
        self._max_wait_s = max_wait_s
        self._semaphore = asyncio.Semaphore(slots)
        self._waiting = 0
        self._in_flight = 0
        self._mean_call_s = expected_call_s
        MEAN_CALL.labels(service).set(expected_call_s)

    @property
    def mean_call_s(self) -> float:
        return self._mean_call_s

    @property
    def queued(self) -> int:
        return self._waiting

    def expected_wait_s(self) -> float:
        """Expected time a call arriving now waits for a slot."""
        if self._in_flight + self._waiting < self._slots:
            return 0.0
        return (self._waiting + 1) / self._slots * self._mean_call_s

    @asynccontextmanager
    async def slot(self, budget_s: float) -> AsyncIterator[None]:
        """Hold one slot for the duration of a model call; raises LLMBusy at once if the call cannot
        start and finish within ``budget_s`` as far as can be expected."""
        wait_s = self.expected_wait_s()
        EXPECTED_WAIT.labels(self._service).set(wait_s)
        if self._waiting >= self._max_queue and wait_s > 0:
            REJECTED.labels(self._service).inc()
            raise LLMBusy(f"{self._waiting} calls already queued (limit {self._max_queue})", _retry_after(wait_s))
        # With a slot free the call is always tried (its own timeout bounds it): refusing it on the
        # mean alone could refuse every call for good, since only calls made update the mean.
        if wait_s > self._max_wait_s:
            REJECTED.labels(self._service).inc()
            raise LLMBusy(f"expected wait {wait_s:.0f}s exceeds the {self._max_wait_s:.0f}s limit", _retry_after(wait_s))
        if wait_s > 0 and wait_s + self._mean_call_s > budget_s:
            REJECTED.labels(self._service).inc()
            raise LLMBusy(
                f"expected wait {wait_s:.0f}s + call {self._mean_call_s:.0f}s exceeds the {budget_s:.0f}s budget",
                _retry_after(wait_s),
            )
        queued_at = time.monotonic()
        self._waiting += 1
        QUEUE_LENGTH.labels(self._service).set(self._waiting)
        try:
            async with asyncio.timeout(self._max_wait_s):
                await self._semaphore.acquire()
        except TimeoutError:
            REJECTED.labels(self._service).inc()
            raise LLMBusy(f"no slot within {self._max_wait_s:.0f}s", _retry_after(self.expected_wait_s())) from None
        finally:
            self._waiting -= 1
            QUEUE_LENGTH.labels(self._service).set(self._waiting)
        waited_s = time.monotonic() - queued_at
        QUEUE_WAIT.labels(self._service).observe(waited_s)
        if waited_s > 0.05 and budget_s - waited_s < self._mean_call_s:
            # Admitted on an estimate that was too low: the call would most likely time out.
            self._semaphore.release()
            REJECTED.labels(self._service).inc()
            raise LLMBusy(
                f"waited {waited_s:.0f}s; {budget_s - waited_s:.0f}s left, a call takes {self._mean_call_s:.0f}s",
                _retry_after(self.expected_wait_s()),
            )
        self._in_flight += 1
        IN_FLIGHT.labels(self._service).set(self._in_flight)
        started = time.monotonic()
        try:
            yield
        finally:
            self._in_flight -= 1
            IN_FLIGHT.labels(self._service).set(self._in_flight)
            self._semaphore.release()
            # Failed and timed-out calls held the slot as long as they ran: they count too.
            self._mean_call_s += _EWMA_WEIGHT * (time.monotonic() - started - self._mean_call_s)
            MEAN_CALL.labels(self._service).set(self._mean_call_s)


def _retry_after(wait_s: float) -> float:
    return float(max(1, math.ceil(wait_s)))
