"""MicroBatcher / UnbatchedScorer with the real tiny cross-encoder (and plain-Python scorers where
the model's own numbers do not matter, only what the batcher hands it)."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest
from prometheus_client import REGISTRY

from rag_reranker.batching import MicroBatcher, UnbatchedScorer, length_sorted_order, score_length_sorted
from rag_reranker.runtime import GPU_BATCH_MAX_WAIT_MS
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.settings import RerankerSettings

Pair = tuple[str, str]

#: The batcher's limits by default: the settings' pairs per batch, the GPU wait (``runtime.build_pair_queue``).
LIMITS = {"max_pairs": RerankerSettings().batch_max_pairs, "max_wait_s": GPU_BATCH_MAX_WAIT_MS / 1000.0}
QUERIES = ["reset my password", "office opening hours", "quarterly revenue", "holiday schedule"]
PASSAGES = [
    "Open Settings, choose Account and press Reset password.",
    "The cafeteria serves lunch from noon until two.",
    "Quarterly revenue grew by four percent, driven by subscriptions in the northern region.",
    "Passwords must be at least twelve characters long.",
    "Our office is closed on public holidays.",
    "Opening hours: nine to five.",
]


def _jobs(count: int) -> list[list[Pair]]:
    """``count`` jobs of 1..6 pairs, each from its own query, so pairs of several queries mix in a batch."""
    return [
        [(QUERIES[j % len(QUERIES)] + f" #{j}", PASSAGES[(j + i) % len(PASSAGES)]) for i in range(1 + j % len(PASSAGES))]
        for j in range(count)
    ]


def _queue_pairs() -> float:
    value = REGISTRY.get_sample_value("rag_reranker_queue_pairs")
    assert value is not None, "the rag_reranker_queue_pairs gauge is not registered"
    return value


def _text_scores(pairs: list[Pair]) -> np.ndarray:
    """A deterministic pure-Python score: length of the passage plus a hash-free query term."""
    return np.array([len(p) + 0.001 * len(q) for q, p in pairs], dtype=np.float64)


class RecordingScorer:
    """Scores like ``_text_scores`` and records every call it receives (in the order received)."""

    def __init__(self) -> None:
        self.calls: list[list[Pair]] = []
        self._lock = threading.Lock()

    def __call__(self, pairs: list[Pair]) -> np.ndarray:
        with self._lock:
            self.calls.append(list(pairs))
        return _text_scores(pairs)


# --------------------------------------------------------------------------- length sorting


def test_score_length_sorted_feeds_longest_first_and_returns_input_order() -> None:
    pairs = [("q", "mid length"), ("q", "x"), ("query", "the longest passage of them all"), ("q", "tie a"), ("q", "tie b")]
    recorder = RecordingScorer()
    scores = score_length_sorted(recorder, pairs)

    (received,) = recorder.calls
    lengths = [len(q) + len(p) for q, p in received]
    assert lengths == sorted(lengths, reverse=True)
    assert received[0] == ("query", "the longest passage of them all") and received[-1] == ("q", "x")
    # Equal lengths keep their input order (stable sort).
    assert received.index(("q", "tie a")) < received.index(("q", "tie b"))
    # Scores come back aligned with the input, not with the sorted order.
    np.testing.assert_array_equal(scores, _text_scores(pairs))
    assert scores.dtype == np.float64


def test_length_sorted_order_is_a_permutation() -> None:
    pairs = [("a", "b" * n) for n in (3, 9, 1, 9, 5)]
    order = length_sorted_order(pairs)
    assert sorted(order.tolist()) == list(range(len(pairs)))
    assert order.tolist() == [1, 3, 4, 0, 2]


def test_score_length_sorted_with_the_cross_encoder_matches_plain_scoring(tiny_cross_encoder: CrossEncoderScorer) -> None:
    pairs = [pair for job in _jobs(4) for pair in job]
    np.testing.assert_allclose(
        score_length_sorted(tiny_cross_encoder.score_pairs, pairs), tiny_cross_encoder.score_pairs(pairs), atol=1e-5
    )


# --------------------------------------------------------------------------- MicroBatcher


async def test_concurrent_jobs_share_model_calls_and_get_their_own_scores(tiny_cross_encoder: CrossEncoderScorer) -> None:
    jobs = _jobs(8)
    alone = [tiny_cross_encoder.score_pairs(job) for job in jobs]
    before = _queue_pairs()

    batcher = MicroBatcher(tiny_cross_encoder.score_pairs, max_pairs=256, max_wait_s=0.05)
    batcher.start()
    try:
        results = await asyncio.gather(*(batcher.score(job) for job in jobs))
    finally:
        await batcher.aclose()

    for job, got, expected in zip(jobs, results, alone):
        assert got.shape == (len(job),)
        np.testing.assert_allclose(got, expected, atol=1e-5)
    assert batcher.pairs_scored == sum(len(job) for job in jobs)
    assert 1 <= batcher.calls < len(jobs)
    assert _queue_pairs() == before


async def test_no_model_call_exceeds_max_pairs_and_an_oversized_job_runs_alone() -> None:
    recorder = RecordingScorer()
    batcher = MicroBatcher(recorder, max_pairs=4, max_wait_s=0.05)
    batcher.start()
    small = [("q1", "a"), ("q1", "bb"), ("q1", "ccc")]
    big = [("q2", "d" * n) for n in range(1, 11)]  # 10 pairs > max_pairs
    tail = [("q3", "e"), ("q3", "ff")]
    try:
        got_small, got_big, got_tail = await asyncio.gather(batcher.score(small), batcher.score(big), batcher.score(tail))
    finally:
        await batcher.aclose()

    np.testing.assert_array_equal(got_small, _text_scores(small))
    np.testing.assert_array_equal(got_big, _text_scores(big))
    np.testing.assert_array_equal(got_tail, _text_scores(tail))
    sizes = [len(call) for call in recorder.calls]
    assert 10 in sizes, "the oversized job must be scored whole"
    assert all(size <= 4 for size in sizes if size != 10), sizes
    assert sum(sizes) == len(small) + len(big) + len(tail)


async def test_oversized_job_with_the_cross_encoder(tiny_cross_encoder: CrossEncoderScorer) -> None:
    big = [(QUERIES[0], PASSAGES[i % len(PASSAGES)] + f" ({i})") for i in range(20)]
    batcher = MicroBatcher(tiny_cross_encoder.score_pairs, max_pairs=4, max_wait_s=0.001)
    batcher.start()
    try:
        scores = await batcher.score(big)
    finally:
        await batcher.aclose()
    np.testing.assert_allclose(scores, tiny_cross_encoder.score_pairs(big), atol=1e-5)


async def test_unbatched_scorer_gives_the_same_scores(tiny_cross_encoder: CrossEncoderScorer) -> None:
    jobs = _jobs(5)
    before = _queue_pairs()
    unbatched = UnbatchedScorer(tiny_cross_encoder.score_pairs)
    unbatched.start()
    results = await asyncio.gather(*(unbatched.score(job) for job in jobs))
    await unbatched.aclose()
    for job, got in zip(jobs, results):
        np.testing.assert_allclose(got, tiny_cross_encoder.score_pairs(job), atol=1e-5)
    assert (await unbatched.score([])).shape == (0,)
    assert _queue_pairs() == before


async def test_empty_job_needs_no_model_call() -> None:
    recorder = RecordingScorer()
    batcher = MicroBatcher(recorder, **LIMITS)
    batcher.start()
    try:
        assert (await batcher.score([])).shape == (0,)
    finally:
        await batcher.aclose()
    assert recorder.calls == [] and batcher.calls == 0


async def test_score_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="start"):
        await MicroBatcher(_text_scores, **LIMITS).score([("q", "p")])


@pytest.mark.parametrize("kwargs", [{"max_pairs": 0}, {"max_wait_s": -0.001}])
def test_rejects_bad_limits(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        MicroBatcher(_text_scores, **{**LIMITS, **kwargs})


async def test_a_model_error_fails_every_waiting_job_and_the_batcher_keeps_working() -> None:
    fail_next = threading.Event()
    fail_next.set()

    def flaky(pairs: list[Pair]) -> np.ndarray:
        if fail_next.is_set():
            fail_next.clear()
            raise RuntimeError("CUDA out of memory")
        return _text_scores(pairs)

    before = _queue_pairs()
    batcher = MicroBatcher(flaky, max_pairs=64, max_wait_s=0.05)
    batcher.start()
    try:
        jobs = _jobs(3)
        outcomes = await asyncio.gather(*(batcher.score(job) for job in jobs), return_exceptions=True)
        assert all(isinstance(o, RuntimeError) and "out of memory" in str(o) for o in outcomes), outcomes
        assert batcher.calls == 0
        # The worker survived: the next job is scored normally.
        again = await batcher.score(jobs[1])
        np.testing.assert_array_equal(again, _text_scores(jobs[1]))
    finally:
        await batcher.aclose()
    assert _queue_pairs() == before


async def test_a_wrong_number_of_scores_fails_the_jobs() -> None:
    batcher = MicroBatcher(lambda pairs: np.zeros(len(pairs) + 1), max_pairs=LIMITS["max_pairs"], max_wait_s=0.0)
    batcher.start()
    try:
        with pytest.raises(Exception):
            await batcher.score([("q", "a"), ("q", "b")])
    finally:
        await batcher.aclose()


async def test_a_cancelled_caller_does_not_break_the_others() -> None:
    release = threading.Event()
    recorder = RecordingScorer()

    def gated(pairs: list[Pair]) -> np.ndarray:
        release.wait(timeout=30)
        return recorder(pairs)

    before = _queue_pairs()
    batcher = MicroBatcher(gated, max_pairs=64, max_wait_s=0.0)
    batcher.start()
    try:
        first = asyncio.create_task(batcher.score([("q0", "running")]))  # holds the model
        await asyncio.sleep(0.05)
        doomed = asyncio.create_task(batcher.score([("q1", "cancelled while queued")]))
        survivor = asyncio.create_task(batcher.score([("q2", "survives")]))
        await asyncio.sleep(0.01)
        doomed.cancel()
        release.set()
        assert (await first).tolist() == _text_scores([("q0", "running")]).tolist()
        assert (await survivor).tolist() == _text_scores([("q2", "survives")]).tolist()
        with pytest.raises(asyncio.CancelledError):
            await doomed
    finally:
        await batcher.aclose()
    scored = [pair for call in recorder.calls for pair in call]
    assert ("q1", "cancelled while queued") not in scored
    assert _queue_pairs() == before


async def test_a_caller_cancelled_while_its_batch_runs_leaves_the_rest_intact() -> None:
    release = threading.Event()

    def gated(pairs: list[Pair]) -> np.ndarray:
        release.wait(timeout=30)
        return _text_scores(pairs)

    before = _queue_pairs()
    batcher = MicroBatcher(gated, max_pairs=64, max_wait_s=0.05)
    batcher.start()
    try:
        a_pairs, b_pairs = [("qa", "alpha"), ("qa", "beta")], [("qb", "gamma")]
        a = asyncio.create_task(batcher.score(a_pairs))
        b = asyncio.create_task(batcher.score(b_pairs))
        await asyncio.sleep(0.1)  # both inside the running batch by now
        a.cancel()
        release.set()
        np.testing.assert_array_equal(await b, _text_scores(b_pairs))
        with pytest.raises(asyncio.CancelledError):
            await a
    finally:
        await batcher.aclose()
    assert _queue_pairs() == before


async def test_aclose_fails_pending_jobs() -> None:
    release = threading.Event()

    def gated(pairs: list[Pair]) -> np.ndarray:
        release.wait(timeout=30)
        return _text_scores(pairs)

    before = _queue_pairs()
    batcher = MicroBatcher(gated, max_pairs=2, max_wait_s=0.0)
    batcher.start()
    running = asyncio.create_task(batcher.score([("q", "in the model"), ("q", "fills the batch")]))
    await asyncio.sleep(0.05)
    queued = [asyncio.create_task(batcher.score([("q", f"waiting {i}")])) for i in range(3)]
    await asyncio.sleep(0.01)
    assert _queue_pairs() == before + 5
    await batcher.aclose()
    release.set()
    for task in [running, *queued]:
        with pytest.raises(RuntimeError, match="shutting down"):
            await asyncio.wait_for(task, 5)
    assert _queue_pairs() == before


async def test_aclose_fails_a_job_waiting_for_company() -> None:
    """A job taken off the queue while the batcher waits for more must not be lost on shutdown."""
    batcher = MicroBatcher(_text_scores, max_pairs=64, max_wait_s=30.0)
    batcher.start()
    before = _queue_pairs()
    lonely = asyncio.create_task(batcher.score([("q", "alone")]))
    await asyncio.sleep(0.05)
    await batcher.aclose()
    with pytest.raises(RuntimeError, match="shutting down"):
        await asyncio.wait_for(lonely, 5)
    assert _queue_pairs() == before


async def test_queue_gauge_counts_waiting_pairs_and_returns_to_its_prior_value() -> None:
    release = threading.Event()

    def gated(pairs: list[Pair]) -> np.ndarray:
        release.wait(timeout=30)
        return _text_scores(pairs)

    before = _queue_pairs()
    batcher = MicroBatcher(gated, max_pairs=64, max_wait_s=0.0)
    batcher.start()
    try:
        tasks = [asyncio.create_task(batcher.score(job)) for job in _jobs(3)]  # 1 + 2 + 3 pairs
        await asyncio.sleep(0.05)
        assert _queue_pairs() == before + 6
        release.set()
        await asyncio.gather(*tasks)
    finally:
        await batcher.aclose()
    assert _queue_pairs() == before
