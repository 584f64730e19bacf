"""Ingesting one big document (issue 29): is the time linear in its size, and do searches keep their
latency while it runs?

The document is generated (seeded): random short words of the embedder's own vocabulary (one token
each, about 5 characters with the space), a sentence end every 1,000 words on average and a line
break every 20,000: the issue's "two million short words" (10.5 MB) in the small.

Part 1, scaling: for each ``--sizes`` (MiB of text; default 1, 2, 4 and 8) a fresh child process
opens the retriever's runtime (``rag_retriever.runtime.open_runtime``: its ingest pool, chunker,
embedder and a fresh embedded index, as the service builds them; the ingest worker loaded before the
clock starts) and ingests the one document through its ``Ingestor``. Reported: wall time and time
per MiB, CPU time (the child and its ingest worker, all threads: steadier than wall time on a shared
machine) and CPU time per MiB, chunks, and peak RSS, the child's own and its ingest worker's
(``ru_maxrss`` of itself and, once the worker has exited, of its children). Linear: time per MiB of
the largest size within 20 % of the smallest's (wall and CPU).

Part 2, searches during an ingest: a real retriever (``python -m rag_retriever`` on 127.0.0.1, a
free port, a fresh index) is given a small corpus, then hybrid searches (one at a time, one started
every 0.1 s, each with the gateway's 15 s search timeout) run at idle and while one document of
``--latency-mb`` is ingested through ``POST /v1/documents``; at most ``--max-queries`` per phase, the
idle phase at most ``--idle-s``. Reported: p50, p95 and max per phase, timeouts and errors. Goal:
p95 during the ingest at most twice idle's, no timeout.

The machine's load average is recorded with each measurement (the shared 2-core machine runs other
work too). Prints tables and writes JSON. Nothing here asserts.

    .venv/bin/python bench/ingest_scaling.py [--sizes 1,2,4,8] [--latency-mb 1] [--quick]
        [--isolation process|thread] [--pythonpath DIR ...] [--out bench-results/ingest_scaling.json]

``--quick`` is ``--sizes 0.25,0.5,1,2 --latency-mb 0.5``. ``--pythonpath`` runs the children and the
server on another source tree (e.g. ``git archive`` of an older commit, its ``libs/rag_common`` and
``services/retriever``) to compare.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from rag_common.embedders.models import resolve_model_path
from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_common.internal_auth import SERVICE_TOKEN_HEADER
from harness import describe, result_path, write_result

MIB = 1024 * 1024
MODEL = "all-MiniLM-L6-v2"
GOAL_LINEAR = 0.20
GOAL_P95_RATIO = 2.0
#: The gateway's timeout of a search call (GATEWAY_RETRIEVER_TIMEOUT_S): slower is a 504 there.
SEARCH_TIMEOUT_S = 15.0
QUERY_INTERVAL_S = 0.1
CORPUS_DOCUMENTS = 300


def vocabulary() -> list[str]:
    """Short lower-case words that are one token of the embedder's vocabulary."""
    vocab = json.loads((resolve_model_path(MODEL) / "tokenizer.json").read_text())["model"]["vocab"]
    return sorted(word for word in vocab if word.isascii() and word.isalpha() and word.islower() and 2 <= len(word) <= 6)


def document_text(n_chars: int, seed: int, words: list[str]) -> str:
    """About ``n_chars`` characters of random words, a sentence end every ~1,000 words, a line break every ~20,000."""
    rng = random.Random(seed)
    out: list[str] = []
    size = 0
    while size < n_chars:
        word = rng.choice(words)
        if rng.random() < 1 / 1000:
            word += "."
        separator = "\n" if rng.random() < 1 / 20_000 else " "
        out.append(word + separator)
        size += len(word) + 1
    return "".join(out)[:n_chars].strip()


