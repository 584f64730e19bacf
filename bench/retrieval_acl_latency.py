"""What access control costs a search: the embedded backend at 100k chunks, with and without ACLs.

One index of ``--size`` synthetic chunks (``rag_eval.synthetic``, as ``retrieval_latency.py``) in
3 tenants; within a tenant 40 % of the chunks are readable by everyone, the rest by one or two of
4 groups; 3 chunks of the whole index (in tenant north) are readable only by ``user:needle``. Then ``--queries`` k=10
searches per mode (dense, bm25, hybrid min-max; backend level, precomputed query vectors) for:

- ``none``: no access filter (what the eval harness runs);
- ``tenant``: one tenant, principals ``*`` only (about 13 % of the index readable);
- ``groups``: one tenant, ``*`` and two groups (about 27 %);
- ``narrow``: ``user:needle`` (3 chunks of the index): also records how many hits came back.

Prints p50/p95 ms per mode and case and writes JSON. Nothing here asserts.

    .venv/bin/python bench/retrieval_acl_latency.py [--size 100000] [--queries 200]
        [--out bench-results/retrieval_acl_latency.json]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval_latency import chunk  # noqa: E402 - the same synthetic chunks as the latency bench

from rag_eval.synthetic import SyntheticCorpus  # noqa: E402
from rag_retriever.backends.base import AccessFilter, FusionSettings, HnswParams  # noqa: E402
from rag_retriever.backends.embedded import EmbeddedBackend  # noqa: E402
from rag_retriever.settings import RetrieverSettings  # noqa: E402
from harness import describe, result_path, write_result  # noqa: E402

TENANTS = ("north", "south", "east")
GROUPS = ("g0", "g1", "g2", "g3")
K = 10
WARMUP = 10


def readers_of(index: int, rng: np.random.Generator) -> list[str]:
    if rng.random() < 0.4:
        return ["*"]
    return [f"group:{g}" for g in rng.choice(GROUPS, size=int(rng.integers(1, 3)), replace=False)]


async def timed(calls: list) -> tuple[list[float], list[int]]:
    for call in calls[:WARMUP]:
        await call()
    samples, counts = [], []
    for call in calls:
        started = time.perf_counter()
        hits = await call()
        samples.append((time.perf_counter() - started) * 1000.0)
        counts.append(len(hits))
    return samples, counts


async def main(args: argparse.Namespace) -> dict[str, Any]:
    corpus = SyntheticCorpus(args.size, dim=384, seed=7)
    vectors = corpus.vectors()
    rng = np.random.default_rng(7)
    needles = set(int(i) for i in rng.choice(args.size, size=3, replace=False))
    with tempfile.TemporaryDirectory() as workdir:
        backend = EmbeddedBackend(Path(workdir) / "index", 384, HnswParams.of(RetrieverSettings()), model_id="synthetic")
        started = time.perf_counter()
        for start in range(0, args.size, 5000):
            stop = min(start + 5000, args.size)
            chunks = [
                dataclasses.replace(
                    chunk(corpus, i), tenant="north" if i in needles else TENANTS[i % 3],
                    readers=["user:needle"] if i in needles else readers_of(i, rng),
                )
                for i in range(start, stop)
            ]
            await backend.upsert(chunks, vectors[start:stop])
        print(f"built {args.size:,} chunks in {time.perf_counter() - started:.0f} s", flush=True)
        targets = rng.choice(args.size, size=args.queries, replace=False)
        query_vectors = [corpus.query_vector(int(i), noise=0.3) for i in targets]
        query_texts = [corpus.query_text(int(i)) for i in targets]
        cases = {
            "none": None,
            "tenant": AccessFilter("north", ("*",)),
            "groups": AccessFilter("north", ("*", "group:g0", "group:g1")),
            "narrow": AccessFilter("north", ("user:needle",)),
        }
        results: dict[str, Any] = {}
        for case, access in cases.items():
            for mode in ("dense", "bm25", "hybrid"):
                calls = {
                    "dense": [lambda v=v: backend.search_dense(v, K, access=access) for v in query_vectors],
                    "bm25": [lambda t=t: backend.search_bm25(t, K, access=access) for t in query_texts],
                    "hybrid": [
                        lambda t=t, v=v: backend.search_hybrid(t, v, K, None, FusionSettings("min_max", 0.5), access=access)
                        for t, v in zip(query_texts, query_vectors, strict=True)
                    ],
                }[mode]
                samples, counts = await timed(calls)
                results[f"{mode}/{case}"] = {
                    **{f"{name}_ms": value for name, value in describe(samples, digits=3).items()},
                    "mean_hits": round(statistics.mean(counts), 2),
                }
        await backend.close()
    for mode in ("dense", "bm25", "hybrid"):
        base = results[f"{mode}/none"]["p50_ms"]
        for case in cases:
            results[f"{mode}/{case}"]["p50_delta_ms"] = round(results[f"{mode}/{case}"]["p50_ms"] - base, 3)
    return {
        "size": args.size, "queries": args.queries, "k": K, "results": results,
        "machine": {"cpus": os.cpu_count(), "load_average": os.getloadavg(), "python": platform.python_version()},
    }


def print_table(report: dict[str, Any]) -> None:
    print(f"\n{'mode/case':<16} {'p50 ms':>8} {'p95 ms':>8} {'Δp50':>8} {'hits':>6}")
    for name, row in report["results"].items():
        print(f"{name:<16} {row['p50_ms']:>8.3f} {row['p95_ms']:>8.3f} {row['p50_delta_ms']:>+8.3f} {row['mean_hits']:>6}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="chunks in the index")
    parser.add_argument("--queries", type=int, default=200, help="timed searches per mode and case")
    parser.add_argument("--out", type=Path, default=result_path("retrieval_acl_latency"))
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments))
    print_table(result)
    write_result(arguments.out, result)
    print(f"wrote {arguments.out}")
