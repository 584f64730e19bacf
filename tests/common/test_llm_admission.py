"""The admission control in front of the LLM (rag_common/llm_admission.py), on real asyncio tasks.

Calls hold their slot until the test releases them, so who waits, who is admitted and who is refused
(and with which Retry-After) is decided by the queue's state alone, not by timing.
"""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import generate_latest

from rag_common.llm_admission import LLMAdmission, LLMBusy
from rag_common.service import retry_after_header, status_for
from rag_common.settings import LLMSettings

#: The longest wait for a slot by default (``LLM_MAX_QUEUE_WAIT_S``, the one source).
MAX_WAIT_S = LLMSettings().max_queue_wait_s


async def hold(admission: LLMAdmission, budget_s: float, release: asyncio.Event, started: list[int], n: int) -> None:
    async with admission.slot(budget_s):
        started.append(n)
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_free_slots_admit_at_once_and_a_full_house_queues_in_order() -> None:
    admission = LLMAdmission("t-order", slots=2, max_queue=4, expected_call_s=5.0, max_wait_s=MAX_WAIT_S)
    release, started = asyncio.Event(), []
    tasks = [asyncio.create_task(hold(admission, 60.0, release, started, n)) for n in range(4)]
    await settle()
    assert started == [0, 1] and admission.queued == 2
    # Two queued ahead, two slots busy: a newcomer waits for (2 + 1) / 2 calls of 5 s.
    assert admission.expected_wait_s() == pytest.approx(7.5)
    release.set()
    await asyncio.gather(*tasks)
    assert started == [0, 1, 2, 3] and admission.queued == 0


async def test_a_call_that_cannot_be_served_within_its_budget_is_refused_at_once() -> None:
    admission = LLMAdmission("t-budget", slots=1, max_queue=8, expected_call_s=10.0, max_wait_s=MAX_WAIT_S)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, 60.0, release, started, 0))
    await settle()
    # Expected wait 10 s + a 10 s call > 15 s: refused, told to come back when the slot should be free.
    with pytest.raises(LLMBusy) as refused:
        async with admission.slot(15.0):
            pytest.fail("admitted")
    error = refused.value
    assert error.kind == "overloaded" and error.stage == "llm"
    assert error.retry_after_s == 10.0
    assert status_for(error) == 503 and retry_after_header(error) == "10"
    assert "exceeds the 15s budget" in error.message
    # The same wait fits a 25 s budget: queued, then served when the slot frees.
    waiter = asyncio.create_task(hold(admission, 25.0, release, started, 1))
    await settle()
    assert admission.queued == 1
    release.set()
    await asyncio.gather(holder, waiter)
    assert started == [0, 1]


async def test_a_full_queue_refuses_whatever_the_budget() -> None:
    admission = LLMAdmission("t-queue", slots=1, max_queue=1, expected_call_s=1.0, max_wait_s=MAX_WAIT_S)
    release, started = asyncio.Event(), []
    tasks = [asyncio.create_task(hold(admission, 1000.0, release, started, n)) for n in range(2)]
    await settle()
    with pytest.raises(LLMBusy, match="1 calls already queued"):
        async with admission.slot(1000.0):
            pass
    release.set()
    await asyncio.gather(*tasks)


async def test_a_free_slot_is_tried_even_when_the_mean_call_exceeds_the_budget() -> None:
    # Otherwise one slow spell could refuse every later call: only calls made bring the mean down.
    admission = LLMAdmission("t-free", slots=1, max_queue=0, expected_call_s=100.0, max_wait_s=MAX_WAIT_S)
    async with admission.slot(1.0):
        pass
    assert admission.mean_call_s < 100.0  # the quick call pulled the weighted mean down


async def test_a_cancelled_waiter_leaves_the_queue() -> None:
    admission = LLMAdmission("t-cancel", slots=1, max_queue=4, expected_call_s=1.0, max_wait_s=MAX_WAIT_S)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, 60.0, release, started, 0))
    await settle()
    waiter = asyncio.create_task(hold(admission, 60.0, release, started, 1))
    await settle()
    assert admission.queued == 1
    waiter.cancel()
    await settle()
    assert admission.queued == 0
    release.set()
    await holder
    async with admission.slot(1.0):  # the slot came back
        pass


async def test_queue_length_wait_and_refusals_are_in_the_metrics() -> None:
    admission = LLMAdmission("t-metrics", slots=1, max_queue=0, expected_call_s=1.0, max_wait_s=MAX_WAIT_S)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, 60.0, release, started, 0))
    await settle()
    with pytest.raises(LLMBusy):
        async with admission.slot(60.0):
            pass
    exposition = generate_latest().decode()
    assert 'rag_llm_in_flight{service="t-metrics"} 1.0' in exposition
    assert 'rag_llm_queue_length{service="t-metrics"} 0.0' in exposition
    assert 'rag_llm_rejected_total{service="t-metrics"} 1.0' in exposition
    assert 'rag_llm_queue_wait_seconds_count{service="t-metrics"} 1.0' in exposition
    assert 'rag_llm_expected_wait_seconds{service="t-metrics"} 1.0' in exposition
    release.set()
    await holder


async def test_a_call_expected_to_wait_longer_than_the_limit_is_refused_at_once() -> None:
    admission = LLMAdmission("t-maxwait", slots=1, max_queue=8, expected_call_s=30.0, max_wait_s=10.0)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, 600.0, release, started, 0))
    await settle()
    # A 600 s budget would fit the 30 s wait, but nobody should queue half a minute for an answer.
    with pytest.raises(LLMBusy, match="expected wait 30s exceeds the 10s limit") as refused:
        async with admission.slot(600.0):
            pytest.fail("admitted")
    assert refused.value.retry_after_s == 30.0
    release.set()
    await holder


async def test_a_queued_call_still_waiting_at_the_limit_is_refused_then() -> None:
    # The estimate says 0.1 s, but the holder keeps its slot: the waiter gives up after 0.3 s.
    admission = LLMAdmission("t-stuck", slots=1, max_queue=8, expected_call_s=0.1, max_wait_s=0.3)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, 600.0, release, started, 0))
    await settle()
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(LLMBusy, match="no slot within"):
        async with admission.slot(600.0):
            pytest.fail("admitted")
    assert 0.25 < loop.time() - began < 2.0
    assert admission.queued == 0
    release.set()
    await holder
    async with admission.slot(600.0):  # the slot it never got is free again for others
        pass


async def test_a_call_admitted_with_less_than_a_mean_call_left_is_refused_and_frees_its_slot() -> None:
    admission = LLMAdmission("t-late", slots=1, max_queue=8, expected_call_s=0.2, max_wait_s=5.0)
    release, started = asyncio.Event(), []
    holder = asyncio.create_task(hold(admission, 600.0, release, started, 0))
    await settle()

    async def late_call() -> None:
        async with admission.slot(0.45):  # expected 0.2 s wait + 0.2 s call fits 0.45 s
            pytest.fail("admitted with no time left")

    waiter = asyncio.create_task(late_call())
    await asyncio.sleep(0.4)  # the holder overruns the estimate: 0.05 s of budget would remain
    release.set()
    await holder
    with pytest.raises(LLMBusy, match="left, a call takes"):
        await waiter
    async with admission.slot(600.0):
        pass