def corpus(seed: int, words: list[str], size: int) -> list[dict[str, str]]:
    """``size`` small documents of short sentences, for the searches to find something."""
    rng = random.Random(seed)
    documents = []
    for i in range(size):
        sentences = [" ".join(rng.choice(words) for _ in range(rng.randint(8, 16))).capitalize() + "." for _ in range(5)]
        documents.append({"id": f"corpus-{i}", "title": f"Note {i}", "text": " ".join(sentences)})
    return documents


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_seconds(*processes: psutil.Process) -> float:
    """User + system CPU time of ``processes`` (all their threads): less sensitive than wall time to
    the other work of a shared machine."""
    return sum(sum(process.cpu_times()[:2]) for process in processes)


# ------------------------------------------------------------------------------------ part 1 child


async def ingest_once(size_mib: float, seed: int, workdir: Path, isolation: str | None) -> dict[str, Any]:
    from rag_common.schemas import DocumentIn
    from rag_retriever.runtime import open_runtime
    from rag_retriever.settings import RetrieverSettings

    text = document_text(int(size_mib * MIB), seed, vocabulary())
    overrides = {"ingest_isolation": isolation} if isolation else {}
    settings = RetrieverSettings(index_dir=str(workdir / "index"), **overrides)
    async with open_runtime(settings) as runtime:
        pool = getattr(runtime, "ingest_pool", None)  # absent in a tree from before it
        worker_pids = getattr(getattr(pool, "work", None), "worker_pids", None)
        # The worker has loaded its model before the clock starts: not part of the measured time.
        workers = [psutil.Process(pid) for pid in await worker_pids()] if worker_pids is not None else []
        load_before = load()
        cpu_before = cpu_seconds(psutil.Process(), *workers)
        started = time.perf_counter()
        response = await runtime.ingestor.ingest([DocumentIn(id="big", text=text, title="Generated document")])
        seconds = time.perf_counter() - started
        cpu = cpu_seconds(psutil.Process(), *workers) - cpu_before
        load_after = load()
        isolation_used = pool.isolation if pool is not None else "none (default executor)"
    # The runtime is closed: the ingest worker has exited and been waited for.
    return {
        "size_mib": size_mib,
        "characters": len(text),
        "words": text.count(" ") + text.count("\n") + 1,
        "chunks": response.chunks,
        "seconds": round(seconds, 2),
        "seconds_per_mib": round(seconds / size_mib, 2),
        "chunks_per_s": round(response.chunks / seconds, 1),
        "cpu_s": round(cpu, 1),
        "cpu_s_per_mib": round(cpu / size_mib, 1),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "worker_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "isolation": isolation_used,
        "load_before": load_before,
        "load_after": load_after,
    }


