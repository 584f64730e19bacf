"""Ingestion chaos: kill -9 the retriever at random points of an ingest, run the ingest again, and
compare the index with one built without kills (issue 14).

Three passes, each through a real retriever process (``python -m rag_retriever``, the embedded
backend, the real MiniLM embedder) and its HTTP API (``POST /v1/documents`` in requests of
``--batch`` documents, in a fixed order):

1. *clean*: the corpus into an empty index, no kills. Its requests' durations set the kill schedule.
2. *chaos*: the same ingest into another empty index while ``--kills`` SIGKILLs land inside as many
   distinct requests drawn at random, each at a uniform moment of the time that request took in
   the clean pass (so every kill interrupts one: chunking, embedding, or the write). The client behaves like an ingest
   job without retries: a request that gets no answer is counted failed and the job goes on with the
   next one once the retriever is back (``ManagedProcess.respawn``, as ``ragctl up`` restarts it).
3. *re-run*: the whole ingest again over the chaos index, no kills. Documents already whole are
   skipped (unchanged); the others are written.
4. *control* (unless ``--no-control``): a clean build with the requests in another order, compared
   with the clean build the same way: how far two kill-free builds' approximate (HNSW) dense results
   differ by insertion order alone, the yardstick for the chaos build's differences.

Then both retrievers are stopped and their index directories opened in this process
(``EmbeddedIndex``). Goals: the chaos index opens; its stored chunks and vector graph agree
(``EmbeddedIndex.consistency``); the same chunk count and the same (document, chunk id) set as the
clean build; 0 duplicate chunk ids; for each of ``--queries`` queries (the dataset's, or generated),
the top-10 of BM25, dense and hybrid search identical to the clean build's; the stored vectors
bit-identical and the exact (brute-force) dense top-10 identical, which separate a content difference
from the ANN graph's insertion-order dependence (dense recall@10 against exact search, per build). Also counted: how many
restarts repaired the vector graph (a kill between tantivy's commit and the graph's save, which
the retriever's log records as "re-adding N vectors").

Corpus: the first ``--docs`` Vaswani abstracts (``$RAG_DATASETS_DIR/vaswani``), or ``--synthetic``
documents generated from a seed (what ``tests/retriever/test_retriever_ingest_kill.py`` runs, small).
Prints a table, writes JSON (``--out``), exits 1 if a goal is missed.

    .venv/bin/python bench/ingest_chaos.py [--docs 5000] [--kills 20] [--batch 50] [--seed 14]
        [--synthetic] [--out bench-results/ingest_chaos.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import secrets
import signal
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_common.internal_auth import SERVICE_TOKEN_HEADER
from ragctl.stack import ManagedProcess, free_port, start_service

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import load_averages, result_path, write_result  # noqa: E402

MODES = ("bm25", "dense", "hybrid")
TOP_K = 10
REQUEST_TIMEOUT_S = 600.0
GRAPH_REPAIR = re.compile(r"re-adding (\d+) vectors missing from the graph")
WORDS = (
    "glacier moraine iceberg fjord tundra permafrost delta estuary lagoon atoll reef basalt granite "
    "magma quartz feldspar erosion sediment aquifer monsoon cyclone drought savanna steppe canyon mesa "
    "dune oasis plateau volcano geyser crater tectonic fault rift trench ridge plume hotspot caldera"
).split()


@dataclass
class Pass:
    name: str
    requests: int = 0
    failed_requests: int = 0
    documents_written: int = 0
    documents_skipped: int = 0
    chunks_written: int = 0
    kills: int = 0
    restart_s: list[float] = field(default_factory=list)
    seconds: float = 0.0
    #: Each request's duration (the clean pass's set the kill schedule).
    request_s: list[float] = field(default_factory=list)


class Retriever:
    """One retriever process over ``index_dir``; ``kill`` is SIGKILL, ``ensure_up`` restarts it."""

    def __init__(self, index_dir: Path, log_dir: Path) -> None:
        token = secrets.token_urlsafe(24)
        env = {
            "RETRIEVER_BACKEND": "embedded",
            "RETRIEVER_INDEX_DIR": str(index_dir),
            "RAG_SERVICE_TOKEN": token,
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "TOKENIZERS_PARALLELISM": "false",
        }
        identity = encode_identity(Identity(tenant="default", user="ingest-chaos", scopes=["ingest"]))
        self.headers = {SERVICE_TOKEN_HEADER: token, IDENTITY_HEADER: identity}
        self.proc: ManagedProcess = start_service("retriever", free_port(), log_dir, env, ready_timeout_s=300)
        self._lock = threading.Lock()

    @property
    def url(self) -> str:
        return self.proc.url

    def kill(self) -> bool:
        with self._lock:
            if not self.proc.alive():
                return False
            os.kill(self.proc.process.pid, signal.SIGKILL)
            self.proc.process.wait(timeout=30)
            return True

    def ensure_up(self) -> float | None:
        """Restart the process if it is dead; the seconds until it was ready again, or None."""
        with self._lock:
            if self.proc.alive():
                return None
            started = time.monotonic()
            assert self.proc.respawn is not None
            self.proc = self.proc.respawn()
            return time.monotonic() - started

    def stop(self) -> None:
        self.proc.stop(timeout_s=60)

    def graph_repairs(self) -> int:
        return sum(1 for _ in GRAPH_REPAIR.finditer(self.proc.log_path.read_text(errors="replace")))


def synthetic_corpus(count: int, seed: int) -> tuple[list[dict[str, Any]], list[str]]:
    """``count`` documents of 30-400 words (several chunks for the long ones) and 20 queries."""
    rng = random.Random(seed)
    documents = [
        {"id": f"syn-{i:05d}", "title": f"Survey {i}", "text": " ".join(rng.choices(WORDS, k=rng.randint(30, 400)))}
        for i in range(count)
    ]
    queries = [" ".join(rng.sample(WORDS, 3)) for _ in range(20)]
    return documents, queries


def vaswani_corpus(count: int) -> tuple[list[dict[str, Any]], list[str]]:
    from rag_eval.datasets import load_dataset

    dataset = load_dataset("vaswani")
    documents = [{"id": doc.id, "title": doc.title, "text": doc.text} for doc in list(dataset.corpus.values())[:count]]
    return documents, [query.text for query in dataset.queries]


def ingest(
    retriever: Retriever,
    documents: list[dict[str, Any]],
    batch: int,
    name: str,
    kill_at: dict[int, float] | None = None,
) -> Pass:
    """POST the documents in order, ``batch`` per request; with ``kill_at`` (request number -> seconds
    into that request), SIGKILL the retriever at each of those moments from another thread."""
    result = Pass(name)
    pending = dict(kill_at or {})
    current: dict[str, Any] = {"request": -1, "since": 0.0}
    done = threading.Event()

    def killer() -> None:
        while pending and not done.is_set():
            request = current["request"]
            if request in pending and time.monotonic() - current["since"] >= pending[request]:
                if retriever.kill():
                    result.kills += 1
                pending.pop(request)
            time.sleep(0.005)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    started = time.monotonic()
    with httpx.Client(timeout=REQUEST_TIMEOUT_S) as http:
        for number, start in enumerate(range(0, len(documents), batch)):
            if (restart := retriever.ensure_up()) is not None:
                result.restart_s.append(round(restart, 1))
            body = {"documents": [{**doc, "source": "ingest-chaos"} for doc in documents[start : start + batch]]}
            current["since"] = time.monotonic()
            current["request"] = number
            try:
                response = http.post(f"{retriever.url}/v1/documents", json=body, headers=retriever.headers)
                answered = response.status_code == 200
            except httpx.HTTPError:
                answered = False
            finally:
                current["request"] = -1
                result.request_s.append(round(time.monotonic() - current["since"], 3))
            result.requests += 1
            if not answered:
                result.failed_requests += 1
                continue
            summary = response.json()
            result.documents_written += summary["documents"]
            result.documents_skipped += summary["skipped"]
            result.chunks_written += summary["chunks"]
            if summary["failed"]:
                raise RuntimeError(f"{name}: documents refused: {summary['failed'][:3]}")
    done.set()
    thread.join()
    if (restart := retriever.ensure_up()) is not None:
        result.restart_s.append(round(restart, 1))
    result.seconds = round(time.monotonic() - started, 1)
    return result


def kill_schedule(request_s: list[float], kills: int, seed: int) -> dict[int, float]:
    """``kills`` distinct requests, each killed at a uniform moment of the time the clean pass took
    for it (less 5 %, so that the kill lands before the answer)."""
    rng = random.Random(seed)
    chosen = sorted(rng.sample(range(len(request_s)), min(kills, len(request_s))))
    return {number: round(rng.uniform(0.0, 0.95 * request_s[number]), 3) for number in chosen}


async def all_vectors(backend: Any) -> dict[str, np.ndarray]:
    """Every stored chunk's vector (as upserted), by chunk id."""
    vectors: dict[str, np.ndarray] = {}
    for info in await backend.list_documents():
        vectors.update(await backend.document_vectors(info.doc_id))
    return vectors


