"""Latency of the post-scoring reranker stages (pure NumPy) on random unit vectors.

For each candidate count n: ``GraphDiffusionReranker.rerank`` (default alpha 0.85, tol 1e-6, full
graph) and ``GeometricMMR(0.5).select`` with k = 10, timed over ``--runs`` calls each (after a few
warm-up calls), fresh random scores/vectors per size (d = 384, like MiniLM). Prints a Markdown
table (p50/p95 in ms) and writes JSON. Nothing here asserts.

    .venv/bin/python bench/reranker_stages.py [--sizes 20,50,100,200] [--runs 200] [--dim 384]
        [--k 10] [--out bench-results/reranker_stages.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "services" / "reranker"))

from rag_reranker.stages.gmmr import GeometricMMR  # noqa: E402
from rag_reranker.settings import RerankerSettings  # noqa: E402
from rag_reranker.stages.graph_diffusion import GraphDiffusionReranker  # noqa: E402
from harness import describe, result_path, write_result  # noqa: E402


def _time_ms(fn, runs: int, warmup: int = 5) -> np.ndarray:
    for _ in range(warmup):
        fn()
    out = np.empty(runs)
    for i in range(runs):
        started = time.perf_counter()
        fn()
        out[i] = (time.perf_counter() - started) * 1000.0
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20,50,100,200")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(result_path("reranker_stages")))
    args = parser.parse_args()

    rng = np.random.default_rng(args.seed)
    diffusion = GraphDiffusionReranker(alpha=RerankerSettings().diffusion_alpha)
    gmmr = GeometricMMR(0.5)
    rows = []
    for n in [int(s) for s in args.sizes.split(",")]:
        emb = _unit(rng.normal(size=(n, args.dim)))
        query = _unit(rng.normal(size=args.dim))
        scores = rng.normal(size=n)
        iterations = diffusion.rerank(scores, emb).iterations
        d_ms = _time_ms(lambda: diffusion.rerank(scores, emb), args.runs)
        g_ms = _time_ms(lambda: gmmr.select(query, emb, args.k), args.runs)
        rows.append(
            {
                "n": n,
                **{f"diffusion_{name}_ms": value for name, value in describe(d_ms, digits=4).items()},
                "diffusion_iterations": int(iterations),
                **{f"gmmr_{name}_ms": value for name, value in describe(g_ms, digits=4).items()},
            }
        )

    print(f"\nReranker stages, d={args.dim}, gMMR k={args.k} (lambda 0.5), {args.runs} runs each\n")
    print("| n | diffusion p50 (ms) | diffusion p95 (ms) | PPR iterations | gMMR p50 (ms) | gMMR p95 (ms) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['n']} | {r['diffusion_p50_ms']:.3f} | {r['diffusion_p95_ms']:.3f} | {r['diffusion_iterations']} "
            f"| {r['gmmr_p50_ms']:.3f} | {r['gmmr_p95_ms']:.3f} |"
        )

    out = Path(args.out)
    payload = {
        "benchmark": "reranker_stages",
        "config": {
            "dim": args.dim,
            "k": args.k,
            "runs": args.runs,
            "seed": args.seed,
            "diffusion": {"alpha": diffusion.alpha, "tol": diffusion.tol, "max_iter": diffusion.max_iter,
                          "top_k_edges": diffusion.top_k_edges},
            "gmmr_lambda": gmmr.lambda_,
        },
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
        },
        "results": rows,
    }
    write_result(out, payload)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