def run_child(size_mib: float, seed: int, isolation: str | None, env: dict[str, str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        argv = [sys.executable, __file__, "--child", str(size_mib), "--seed", str(seed), "--workdir", tmp]
        if isolation:
            argv += ["--isolation", isolation]
        result = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=7200)
    if result.returncode != 0:
        raise SystemExit(f"child for {size_mib} MiB failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# ------------------------------------------------------------------------------------ part 2 server


class Retriever:
    """``python -m rag_retriever`` on a free port with a fresh index (``ragctl.stack.start_service``:
    waited for until ready, its log in ``workdir/retriever.log``), until ``stop``."""

    def __init__(self, workdir: Path, env: dict[str, str], isolation: str | None) -> None:
        from ragctl.stack import free_port, start_service

        token = secrets.token_hex(16)
        identity = Identity(tenant="bench", user="bench", scopes=["chat", "ingest"])
        self.headers = {IDENTITY_HEADER: encode_identity(identity), SERVICE_TOKEN_HEADER: token}
        server_env = {
            **env, "RETRIEVER_LOG_LEVEL": "warning", "RETRIEVER_INDEX_DIR": str(workdir / "index"), "RAG_SERVICE_TOKEN": token,
        }
        if isolation:
            server_env["RETRIEVER_INGEST_ISOLATION"] = isolation
        self.process = start_service("retriever", free_port(), workdir, server_env, ready_timeout_s=180)

    def client(self, timeout_s: float) -> httpx.Client:
        return httpx.Client(base_url=self.process.url, headers=self.headers, timeout=timeout_s)

    def stop(self) -> None:
        self.process.stop(timeout_s=30)


def search_phase(
    client: httpx.Client, queries: list[str], *, max_queries: int, max_seconds: float, busy: threading.Event | None
) -> dict[str, Any]:
    """Searches one at a time, one started every QUERY_INTERVAL_S, while ``busy`` is set (or for
    ``max_seconds``), at most ``max_queries``."""
    latencies: list[float] = []
    timeouts = errors = 0
    started = time.monotonic()
    for n in range(max_queries):
        if busy is not None and not busy.is_set():
            break
        if time.monotonic() - started > max_seconds:
            break
        begun = time.perf_counter()
        try:
            response = client.post("/v1/search", json={"query": queries[n % len(queries)], "top_k": 10})
            if response.status_code == 200:
                latencies.append((time.perf_counter() - begun) * 1000)
            else:
                errors += 1
        except httpx.TimeoutException:
            timeouts += 1
        time.sleep(max(0.0, QUERY_INTERVAL_S - (time.perf_counter() - begun)))
    return summary(latencies) | {"timeouts": timeouts, "errors": errors, "load": load()}


def summary(latencies: list[float]) -> dict[str, Any]:
    stats = describe(latencies, ("n", "p50", "p95", "max"), digits=1)
    return {"queries": stats["n"], "p50_ms": stats["p50"], "p95_ms": stats["p95"], "max_ms": stats["max"]}


def latency_during_ingest(args: argparse.Namespace, env: dict[str, str], words: list[str]) -> dict[str, Any]:
    rng = random.Random(args.seed)
    queries = [" ".join(rng.choice(words) for _ in range(3)) for _ in range(100)]
    big = document_text(int(args.latency_mb * MIB), args.seed + 1, words)
    with tempfile.TemporaryDirectory() as tmp:
        retriever = Retriever(Path(tmp), env, args.isolation)
        try:
            with retriever.client(600) as client:
                loaded = client.post("/v1/documents", json={"documents": corpus(args.seed, words, args.corpus_docs)})
                if loaded.status_code != 200:
                    raise SystemExit(f"corpus ingest failed: {loaded.status_code} {loaded.text[:500]}")
            with retriever.client(SEARCH_TIMEOUT_S) as client:
                search_phase(client, queries, max_queries=10, max_seconds=10, busy=None)  # warm-up
                idle = search_phase(client, queries, max_queries=args.max_queries, max_seconds=args.idle_s, busy=None)
                busy, outcome = threading.Event(), {}

                def ingest() -> None:
                    started = time.perf_counter()
                    try:
                        with retriever.client(3600) as ingest_client:
                            response = ingest_client.post(
                                "/v1/documents", json={"documents": [{"id": "big", "text": big, "title": "Generated"}]}
                            )
                        outcome["status"] = response.status_code
                        outcome["chunks"] = response.json().get("chunks") if response.status_code == 200 else None
                    finally:
                        outcome["seconds"] = round(time.perf_counter() - started, 1)
                        busy.clear()

                busy.set()
                thread = threading.Thread(target=ingest)
                thread.start()
                during = search_phase(client, queries, max_queries=args.max_queries, max_seconds=7200, busy=busy)
                thread.join()
        finally:
            retriever.stop()
    ratio = during["p95_ms"] / idle["p95_ms"] if during["p95_ms"] and idle["p95_ms"] else None
    return {
        "document_mib": args.latency_mb, "ingest": outcome, "idle": idle, "during_ingest": during,
        "p95_ratio": round(ratio, 2) if ratio else None,
        "meets_goal": bool(ratio is not None and ratio <= GOAL_P95_RATIO and during["timeouts"] == 0),
    }


# ------------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,2,4,8", help="MiB of text per document, comma-separated")
    parser.add_argument("--latency-mb", type=float, default=1.0, help="MiB of the document ingested during searches")
    parser.add_argument("--quick", action="store_true", help="--sizes 0.25,0.5,1,2 --latency-mb 0.5")
    parser.add_argument("--max-queries", type=int, default=3000, help="most searches per phase")
    parser.add_argument("--idle-s", type=float, default=30.0, help="longest idle search phase, seconds")
    parser.add_argument("--corpus-docs", type=int, default=CORPUS_DOCUMENTS, help="small documents indexed before the searches")
    parser.add_argument("--isolation", choices=["process", "thread"], default=None, help="RETRIEVER_INGEST_ISOLATION")
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-latency", action="store_true")
    parser.add_argument("--pythonpath", action="append", default=[], help="source directories put first on the path")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--out", type=Path, default=result_path("ingest_scaling"))
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child is not None:
        print(json.dumps(asyncio.run(ingest_once(args.child, args.seed, args.workdir, args.isolation))))
        return
    if args.quick:
        args.sizes, args.latency_mb = "0.25,0.5,1,2", 0.5
    sizes = [float(size) for size in args.sizes.split(",")]
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = os.pathsep.join([*args.pythonpath, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    words = vocabulary()
    began = time.perf_counter()
    result: dict[str, Any] = {
        "sizes_mib": sizes, "isolation": args.isolation or "default", "pythonpath": args.pythonpath,
        "cpus": os.cpu_count(), "load_at_start": load(), "goal_linear_within": GOAL_LINEAR,
        "goal_p95_ratio": GOAL_P95_RATIO,
    }

    if not args.skip_scaling:
        rows = []
        print("| MiB | characters | chunks | wall s | wall s per MiB | CPU s | CPU s per MiB | chunks/s | peak RSS MiB (worker) | load before → after |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
        for size in sizes:
            # One seed for every size: each document is a prefix of the next larger one.
            row = run_child(size, args.seed, args.isolation, env)
            rows.append(row)
            print(
                f"| {size:g} | {row['characters']:,} | {row['chunks']:,} | {row['seconds']:.1f} | "
                f"{row['seconds_per_mib']:.1f} | {row['cpu_s']:.1f} | {row['cpu_s_per_mib']:.1f} | {row['chunks_per_s']:.1f} | "
                f"{row['peak_rss_mib']:.0f} "
                f"({row['worker_peak_rss_mib']:.0f}) | {row['load_before'][0]} → {row['load_after'][0]} |",
                flush=True,
            )
        first, last = rows[0], rows[-1]
        result["scaling"] = rows
        result["linear"] = {}
        for key, name in (("seconds_per_mib", "wall time"), ("cpu_s_per_mib", "CPU time")):
            growth = last[key] / first[key] - 1
            result["linear"][key] = {
                "smallest": first[key], "largest": last[key], "growth": round(growth, 3),
                "within_goal": abs(growth) <= GOAL_LINEAR,
            }
            verdict = "linear" if abs(growth) <= GOAL_LINEAR else "NOT linear"
            print(
                f"{name} per MiB: {first[key]:.1f} s at {first['size_mib']:g} MiB, {last[key]:.1f} s at "
                f"{last['size_mib']:g} MiB ({growth:+.0%}): {verdict} within {GOAL_LINEAR:.0%}"
            )

    if not args.skip_latency:
        latency = latency_during_ingest(args, env, words)
        result["latency"] = latency
        print(f"\nsearches (hybrid, k=10) while a {args.latency_mb:g} MiB document is ingested "
              f"({latency['ingest'].get('chunks')} chunks in {latency['ingest'].get('seconds')} s, HTTP {latency['ingest'].get('status')}):")
        print("| phase | queries | p50 ms | p95 ms | max ms | timeouts | errors | load |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        for phase in ("idle", "during_ingest"):
            row = latency[phase]
            print(f"| {phase.replace('_', ' ')} | {row['queries']} | {row['p50_ms']} | {row['p95_ms']} | {row['max_ms']} | "
                  f"{row['timeouts']} | {row['errors']} | {row['load'][0]} |")
        verdict = "meets" if latency["meets_goal"] else "MISSES"
        print(f"goal: p95 during <= {GOAL_P95_RATIO:g}x idle, no timeout: {latency['p95_ratio']}x, "
              f"{latency['during_ingest']['timeouts']} timeouts ({verdict})")

    result["load_at_end"] = load()
    result["total_s"] = round(time.perf_counter() - began, 1)
    write_result(args.out, result)
    print(f"wrote {args.out} ({result['total_s']:.0f} s)")


if __name__ == "__main__":
    main()