def exact_top(stored: dict[str, np.ndarray], queries: np.ndarray) -> list[list[str]]:
    """Brute-force cosine top-10 chunk ids per query: what an ANN graph approximates."""
    ids = sorted(stored)
    matrix = np.stack([stored[chunk_id] for chunk_id in ids])
    matrix = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
    scores = queries @ matrix.T
    return [[ids[i] for i in np.argsort(-row, kind="stable")[:TOP_K]] for row in scores]


async def compare_indexes(clean_dir: Path, chaos_dir: Path, queries: list[str]) -> dict[str, Any]:
    """Open both (stopped) indexes here, as the retriever opens them; what the goals are checked on."""
    from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
    from rag_retriever.backends.embedded import EmbeddedBackend
    from rag_retriever.backends.base import FusionSettings, HnswParams
    from rag_retriever.settings import RetrieverSettings

    settings = RetrieverSettings()
    embedder = SentenceTransformerEmbedder(settings.embedding_model)
    embedder.warm_up()
    vectors = embedder.encode_queries(queries)
    fusion = FusionSettings.of(settings)
    opened = {
        name: EmbeddedBackend(path, embedder.dim, HnswParams.of(settings), model_id=embedder.model_id)
        for name, path in (("clean", clean_dir), ("chaos", chaos_dir))
    }
    try:
        report: dict[str, Any] = {}
        chunk_sets = {}
        for name, backend in opened.items():
            report[f"{name}_consistency"] = asdict(backend.index.consistency())
            chunk_sets[name] = {
                (info.doc_id, chunk_id)
                for info in await backend.list_documents()
                for chunk_id in await backend.document_chunk_ids(info.doc_id)
            }
        report["same_chunks"] = chunk_sets["clean"] == chunk_sets["chaos"]
        stored = {name: await all_vectors(backend) for name, backend in opened.items()}
        shared = sorted(stored["clean"].keys() & stored["chaos"].keys())
        report["max_vector_difference"] = float(
            max((np.abs(stored["clean"][key] - stored["chaos"][key]).max() for key in shared), default=0.0)
        )
        exact = {name: exact_top(stored[name], vectors) for name in opened}
        report["identical_exact_dense_top10"] = sum(a == b for a, b in zip(exact["clean"], exact["chaos"], strict=True))
        report["chunks_only_in_clean"] = len(chunk_sets["clean"] - chunk_sets["chaos"])
        report["chunks_only_in_chaos"] = len(chunk_sets["chaos"] - chunk_sets["clean"])
        identical = dict.fromkeys(MODES, 0)
        differing: list[dict[str, Any]] = []
        recall = dict.fromkeys(opened, 0.0)
        for position, (query, vector) in enumerate(zip(queries, vectors, strict=True)):
            hits = {
                name: {
                    "bm25": await backend.search_bm25(query, TOP_K),
                    "dense": await backend.search_dense(vector, TOP_K),
                    "hybrid": await backend.search_hybrid(query, vector, TOP_K, None, fusion),
                }
                for name, backend in opened.items()
            }
            for name in opened:
                found = {hit.chunk.chunk_id for hit in hits[name]["dense"]}
                recall[name] += len(found & set(exact[name][position])) / TOP_K / len(queries)
            for mode in MODES:
                clean = [hit.chunk.chunk_id for hit in hits["clean"][mode]]
                chaos = [hit.chunk.chunk_id for hit in hits["chaos"][mode]]
                if clean == chaos:
                    identical[mode] += 1
                elif len(differing) < 20:
                    differing.append({"query": query, "mode": mode, "clean": clean, "chaos": chaos})
        report["queries"] = len(queries)
        report["identical_top10"] = identical
        report["differing_examples"] = differing
        report["dense_recall_at_10_vs_exact"] = {name: round(value, 4) for name, value in recall.items()}
        return report
    finally:
        for backend in opened.values():
            await backend.close()


