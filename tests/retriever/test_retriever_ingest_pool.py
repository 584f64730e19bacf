"""The ingest pool through the retriever's HTTP app (real model, real index): a full ingest queue is
refused at once with 503 and Retry-After, a queued request waits its turn, and the default process
isolation runs ingestion's CPU work in a worker process that gives the same chunks and vectors as
the retriever's own threads and is started again when it dies (issue 29)."""

from __future__ import annotations

import asyncio
import functools
import os
import signal
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_retriever.app import create_app
from rag_retriever.ingest_pool import IngestAdmission, IngestBusy
from rag_retriever.settings import RetrieverSettings

TEXT = "The pump in hall seven needs new bearings every twelve months, and its seals every six months."


def identity_header() -> dict[str, str]:
    identity = Identity(tenant="acme", user="ann", groups=[], scopes=["chat", "ingest"])
    return {IDENTITY_HEADER: encode_identity(identity)}


def wait_until(condition, what: str, timeout_s: float = 60.0) -> None:
    """Poll ``condition`` (a state of the app, not a duration): fails only if it never holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.01)


class GatedEmbedder:
    """The real embedder, whose document embedding waits until the test opens the gate: holds an
    ingest request inside its turn for as long as the test needs."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self.gate = threading.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        assert self.gate.wait(120), "the test never opened the gate"
        return self._embedder.encode_documents(texts)

    def encode_documents_pooled(self, texts: list[str], pools: list[Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        assert self.gate.wait(120), "the test never opened the gate"
        return self._embedder.encode_documents_pooled(texts, pools)


@pytest.fixture
def gated(embedder) -> GatedEmbedder:
    return GatedEmbedder(embedder)


def gated_client(tmp_path, gated: GatedEmbedder, queue: int) -> TestClient:
    settings = RetrieverSettings(index_dir=str(tmp_path / "index"), ingest_workers=1, ingest_queue=queue)
    return TestClient(create_app(settings, embedder=gated), headers=identity_header())


def post(client: TestClient, doc_id: str):
    return client.post("/v1/documents", json={"documents": [{"id": doc_id, "text": f"{TEXT} ({doc_id})"}]})


def test_a_full_queue_refuses_at_once_with_retry_after(tmp_path, gated):
    with gated_client(tmp_path, gated, queue=0) as client, ThreadPoolExecutor(2) as threads:
        admission = client.app.state.runtime.ingest_pool.admission
        first = threads.submit(post, client, "first")
        wait_until(lambda: admission.running == 1, "the first ingest holds the only worker")

        refused = post(client, "second")  # returns while the first is still held at the gate
        assert not first.done()
        assert refused.status_code == 503, refused.text
        assert int(refused.headers["retry-after"]) >= 1
        body = refused.json()
        assert body["stage"] == "ingest" and "RETRIEVER_INGEST_QUEUE=0" in body["error"]
        # An upload takes a turn too.
        upload = client.post("/v1/documents/upload", files=[("files", ("a.txt", TEXT.encode(), "text/plain"))])
        assert upload.status_code == 503, upload.text

        gated.gate.set()
        assert first.result(timeout=120).status_code == 200
        assert post(client, "third").status_code == 200  # the turn was given back
        listed = {document["doc_id"] for document in client.get("/v1/documents").json()["documents"]}
        assert listed == {"first", "third"}  # nothing of the refused requests


def test_a_queued_request_waits_for_its_turn_and_one_more_is_refused(tmp_path, gated):
    with gated_client(tmp_path, gated, queue=1) as client, ThreadPoolExecutor(2) as threads:
        admission = client.app.state.runtime.ingest_pool.admission
        first = threads.submit(post, client, "first")
        wait_until(lambda: admission.running == 1, "the first ingest holds the only worker")
        second = threads.submit(post, client, "second")
        wait_until(lambda: admission.waiting == 1, "the second ingest waits in the queue")

        third = post(client, "third")
        assert third.status_code == 503, third.text
        assert not first.done() and not second.done()

        gated.gate.set()
        assert first.result(timeout=120).status_code == 200
        assert second.result(timeout=120).status_code == 200
        assert admission.running == 0 and admission.waiting == 0


async def test_admission_counts_and_the_expected_wait():
    admission = IngestAdmission(workers=1, max_queue=1, prior_request_s=40.0)
    assert admission.expected_wait_s() == 0.0
    async with admission.turn():
        assert admission.expected_wait_s() == 40.0  # one request ahead
        held = admission.turn()
        entered = asyncio.ensure_future(held.__aenter__())
        async with asyncio.timeout(10):
            while admission.waiting != 1:
                await asyncio.sleep(0.001)
        with pytest.raises(IngestBusy) as refused:
            async with admission.turn():
                pass
        assert refused.value.retry_after_s == 80.0 and refused.value.kind == "overloaded"
    await entered
    await held.__aexit__(None, None, None)
    assert admission.running == 0 and admission.waiting == 0


# ------------------------------------------------------------------------------- process isolation


@pytest.fixture(scope="module")
def process_client(tmp_path_factory) -> Iterator[TestClient]:
    """The retriever as the service runs it: its own ONNX embedder, ingestion in a worker process."""
    settings = RetrieverSettings(index_dir=str(tmp_path_factory.mktemp("process") / "index"))
    assert settings.ingest_isolation == "process"
    with TestClient(create_app(settings), headers=identity_header()) as client:
        yield client


def test_process_workers_ingest_what_threads_ingest(process_client, tmp_path):
    pool = process_client.app.state.runtime.ingest_pool
    assert pool.isolation == "process"
    pids = process_client.portal.call(pool.work.worker_pids)
    assert pids and os.getpid() not in pids

    text = " ".join([TEXT] * 40)
    documents = {"documents": [{"id": "manual", "text": text, "title": "Pumps"}]}
    response = process_client.post("/v1/documents", json=documents)
    assert response.status_code == 200, response.text
    upload = process_client.post(
        "/v1/documents/upload", files=[("files", ("seals.md", b"# Seals\n\nReplace the seals every six months.", "text/markdown"))]
    )
    assert upload.status_code == 200 and upload.json()["doc_ids"] == ["seals.md"], upload.text
    hits = process_client.post("/v1/search", json={"query": "pump bearings in hall seven", "top_k": 1}).json()
    assert hits["passages"][0]["doc_id"] == "manual"

    # The same document ingested in threads by a retriever built from the same settings: same chunks,
    # same vectors, bit for bit (the worker runs the same model the same way).
    settings = RetrieverSettings(index_dir=str(tmp_path / "threads"), ingest_isolation="thread")
    with TestClient(create_app(settings), headers=identity_header()) as threads:
        assert threads.app.state.runtime.ingest_pool.isolation == "thread"
        assert threads.post("/v1/documents", json=documents).status_code == 200
        in_threads = threads.portal.call(
            functools.partial(threads.app.state.runtime.backend.document_vectors, "manual", tenant="acme")
        )
    in_process = process_client.portal.call(
        functools.partial(process_client.app.state.runtime.backend.document_vectors, "manual", tenant="acme")
    )
    assert in_process.keys() == in_threads.keys() and len(in_process) > 1
    for chunk_id, vector in in_process.items():
        assert np.array_equal(vector, in_threads[chunk_id])


def test_a_dead_worker_fails_its_request_with_503_and_is_started_again(process_client):
    work = process_client.app.state.runtime.ingest_pool.work
    (pid,) = process_client.portal.call(work.worker_pids)
    os.kill(pid, signal.SIGKILL)
    failed = process_client.post("/v1/documents", json={"documents": [{"id": "after-kill", "text": TEXT}]})
    assert failed.status_code == 503, failed.text
    assert failed.json()["stage"] == "ingest worker"
    again = process_client.post("/v1/documents", json={"documents": [{"id": "after-kill", "text": TEXT}]})
    assert again.status_code == 200, again.text
    (new_pid,) = process_client.portal.call(work.worker_pids)
    assert new_pid != pid


RETRIEVER_THAT_WAITS = """
import asyncio, sys
from rag_retriever.runtime import open_runtime
from rag_retriever.settings import RetrieverSettings

async def main():
    async with open_runtime(RetrieverSettings(index_dir=sys.argv[1])) as runtime:
        print(*await runtime.ingest_pool.work.worker_pids(), flush=True)
        await asyncio.sleep(3600)

asyncio.run(main())
"""


def test_the_worker_ends_when_the_retriever_is_killed(tmp_path):
    """Nobody shuts the pool down when the retriever is killed: its worker (a model loaded, ~1 GiB at
    its peak) must not live on beside the retriever started in its place."""
    import subprocess
    import sys

    retriever = subprocess.Popen(
        [sys.executable, "-c", RETRIEVER_THAT_WAITS, str(tmp_path / "index")], stdout=subprocess.PIPE, text=True
    )
    try:
        (worker,) = [int(pid) for pid in retriever.stdout.readline().split()]
        assert pid_alive(worker)
        retriever.send_signal(signal.SIGKILL)
        retriever.wait(timeout=30)
        wait_until(lambda: not pid_alive(worker), "the orphaned worker exits", timeout_s=60)
    finally:
        if retriever.poll() is None:
            retriever.kill()


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by its new parent) counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
