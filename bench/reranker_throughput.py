"""Cross-encoder throughput: the reranker service against the same model in-process, and micro-batching.

Model: the MiniLM-L6 cross-encoder architecture (the size of cross-encoder/ms-marco-MiniLM-L-6-v2:
6 layers, hidden 384, 12 heads, FFN 1536, one output logit) with *random* weights (fixed seed) and
the tokenizer of the packaged all-MiniLM-L6-v2 (same 30,522-word vocabulary), built in a temp dir.
Speed does not depend on the weights, so the numbers hold for the trained model of that size.

Pairs: HotpotQA questions of at most 14 words and paragraphs of 100-150 words (from
``$RAG_DATASETS_DIR``/hotpotqa, read in place), or synthetic words if the dataset is missing.

1. **In-process vs service.** ``CrossEncoderScorer.score_pairs`` (model batch size 32, the service's
   default, in a worker thread as the service calls it) on requests of B = 32 and 64 pairs, and the
   same pairs sent by one sequential httpx client as one-query requests of B passages to
   ``python -m rag_reranker`` (default settings: micro-batching on, 5 ms, 64 pairs) on a loopback
   port. Alternated ``--repeats`` times; medians. overhead = 1 - service / in-process (goal <= 10 %).
2. **Concurrency.** ``--clients`` (32) asyncio clients, each sending one-query requests of P passages
   (P = 1, 4, 16) back to back, against two services started side by side: micro-batching on
   (max_wait 5 ms, max_pairs 64) and off (``RERANKER_BATCH_MAX_WAIT_MS=0``), alternated per P.
   Clients stop sending after ``--conc-seconds`` once each has sent ``--min-rounds`` requests (hard
   stop at ``--conc-max-seconds``); every request sent is awaited, and pairs/s = pairs / time to the
   last answer. Latency p50/p95 leaves out each client's first request (the simultaneous start).
   The mean batch size actually formed comes from the service's ``rag_reranker_batch_pairs``
   histogram (sum / count over the phase). Goal: >= 3x with batching for single-query clients (P = 1).
3. **FLOPs.** Per pair, analytically, at the mean padded sequence length the model ran
   (per layer per token: 8h^2 QKV+output, 4hi FFN, 4sh attention; times layers and tokens; plus
   pooler 2h^2 and classifier 2h), times pairs/s = achieved GFLOP/s, against the CPU's peak measured
   as a 2048x2048 float32 ``torch.matmul`` with the same torch thread count.

Every measurement also records the CPU time (user + system, all threads) of the process doing the
model work (this one in-process, the service's otherwise), so pairs per CPU-second and GFLOP per
CPU-second can be compared even when other work on the host gives the runs different shares of the
cores (a service running 6 forward passes at once gets a bigger share than one running 1), and
``os.getloadavg()`` before and after. Prints Markdown tables and writes JSON. Nothing here asserts.
Default run: 11 min measured at load 5-9 on 2 cores (≈ 7 min expected when quiet, not measured).

    .venv/bin/python bench/reranker_throughput.py [--batch-sizes 32,64] [--repeats 2] [--inproc-seconds 10]
        [--clients 32] [--passages 1,4,16] [--conc-seconds 20] [--min-rounds 2] [--conc-max-seconds 60]
        [--max-load 1.5] [--load-wait-seconds 180] [--out bench-results/reranker_throughput.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "services" / "reranker"))

from rag_common.embedders import resolve_model_path  # noqa: E402
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer  # noqa: E402
from rag_reranker.scorers.local_cross_encoder import ScorerOptions  # noqa: E402
from rag_reranker.settings import RerankerSettings  # noqa: E402
from rag_reranker.torch_runtime import resolve_device  # noqa: E402
from harness import describe, result_path, write_result  # noqa: E402

# MiniLM-L6 cross-encoder (cross-encoder/ms-marco-MiniLM-L-6-v2) dimensions.
ARCH = {"layers": 6, "hidden": 384, "heads": 12, "intermediate": 1536, "vocab": 30522}
MODEL_BATCH_SIZE = 32  # RERANKER_BATCH_SIZE default: pairs per forward pass, in-process and in the service


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def cpu_seconds(pid: int | None = None) -> float:
    """User + system CPU time of a process (all its threads); this process when ``pid`` is None."""
    times = psutil.Process(pid).cpu_times() if pid else psutil.Process().cpu_times()
    return times.user + times.system


def wait_for_quiet(max_load: float, budget_s: float) -> float:
    """Sleep while the 1-min load average is above ``max_load``, at most ``budget_s``; returns seconds waited."""
    waited = 0.0
    while os.getloadavg()[0] > max_load and waited < budget_s:
        print(f"  load {load()} > {max_load}; waiting ({waited:.0f}/{budget_s:.0f} s)", flush=True)
        time.sleep(15)
        waited += 15
    return waited


# --------------------------------------------------------------------------- model and data


def build_model(directory: Path, seed: int) -> None:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=ARCH["vocab"],
        hidden_size=ARCH["hidden"],
        num_hidden_layers=ARCH["layers"],
        num_attention_heads=ARCH["heads"],
        intermediate_size=ARCH["intermediate"],
        max_position_embeddings=512,
        num_labels=1,
    )
    BertForSequenceClassification(config).save_pretrained(directory)
    AutoTokenizer.from_pretrained(str(resolve_model_path("all-MiniLM-L6-v2"))).save_pretrained(directory)


def load_texts(seed: int) -> tuple[list[str], list[str], str]:
    """(queries of ~10 words, passages of 100-150 words, source)."""
    try:
        from rag_eval.datasets import load_dataset

        dataset = load_dataset("hotpotqa")
        passages = [d.text for d in dataset.corpus.values() if 100 <= len(d.text.split()) <= 150]
        queries = [q.text for q in dataset.queries if len(q.text.split()) <= 14]
        if len(passages) >= 64 and len(queries) >= 10:
            return queries, passages, f"hotpotqa ({len(queries)} questions <= 14 words, {len(passages)} paragraphs of 100-150 words)"
    except (OSError, ImportError, ValueError) as exc:  # DatasetNotFound is a FileNotFoundError
        print(f"  hotpotqa not available ({exc}); using synthetic text")
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(5000)] + ["the", "of", "and", "in", "a", "to", "is", "was"] * 200
    queries = [" ".join(rng.choice(vocab, 10)) + "?" for _ in range(100)]
    passages = [" ".join(rng.choice(vocab, int(rng.integers(100, 151)))) + "." for _ in range(300)]
    return queries, passages, "synthetic (10-word queries, 100-150-word passages)"


class PairPool:
    def __init__(self, queries: list[str], passages: list[str], seed: int) -> None:
        self.queries, self.passages = queries, passages
        self.rng = np.random.default_rng(seed)

    def request(self, n: int) -> tuple[str, list[str]]:
        query = self.queries[int(self.rng.integers(len(self.queries)))]
        idx = self.rng.choice(len(self.passages), size=n, replace=n > len(self.passages))
        return query, [self.passages[i] for i in idx]


def body(query: str, passages: list[str]) -> dict[str, Any]:
    return {
        "query": query,
        "passages": [{"chunk_id": f"c{i}", "doc_id": f"d{i}", "text": t} for i, t in enumerate(passages)],
        "top_k": min(len(passages), 10),
        "stages": [{"name": "cross_encoder"}],
    }


# --------------------------------------------------------------------------- FLOPs and padding


def flops_per_pair(seq: float) -> float:
    """Forward FLOPs (multiply-add = 2) of one pair padded to ``seq`` tokens."""
    h, i, layers = ARCH["hidden"], ARCH["intermediate"], ARCH["layers"]
    per_token_layer = 4 * 2 * h * h + 2 * 2 * h * i + 2 * 2 * seq * h
    return layers * seq * per_token_layer + 2 * h * h + 2 * h  # + pooler dense + classifier


class Padding:
    """Token lengths as the model sees them: sentence-transformers sorts a call's pairs by characters,
    cuts them into forward passes of MODEL_BATCH_SIZE and pads each pass to its longest pair."""

    def __init__(self, tokenizer: Any, max_length: int) -> None:
        self.tokenizer, self.max_length = tokenizer, max_length
        self._cache: dict[tuple[str, str], int] = {}

    def tokens(self, query: str, passage: str) -> int:
        key = (query, passage)
        if key not in self._cache:
            ids = self.tokenizer(query, passage, truncation=True, max_length=self.max_length)["input_ids"]
            self._cache[key] = len(ids)
        return self._cache[key]

    def call(self, pairs: list[tuple[str, str]]) -> tuple[int, int]:
        """(real tokens, padded tokens) of one ``score_pairs`` call."""
        order = np.argsort([-(len(q) + len(p)) for q, p in pairs], kind="stable")
        real = padded = 0
        for start in range(0, len(pairs), MODEL_BATCH_SIZE):
            lengths = [self.tokens(*pairs[j]) for j in order[start : start + MODEL_BATCH_SIZE]]
            real += sum(lengths)
            padded += max(lengths) * len(lengths)
        return real, padded

    def calls(self, calls: list[list[tuple[str, str]]]) -> dict[str, float]:
        real = padded = pairs = 0
        for c in calls:
            r, p = self.call(c)
            real, padded, pairs = real + r, padded + p, pairs + len(c)
        return {"mean_tokens": real / pairs, "mean_padded_tokens": padded / pairs}


def peak_matmul_gflops(executor: ThreadPoolExecutor, n: int, reps: int = 5) -> dict[str, float]:
    import torch

    def run() -> list[float]:
        a, b = torch.randn(n, n), torch.randn(n, n)
        for _ in range(2):
            torch.matmul(a, b)
        times = []
        cpu0 = cpu_seconds()
        for _ in range(reps):
            started = time.perf_counter()
            torch.matmul(a, b)
            times.append(time.perf_counter() - started)
        return times, cpu_seconds() - cpu0

    times, cpu = executor.submit(run).result()
    flops = 2.0 * n**3
    return {"n": n, "best_gflops": flops / min(times) / 1e9, "median_gflops": flops / statistics.median(times) / 1e9,
            "gflop_per_cpu_s": flops * len(times) / cpu / 1e9}


# --------------------------------------------------------------------------- measurements


def inproc_run(scorer: CrossEncoderScorer, executor: ThreadPoolExecutor, batches: list, seconds: float) -> dict:
    """Cycle through ``batches`` (each one score_pairs call) until ``seconds`` have passed (>= 2 calls)."""
    before = load()
    pairs = calls = 0
    cpu0 = cpu_seconds()
    started = time.perf_counter()
    while calls < 2 or time.perf_counter() - started < seconds:
        batch = batches[calls % len(batches)]
        executor.submit(scorer.score_pairs, batch).result()
        pairs, calls = pairs + len(batch), calls + 1
    elapsed = time.perf_counter() - started
    cpu = cpu_seconds() - cpu0
    return {"pairs": pairs, "calls": calls, "seconds": elapsed, "pairs_per_s": pairs / elapsed,
            "cpu_seconds": cpu, "pairs_per_cpu_s": pairs / cpu, "load_before": before, "load_after": load()}


def service_seq_run(url: str, pid: int, batches: list, seconds: float) -> dict:
    """Service CPU time is the service process's own (the client's JSON work is in this process)."""
    before = load()
    pairs = calls = 0
    with httpx.Client(timeout=600.0) as client:
        cpu0 = cpu_seconds(pid)
        started = time.perf_counter()
        while calls < 2 or time.perf_counter() - started < seconds:
            batch = batches[calls % len(batches)]
            response = client.post(f"{url}/v1/rerank", json=body(batch[0][0], [p for _, p in batch]))
            response.raise_for_status()
            pairs, calls = pairs + len(batch), calls + 1
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(pid) - cpu0
    return {"pairs": pairs, "calls": calls, "seconds": elapsed, "pairs_per_s": pairs / elapsed,
            "cpu_seconds": cpu, "pairs_per_cpu_s": pairs / cpu, "load_before": before, "load_after": load()}


_METRIC = re.compile(r"^(rag_reranker_batch_pairs_(?:sum|count))\s+([0-9.eE+-]+)$", re.M)


def batch_metrics(url: str) -> dict[str, float]:
    text = httpx.get(f"{url}/metrics", timeout=10.0).text
    return {name: float(value) for name, value in _METRIC.findall(text)}


async def concurrent_run(
    url: str, pid: int, pool: PairPool, clients: int, passages: int, seconds: float, min_rounds: int, max_seconds: float
) -> dict:
    before_metrics = batch_metrics(url)
    before = load()
    records: list[tuple[int, int, float, float, list]] = []  # client, round, sent, done, pairs

    async def client_loop(cid: int, http: httpx.AsyncClient, start: float) -> None:
        rounds = 0
        while True:
            now = time.perf_counter()
            if now - start >= max_seconds or (rounds >= min_rounds and now - start >= seconds):
                return
            query, texts = pool.request(passages)
            sent = time.perf_counter()
            response = await http.post(f"{url}/v1/rerank", json=body(query, texts))
            response.raise_for_status()
            records.append((cid, rounds, sent, time.perf_counter(), [(query, t) for t in texts]))
            rounds += 1

    limits = httpx.Limits(max_connections=clients + 4, max_keepalive_connections=clients + 4)
    async with httpx.AsyncClient(timeout=600.0, limits=limits) as http:
        cpu0 = cpu_seconds(pid)
        start = time.perf_counter()
        await asyncio.gather(*(client_loop(c, http, start) for c in range(clients)))
        elapsed = time.perf_counter() - start
        cpu = cpu_seconds(pid) - cpu0
    after = load()
    after_metrics = batch_metrics(url)
    count = after_metrics.get("rag_reranker_batch_pairs_count", 0) - before_metrics.get("rag_reranker_batch_pairs_count", 0)
    total = after_metrics.get("rag_reranker_batch_pairs_sum", 0) - before_metrics.get("rag_reranker_batch_pairs_sum", 0)
    steady = [r for r in records if r[1] > 0] or records
    lat = np.array([(r[3] - r[2]) * 1000.0 for r in steady])
    pairs = sum(len(r[4]) for r in records)
    return {
        "requests": len(records),
        "pairs": pairs,
        "seconds": elapsed,
        "pairs_per_s": pairs / elapsed,
        "cpu_seconds": cpu,
        "pairs_per_cpu_s": pairs / cpu,
        **{f"latency_{name}_ms": value for name, value in describe(lat, digits=None).items()},
        "latency_requests": len(steady),
        "model_calls": int(count),
        "mean_batch_pairs": (total / count) if count else None,
        "load_before": before,
        "load_after": after,
        "_calls": [r[4] for r in sorted(records, key=lambda r: r[2])],
    }


def group_calls(calls: list[list], batch_pairs: float | None) -> list[list]:
    """Approximate the batcher's model calls: requests in send order, merged up to the mean batch size."""
    if not batch_pairs:
        return calls
    merged, current = [], []
    for c in calls:
        if current and len(current) + len(c) > round(batch_pairs):
            merged.append(current)
            current = []
        current = current + c
    if current:
        merged.append(current)
    return merged