def run(
    documents: list[dict[str, Any]], queries: list[str], *, kills: int, batch: int, seed: int, workdir: Path,
    control: bool = True,
) -> dict[str, Any]:
    load_before = load_averages()
    clean_retriever = Retriever(workdir / "clean-index", workdir / "logs-clean")
    try:
        clean = ingest(clean_retriever, documents, batch, "clean")
    finally:
        clean_retriever.stop()
    schedule = kill_schedule(clean.request_s, kills, seed)
    chaos_retriever = Retriever(workdir / "chaos-index", workdir / "logs-chaos")
    try:
        chaos = ingest(chaos_retriever, documents, batch, "chaos", kill_at=schedule)
        rerun = ingest(chaos_retriever, documents, batch, "re-run")
        graph_repairs = chaos_retriever.graph_repairs()
    finally:
        chaos_retriever.stop()
    comparison = asyncio.run(compare_indexes(workdir / "clean-index", workdir / "chaos-index", queries))
    control_comparison = None
    if control:
        # The same documents without kills, the requests in another order: how much two clean builds'
        # ANN graphs differ by insertion order alone (the chaos build re-inserts lost requests last).
        batches = [documents[start : start + batch] for start in range(0, len(documents), batch)]
        random.Random(seed + 1).shuffle(batches)
        control_retriever = Retriever(workdir / "control-index", workdir / "logs-control")
        try:
            ingest(control_retriever, [doc for group in batches for doc in group], batch, "control")
        finally:
            control_retriever.stop()
        control_comparison = asyncio.run(compare_indexes(workdir / "clean-index", workdir / "control-index", queries))
    chaos_consistency = comparison["chaos_consistency"]
    goals = {
        "every_scheduled_kill_landed": chaos.kills == kills,
        "chaos_index_consistent": not (
            chaos_consistency["missing_from_graph"] or chaos_consistency["stale_in_graph"] or chaos_consistency["duplicate_chunk_ids"]
        ),
        "same_chunk_count": chaos_consistency["chunks"] == comparison["clean_consistency"]["chunks"],
        "same_chunks": comparison["same_chunks"],
        "no_duplicate_chunks": chaos_consistency["duplicate_chunk_ids"] == 0,
        "rerun_failed_nothing": rerun.failed_requests == 0,
        "identical_vectors": comparison["max_vector_difference"] == 0.0,
        "identical_exact_dense_top10": comparison["identical_exact_dense_top10"] == len(queries),
        **{f"identical_{mode}_top10": comparison["identical_top10"][mode] == len(queries) for mode in MODES},
    }
    return {
        "settings": {"documents": len(documents), "kills": kills, "batch": batch, "seed": seed, "kill_schedule": {f"request {n}": f"{t} s" for n, t in schedule.items()}},
        "passes": [asdict(p) for p in (clean, chaos, rerun)],
        "graph_repairs_on_restart": graph_repairs,
        "comparison": comparison,
        "control_comparison": control_comparison,
        "goals": goals,
        "machine": {"cores": os.cpu_count(), "load_before": load_before, "load_after": load_averages()},
    }