def start_reranker(model_dir: Path, log_dir: Path, name: str, max_wait_ms: float, max_pairs: int):
    from ragctl.stack import free_port, start_service

    env = {
        "RERANKER_CROSS_ENCODER_MODEL": str(model_dir),
        "RERANKER_BATCH_MAX_WAIT_MS": str(max_wait_ms),
        "RERANKER_BATCH_MAX_PAIRS": str(max_pairs),
        "RERANKER_BATCH_SIZE": str(MODEL_BATCH_SIZE),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
    }
    proc = start_service("reranker", free_port(), log_dir / name, env, ready_timeout_s=180.0)
    probe = httpx.post(f"{proc.url}/v1/rerank", json=body("warm up", ["warm up passage"]), timeout=60.0).json()
    if probe.get("stages") != ["cross_encoder"]:
        proc.stop()
        raise RuntimeError(f"the cross_encoder stage did not run in {name}: {probe.get('reports')}")
    return proc


# --------------------------------------------------------------------------- main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch-sizes", default="32,64", help="pairs per request/call for in-process vs service")
    parser.add_argument("--repeats", type=int, default=2, help="alternations of in-process and service runs")
    parser.add_argument("--inproc-seconds", type=float, default=10.0, help="per run (in-process and service each)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--passages", default="1,4,16", help="passages P per concurrent request")
    parser.add_argument("--conc-seconds", type=float, default=20.0)
    parser.add_argument("--min-rounds", type=int, default=2, help="requests each concurrent client sends at least")
    parser.add_argument("--conc-max-seconds", type=float, default=60.0, help="no new requests after this")
    parser.add_argument("--max-wait-ms", type=float, default=5.0)
    parser.add_argument("--max-pairs", type=int, default=64)
    parser.add_argument("--matmul-n", type=int, default=2048)
    parser.add_argument("--max-load", type=float, default=1.5, help="wait at the start while the load is above")
    parser.add_argument("--load-wait-seconds", type=float, default=180.0, help="longest wait for a quiet machine")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(result_path("reranker_throughput")))
    args = parser.parse_args()

    import torch

    batch_sizes = [int(s) for s in args.batch_sizes.split(",")]
    p_values = [int(s) for s in args.passages.split(",")]
    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-model")
    run_started = time.perf_counter()
    load_at_start = load()

    with tempfile.TemporaryDirectory(prefix="reranker-throughput-") as tmp:
        tmp_path = Path(tmp)
        model_dir = tmp_path / "minilm-l6-cross-encoder-random"
        build_model(model_dir, args.seed)
        queries, passages, text_source = load_texts(args.seed)
        print(f"model: MiniLM-L6 cross-encoder, random weights (seed {args.seed}), in {model_dir}")
        print(f"texts: {text_source}")

        scorer = CrossEncoderScorer(
            str(model_dir), replace(ScorerOptions.of(RerankerSettings()), batch_size=MODEL_BATCH_SIZE),
            device=resolve_device(None),
        )
        scorer.warm_up()
        padding = Padding(scorer._model.tokenizer, scorer.max_length)
        torch_threads = torch.get_num_threads()
        print(f"torch {torch.__version__}, {torch_threads} threads, device {scorer._model.device}, "
              f"max_length {scorer.max_length}")

        # Padded tokens actually run in-process, from the model's own inputs.
        seen = {"pairs": 0, "padded": 0, "real": 0}
        bert = next(m for m in scorer._model.modules() if type(m).__name__ == "BertModel")

        def count_tokens(_module, args_, kwargs):
            ids = kwargs.get("input_ids", args_[0] if args_ else None)
            mask = kwargs.get("attention_mask")
            if ids is not None:
                seen["pairs"] += ids.shape[0]
                seen["padded"] += ids.numel()
                seen["real"] += int(mask.sum()) if mask is not None else ids.numel()

        hook = bert.register_forward_pre_hook(count_tokens, with_kwargs=True)

        waited = wait_for_quiet(args.max_load, args.load_wait_seconds)
        print(f"load before measuring: {load()} (waited {waited:.0f} s)")
        peak = peak_matmul_gflops(executor, args.matmul_n)
        print(f"peak: {args.matmul_n}x{args.matmul_n} float32 matmul = {peak['best_gflops']:.1f} GFLOP/s "
              f"(median {peak['median_gflops']:.1f})")

        procs = []
        try:
            on = start_reranker(model_dir, tmp_path, "batching-on", args.max_wait_ms, args.max_pairs)
            procs.append(on)
            off = start_reranker(model_dir, tmp_path, "batching-off", 0, args.max_pairs)
            procs.append(off)

            # ---- 1. in-process vs service, same pairs, alternating
            pool = PairPool(queries, passages, args.seed)
            fixed = {}
            for b in batch_sizes:
                fixed[b] = []
                for _ in range(8):
                    q, texts = pool.request(b)
                    fixed[b].append([(q, t) for t in texts])
            seq: dict[int, dict[str, list]] = {b: {"inproc": [], "service": []} for b in batch_sizes}
            for rep in range(args.repeats):
                for b in batch_sizes:
                    for kind in ("inproc", "service"):
                        if kind == "inproc":
                            seen.update(pairs=0, padded=0, real=0)
                            r = inproc_run(scorer, executor, fixed[b], args.inproc_seconds)
                            r["hook_mean_padded_tokens"] = seen["padded"] / seen["pairs"]
                        else:
                            r = service_seq_run(on.url, on.process.pid, fixed[b], args.inproc_seconds)
                        r.update(padding.calls([fixed[b][i % len(fixed[b])] for i in range(r["calls"])]))
                        f = flops_per_pair(r["mean_padded_tokens"])
                        r["gflop_per_pair"] = f / 1e9
                        r["gflops"] = f * r["pairs_per_s"] / 1e9
                        r["gflop_per_cpu_s"] = f * r["pairs_per_cpu_s"] / 1e9
                        seq[b][kind].append(r)
                        print(f"  [{rep + 1}/{args.repeats}] B={b} {kind:7s} {r['pairs_per_s']:7.2f} pairs/s, "
                              f"{r['pairs_per_cpu_s']:.2f} pairs/CPU-s, padded {r['mean_padded_tokens']:.1f} "
                              f"(model's own count {r.get('hook_mean_padded_tokens', float('nan')):.1f}) "
                              f"({r['calls']} calls, {r['seconds']:.1f} s, load {r['load_before']} -> {r['load_after']})",
                              flush=True)
            hook.remove()

            # ---- 2. concurrency, batching on/off alternating per P
            conc: dict[int, dict[str, dict]] = {}
            for p in p_values:
                conc[p] = {}
                for mode, proc in (("on", on), ("off", off)):
                    r = asyncio.run(concurrent_run(proc.url, proc.process.pid, PairPool(queries, passages, args.seed + p),
                                                   args.clients, p, args.conc_seconds, args.min_rounds,
                                                   args.conc_max_seconds))
                    calls = r.pop("_calls")
                    pad = padding.calls(group_calls(calls, r["mean_batch_pairs"]) if mode == "on" else calls)
                    r.update(pad)
                    conc[p][mode] = r
                    mb = f"{r['mean_batch_pairs']:.1f}" if r["mean_batch_pairs"] else f"{p} (alone)"
                    print(f"  P={p:2d} batching {mode:3s} {r['pairs_per_s']:7.2f} pairs/s, {r['pairs_per_cpu_s']:.2f} pairs/CPU-s, "
                          f"padded {r['mean_padded_tokens']:.1f}, p50 {r['latency_p50_ms']:.0f} ms, "
                          f"p95 {r['latency_p95_ms']:.0f} ms, {r['requests']} req, mean batch {mb}, "
                          f"{r['seconds']:.1f} s, load {r['load_before']} -> {r['load_after']}", flush=True)
        finally:
            for proc in procs:
                proc.stop()
        executor.shutdown()

    # ---- summaries
    # Utilisation two ways: wall-clock GFLOP/s against the matmul's GFLOP/s (what the 2 cores can
    # do), and GFLOP per CPU-second against the matmul's (independent of the share of the cores the
    # process got, which on a shared host is what separate runs differ in most).
    peak_gflops, peak_cpu = peak["best_gflops"], peak["gflop_per_cpu_s"]
    med = statistics.median
    seq_rows = []
    for b in batch_sizes:
        runs = seq[b]
        both = runs["inproc"] + runs["service"]
        row = {"B": b, "mean_tokens": statistics.mean(r["mean_tokens"] for r in both),
               "mean_padded_tokens": statistics.mean(r["mean_padded_tokens"] for r in both),
               "gflop_per_pair": statistics.mean(r["gflop_per_pair"] for r in both)}
        for kind in ("inproc", "service"):
            row[f"{kind}_pairs_per_s"] = med(r["pairs_per_s"] for r in runs[kind])
            row[f"{kind}_pairs_per_cpu_s"] = med(r["pairs_per_cpu_s"] for r in runs[kind])
            row[f"{kind}_gflops"] = med(r["gflops"] for r in runs[kind])
            row[f"{kind}_util_pct"] = 100.0 * row[f"{kind}_gflops"] / peak_gflops
            row[f"{kind}_cpu_util_pct"] = 100.0 * med(r["gflop_per_cpu_s"] for r in runs[kind]) / peak_cpu
        row["overhead_pct"] = 100.0 * (1.0 - row["service_pairs_per_s"] / row["inproc_pairs_per_s"])
        row["overhead_cpu_pct"] = 100.0 * (1.0 - row["service_pairs_per_cpu_s"] / row["inproc_pairs_per_cpu_s"])
        row["runs"] = runs
        seq_rows.append(row)
    conc_rows = []
    for p in p_values:
        on_r, off_r = conc[p]["on"], conc[p]["off"]
        for r in (on_r, off_r):
            f = flops_per_pair(r["mean_padded_tokens"])
            r["gflop_per_pair"] = f / 1e9
            r["gflops"] = f * r["pairs_per_s"] / 1e9
            r["util_pct"] = 100.0 * r["gflops"] / peak_gflops
            r["cpu_util_pct"] = 100.0 * f * r["pairs_per_cpu_s"] / 1e9 / peak_cpu
        conc_rows.append({"P": p, "on": on_r, "off": off_r,
                          "speedup": on_r["pairs_per_s"] / off_r["pairs_per_s"],
                          "speedup_per_cpu_s": on_r["pairs_per_cpu_s"] / off_r["pairs_per_cpu_s"]})

    all_pairs = [pair for b in batch_sizes for batch in fixed[b] for pair in batch]
    mean_tokens = float(np.mean([padding.tokens(*pair) for pair in all_pairs]))

    print(f"\nReranker throughput — MiniLM-L6 cross-encoder (random weights), {text_source}; "
          f"{mean_tokens:.1f} tokens per pair on average; model batch size {MODEL_BATCH_SIZE}; "
          f"torch {torch_threads} threads; peak {args.matmul_n}² float32 matmul {peak_gflops:.1f} GFLOP/s "
          f"({peak_cpu:.1f} GFLOP per CPU-second)\n")
    print("| B pairs/request | tokens/pair (padded) | GFLOP/pair | in-process pairs/s | service pairs/s | "
          "service overhead | pairs per CPU-s in-proc / service | overhead per CPU-s | GFLOP/s in-proc / service "
          "(of peak) | of peak per CPU-s | load 1-min (first → last run) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in seq_rows:
        runs = r["runs"]["inproc"] + r["runs"]["service"]
        loads = f"{runs[0]['load_before'][0]} → {runs[-1]['load_after'][0]}"
        print(f"| {r['B']} | {r['mean_tokens']:.1f} ({r['mean_padded_tokens']:.1f}) | {r['gflop_per_pair']:.2f} "
              f"| {r['inproc_pairs_per_s']:.2f} | {r['service_pairs_per_s']:.2f} | {r['overhead_pct']:.1f} % "
              f"| {r['inproc_pairs_per_cpu_s']:.2f} / {r['service_pairs_per_cpu_s']:.2f} | {r['overhead_cpu_pct']:.1f} % "
              f"| {r['inproc_gflops']:.1f} / {r['service_gflops']:.1f} ({r['inproc_util_pct']:.0f} / "
              f"{r['service_util_pct']:.0f} %) | {r['inproc_cpu_util_pct']:.0f} / {r['service_cpu_util_pct']:.0f} % "
              f"| {loads} |")

    print(f"\n{args.clients} concurrent clients, one query per request; micro-batching on = max_wait "
          f"{args.max_wait_ms:g} ms, max_pairs {args.max_pairs}; off = RERANKER_BATCH_MAX_WAIT_MS=0\n")
    print("| P passages | batching | pairs/s | pairs per CPU-s | p50 ms | p95 ms | mean batch (pairs) | "
          "tokens/pair padded | GFLOP/s (of peak) | of peak per CPU-s | speed-up pairs/s | speed-up per CPU-s "
          "| load 1-min before → after |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in conc_rows:
        for mode in ("on", "off"):
            r = row[mode]
            mb = f"{r['mean_batch_pairs']:.1f}" if r["mean_batch_pairs"] else f"{row['P']} (alone)"
            su = f"**{row['speedup']:.2f}×** | {row['speedup_per_cpu_s']:.2f}×" if mode == "on" else " | "
            print(f"| {row['P']} | {mode} | {r['pairs_per_s']:.2f} | {r['pairs_per_cpu_s']:.2f} "
                  f"| {r['latency_p50_ms']:.0f} | {r['latency_p95_ms']:.0f} | {mb} | {r['mean_padded_tokens']:.1f} "
                  f"| {r['gflops']:.1f} ({r['util_pct']:.0f} %) | {r['cpu_util_pct']:.0f} % | {su} "
                  f"| {r['load_before'][0]} → {r['load_after'][0]} |")

    out = Path(args.out)
    payload = {
        "benchmark": "reranker_throughput",
        "config": {k: v for k, v in vars(args).items() if k != "out"} | {"model_batch_size": MODEL_BATCH_SIZE},
        "model": {"architecture": "BertForSequenceClassification (MiniLM-L6 cross-encoder size)", **ARCH,
                  "weights": f"random, seed {args.seed}", "tokenizer": "all-MiniLM-L6-v2", "max_length": scorer.max_length},
        "texts": text_source,
        "mean_tokens_per_pair": mean_tokens,
        "environment": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "torch_threads": torch_threads,
            "machine": platform.machine(),
            "cpu_count": os.cpu_count(),
            "load_avg_at_start": load_at_start,
            "load_avg_at_end": load(),
        },
        "peak_matmul": peak,
        "inproc_vs_service": seq_rows,
        "concurrency": conc_rows,
        "total_seconds": time.perf_counter() - run_started,
    }
    write_result(out, payload)
    print(f"\nwrote {out} ({payload['total_seconds']:.0f} s in total)")


if __name__ == "__main__":
    main()