def print_report(report: dict[str, Any]) -> None:
    print(f"{'pass':8} {'requests':>8} {'failed':>6} {'kills':>5} {'written':>7} {'skipped':>7} {'chunks':>7} {'seconds':>7}  restarts (s)")
    for p in report["passes"]:
        print(
            f"{p['name']:8} {p['requests']:8d} {p['failed_requests']:6d} {p['kills']:5d} {p['documents_written']:7d} "
            f"{p['documents_skipped']:7d} {p['chunks_written']:7d} {p['seconds']:7.1f}  {p['restart_s']}"
        )
    comparison = report["comparison"]
    print(f"graph repaired on restart: {report['graph_repairs_on_restart']} times")
    print(f"clean index: {comparison['clean_consistency']}")
    print(f"chaos index: {comparison['chaos_consistency']}")
    print(f"identical top-{TOP_K} over {comparison['queries']} queries: {comparison['identical_top10']}, "
          f"exact dense {comparison['identical_exact_dense_top10']}")
    print(f"max |vector difference|: {comparison['max_vector_difference']}; "
          f"dense recall@{TOP_K} against exact search: {comparison['dense_recall_at_10_vs_exact']}")
    if control := report.get("control_comparison"):
        print(
            f"control (a clean build, requests in another order) against the clean build: identical top-{TOP_K} "
            f"{control['identical_top10']}, dense recall@{TOP_K} {control['dense_recall_at_10_vs_exact']}"
        )
    for goal, met in report["goals"].items():
        print(f"  {'ok  ' if met else 'MISS'} {goal}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=5000)
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--batch", type=int, default=50, help="documents per ingest request")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--synthetic", action="store_true", help="generated documents instead of Vaswani")
    parser.add_argument("--out", type=Path, default=result_path("ingest_chaos"))
    parser.add_argument("--no-control", action="store_true", help="skip the reordered clean build")
    parser.add_argument("--keep", type=Path, help="work in this directory and keep it (indexes, logs)")
    args = parser.parse_args()
    if args.synthetic:
        documents, queries = synthetic_corpus(args.docs, args.seed)
    else:
        documents, queries = vaswani_corpus(args.docs)
    with tempfile.TemporaryDirectory(prefix="ingest-chaos-") as tmp:
        workdir = args.keep or Path(tmp)
        report = run(
            documents, queries, kills=args.kills, batch=args.batch, seed=args.seed, workdir=workdir,
            control=not args.no_control,
        )
    report["command"] = " ".join(["bench/ingest_chaos.py", *sys.argv[1:]])
    print_report(report)
    write_result(args.out, report)
    print(f"wrote {args.out}")
    sys.exit(0 if all(report["goals"].values()) else 1)


if __name__ == "__main__":
    main()
