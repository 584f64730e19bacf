"""``make chaos``: simulated users hold multi-turn conversations while every component is killed in turn.

Starts the local stack as ``ragctl up`` does (``ragctl.stack.start_stack``: Redis with its
append-only file, the SmolLM2 llama.cpp server, the five services, authentication on) on free ports in
a temporary directory, under the same supervisor (``ragctl.supervisor.Supervisor``, checked every
0.2 s in a thread), and ingests ``--docs`` (the project's docs/*.md). Then for ``--duration`` seconds:

- ``--users`` simulated users (asyncio + httpx), each holding conversations of ``--turns`` turns
  against ``POST /v1/chat`` (questions about the docs, each follow-up in the same conversation), one
  request at a time, 0.5 s apart; a turn that fails starts a new conversation;
- a chaos loop sends ``kill -9`` to one component every ``--interval`` seconds, in the order of
  ``COMPONENTS`` (gateway, refiner, retriever, reranker, generator, LLM, Redis), round and round.

Then it waits for every process to be back, reads every conversation a user holds an acknowledged
(200) turn of, and reports:

- requests and how they ended: 200, degraded 200 (``degraded`` not empty), 503/504 naming a stage (by
  stage), the gateway unreachable (no HTTP answer: it was killed, so in-flight requests lost their
  connection and new ones were refused until its restart), anything else (goal 0);
- acknowledged turns missing afterwards (goal 0) and duplicated turns (goal 0), plus turns stored
  that their user never saw acknowledged (the gateway killed between the write and the answer);
- p50/p95 latency of all requests and of the 200s;
- per kill: when, what, and the time to recover: until the supervisor had the process ready again,
  and until the next 200 answer that started after the kill.

JSON in ``bench-results/chaos.json`` (every request, every kill, the supervisor's log lines, the
machine load as in ``bench/chat_load.py``); exit status 1 if a goal was missed or the supervisor gave up.

    .venv/bin/python bench/chaos.py [--users 32] [--duration 600] [--interval 40] [--turns 4]
        [--mode auto] [--out bench-results/chaos.json] [--logs DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chat_load import CONVERSATION_PAIRS, latency_stats, reason_key  # noqa: E402
from harness import (  # noqa: E402
    DEMO_DOCS,
    git_head,
    load_averages,
    machine_cpu_s,
    process_tree_cpu_s,
    result_path,
    running_stack,
    write_result,
)

#: What the chaos loop kills, in this order, round and round: the processes of the local stack.
COMPONENTS = ("gateway", "refiner", "retriever", "reranker", "generator", "llm", "redis")


@dataclass
class Request:
    user: int
    conversation_id: str | None
    turn: int
    message: str
    started_s: float  # since the load started
    latency_s: float
    status: int | None  # None: no HTTP answer (connection refused or lost)
    outcome: str = ""
    stage: str | None = None
    degraded: list[str] = field(default_factory=list)
    error: str = ""
    answer: str | None = None


@dataclass
class Kill:
    component: str
    at_s: float
    pid: int
    ready_after_s: float | None = None  # the supervisor had it ready again
    next_200_after_s: float | None = None  # the first 200 to a request started after the kill


def classify(status: int | None, body: dict[str, Any]) -> tuple[str, str | None]:
    """``(outcome, stage)``: ``ok``, ``degraded``, ``stage_failed`` (503/504 naming a stage),
    ``gateway_unreachable`` (no HTTP answer) or ``other`` (anything else: the goal is none)."""
    if status is None:
        return "gateway_unreachable", None
    if status == 200:
        return ("degraded" if body.get("degraded") else "ok"), None
    if status in (503, 504) and body.get("stage"):
        return "stage_failed", str(body["stage"])
    return "other", None


def conversation_script(user: int, conversation: int, turns: int) -> list[str]:
    """The messages of one conversation: consecutive question pairs of ``CONVERSATION_PAIRS`` (a first
    question, its follow-up, the next pair's...), so every message of a conversation differs."""
    start = (user * 5 + conversation * ((turns + 1) // 2)) % len(CONVERSATION_PAIRS)
    messages = [m for k in range((turns + 1) // 2) for m in CONVERSATION_PAIRS[(start + k) % len(CONVERSATION_PAIRS)]]
    return messages[:turns]


def audit_turns(acknowledged: dict[str, list[tuple[str, str]]], stored: dict[str, list[tuple[str, str]]]) -> dict[str, int]:
    """Acknowledged turns (message, answer) against what each conversation holds afterwards.

    ``missing``: acknowledged but not stored; ``duplicated``: stored copies beyond the first of one
    message; ``unacknowledged_stored``: stored turns no user saw acknowledged."""
    missing = duplicated = unacknowledged = 0
    for conversation_id, turns in acknowledged.items():
        held = stored.get(conversation_id, [])
        counts = Counter(held)
        missing += sum(1 for turn in turns if counts[turn] == 0)
        duplicated += sum(n - 1 for n in Counter(message for message, _ in held).values() if n > 1)
        unacknowledged += sum(1 for turn in set(held) if turn not in set(turns))
    return {
        "acknowledged": sum(len(t) for t in acknowledged.values()),
        "missing": missing,
        "duplicated": duplicated,
        "unacknowledged_stored": unacknowledged,
    }


async def run_user(
    user: int, http: httpx.AsyncClient, turns: int, deadline: float, t0: float, requests: list[Request]
) -> None:
    conversation = 0
    while time.perf_counter() < deadline:
        cid: str | None = None
        for turn, message in enumerate(conversation_script(user, conversation, turns)):
            if time.perf_counter() >= deadline:
                return
            started = time.perf_counter()
            body: dict[str, Any] = {}
            try:
                response = await http.post("/v1/chat", json={"conversation_id": cid, "message": message})
                status: int | None = response.status_code
                try:
                    body = response.json()
                except ValueError:
                    body = {"error": response.text[:300]}
            except httpx.HTTPError as exc:
                status, body = None, {"error": f"{type(exc).__name__}: {exc}"[:300]}
            outcome, stage = classify(status, body)
            record = Request(
                user, cid, turn, message, round(started - t0, 2), round(time.perf_counter() - started, 2), status,
                outcome, stage, list(body.get("degraded") or []), "" if status == 200 else str(body.get("error", ""))[:300],
            )
            requests.append(record)
            if status == 200:
                cid = record.conversation_id = body["conversation_id"]
                record.answer = body["answer"]
            await asyncio.sleep(0.5)
            if status != 200:
                break  # a new conversation, as a user whose question failed would start over
        conversation += 1


async def chaos_loop(
    stack: Any, supervisor: Any, interval_s: float, deadline: float, t0: float, kills: list[Kill]
) -> None:
    index = 0
    recoveries: list[asyncio.Task[None]] = []
    while True:
        await asyncio.sleep(interval_s)
        if time.perf_counter() >= deadline:
            break
        name = COMPONENTS[index % len(COMPONENTS)]
        index += 1
        [proc] = [p for p in stack.processes if p.name == name]
        if not proc.alive():
            continue  # still restarting from an earlier kill: try the next one next time
        restarts_before = supervisor.restarts.get(name, 0)
        kill = Kill(name, round(time.perf_counter() - t0, 2), proc.process.pid)
        os.kill(proc.process.pid, signal.SIGKILL)
        kills.append(kill)
        recoveries.append(asyncio.create_task(_time_recovery(supervisor, name, restarts_before, kill, t0)))
    if recoveries:
        await asyncio.wait(recoveries, timeout=300)


async def _time_recovery(supervisor: Any, name: str, restarts_before: int, kill: Kill, t0: float) -> None:
    while supervisor.restarts.get(name, 0) <= restarts_before:
        await asyncio.sleep(0.1)
    kill.ready_after_s = round(time.perf_counter() - t0 - kill.at_s, 2)


def next_200_after(kills: list[Kill], requests: list[Request]) -> None:
    ok = sorted((r.started_s + r.latency_s, r.started_s) for r in requests if r.status == 200)
    for kill in kills:
        answered = [end for end, start in ok if start >= kill.at_s]
        kill.next_200_after_s = round(min(answered) - kill.at_s, 2) if answered else None


async def run_load(
    gateway: str, api_key: str, stack: Any, supervisor: Any, args: argparse.Namespace
) -> tuple[list[Request], list[Kill], float, list[float]]:
    requests: list[Request] = []
    kills: list[Kill] = []
    samples: list[float] = []
    t0 = time.perf_counter()
    deadline = t0 + args.duration
    limits = httpx.Limits(max_connections=args.users + 8)
    headers = {"Authorization": f"Bearer {api_key}"}

    async def sample() -> None:
        while time.perf_counter() < deadline:
            samples.append(round(os.getloadavg()[0], 2))
            await asyncio.sleep(5)

    async with httpx.AsyncClient(base_url=gateway, headers=headers, timeout=args.client_timeout, limits=limits) as http:
        await asyncio.gather(
            *(run_user(u, http, args.turns, deadline, t0, requests) for u in range(args.users)),
            chaos_loop(stack, supervisor, args.interval, deadline, t0, kills),
            sample(),
        )
    return requests, kills, time.perf_counter() - t0, samples


def read_conversations(gateway: str, api_key: str, ids: list[str]) -> dict[str, list[tuple[str, str]]]:
    stored: dict[str, list[tuple[str, str]]] = {}
    with httpx.Client(base_url=gateway, headers={"Authorization": f"Bearer {api_key}"}, timeout=60) as http:
        for conversation_id in ids:
            response = http.get(f"/v1/conversations/{conversation_id}")
            turns = response.json()["turns"] if response.status_code == 200 else []
            stored[conversation_id] = [(t["message"], t["answer"]) for t in turns]
    return stored


def wait_until_all_ready(stack: Any, supervisor: Any, timeout_s: float = 300.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if all(p.alive() for p in stack.processes) and not supervisor.restarting():
            for p in stack.processes:
                if p.name not in ("redis", "llm"):
                    if httpx.get(f"{p.url}/readyz", timeout=10).status_code != 200:
                        break
            else:
                return
        time.sleep(1)
    raise RuntimeError("the stack did not come back within 300 s after the chaos phase")


def summarize(requests: list[Request], kills: list[Kill], audit: dict[str, int]) -> dict[str, Any]:
    outcomes = Counter(r.outcome for r in requests)
    return {
        "requests": len(requests),
        "ok_200": outcomes["ok"],
        "degraded_200": outcomes["degraded"],
        "stage_failed_503_504": outcomes["stage_failed"],
        "stage_failed_by_stage": dict(Counter(f"{r.status} {r.stage}" for r in requests if r.outcome == "stage_failed")),
        "gateway_unreachable": outcomes["gateway_unreachable"],
        "other": outcomes["other"],
        "other_examples": [f"{r.status}: {r.error}" for r in requests if r.outcome == "other"][:20],
        "degraded_reasons": dict(Counter(reason_key(d) for r in requests for d in r.degraded).most_common(15)),
        "latency_s_all": latency_stats([r.latency_s for r in requests]),
        "latency_s_200": latency_stats([r.latency_s for r in requests if r.status == 200]),
        "turns": audit,
        "recovery_by_component": {
            name: {
                "kills": len(ks),
                "ready_after_s": [k.ready_after_s for k in ks],
                "next_200_after_s": [k.next_200_after_s for k in ks],
            }
            for name in COMPONENTS
            if (ks := [k for k in kills if k.component == name])
        },
    }


def print_report(result: dict[str, Any]) -> None:
    s = result["summary"]
    print(f"\nchaos: {result['users']} users, {result['duration_s']} s, a kill every {result['interval_s']} s "
          f"({len(result['kills'])} kills); generator mode {result['generator_mode']}")
    print(f"  requests {s['requests']}: 200 {s['ok_200']}, degraded 200 {s['degraded_200']}, "
          f"503/504 naming a stage {s['stage_failed_503_504']} {s['stage_failed_by_stage']}, "
          f"gateway unreachable {s['gateway_unreachable']}, other {s['other']} (goal 0)")
    t = s["turns"]
    print(f"  acknowledged turns {t['acknowledged']}: missing {t['missing']} (goal 0), duplicated {t['duplicated']} "
          f"(goal 0), stored but never acknowledged {t['unacknowledged_stored']}")
    print(f"  latency all p50 {s['latency_s_all']['p50']} s p95 {s['latency_s_all']['p95']} s; "
          f"200s p50 {s['latency_s_200']['p50']} s p95 {s['latency_s_200']['p95']} s")
    print("  recovery (kill → ready | kill → next 200), seconds:")
    for name, rec in s["recovery_by_component"].items():
        print(f"    {name:<10} {rec['kills']} kills  ready {rec['ready_after_s']}  next 200 {rec['next_200_after_s']}")
    if s["degraded_reasons"]:
        print("  degraded reasons:")
        for reason, n in s["degraded_reasons"].items():
            print(f"    {n:>5}  {reason}")
    if result["gave_up"]:
        print(f"  SUPERVISOR GAVE UP: {result['gave_up']}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, default=32)
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of load and kills")
    parser.add_argument("--interval", type=float, default=40.0, help="seconds between two kills")
    parser.add_argument("--turns", type=int, default=4, help="turns per conversation")
    parser.add_argument("--mode", choices=("extractive", "generative", "auto"), default=None,
                        help="GENERATOR_MODE of the stack (default: the service default)")
    parser.add_argument("--client-timeout", type=float, default=300.0, help="seconds; above every server-side timeout")
    parser.add_argument("--docs", type=Path, default=DEMO_DOCS, help="corpus ingested first (*.md)")
    parser.add_argument("--out", type=Path, default=result_path("chaos"))
    parser.add_argument("--logs", type=Path, default=None, help="copy the stack's process logs into this directory")
    args = parser.parse_args()
    if args.mode:
        os.environ["GENERATOR_MODE"] = args.mode  # the services inherit the launcher's environment
    # All users share one API key: a per-caller limit would measure the limiter, not the failures.
    for kind in ("CHAT", "STREAM", "INGEST"):
        os.environ[f"GATEWAY_RATE_LIMIT_{kind}"] = ""

    from ragctl.supervisor import GaveUp, Supervisor

    load_before = load_averages()
    events: list[tuple[float, str]] = []
    gave_up: str | None = None
    with running_stack(args.docs, persist_redis=True, copy_logs_to=args.logs) as running:
        stack, api_key, gateway = running.stack, running.api_key, running.gateway
        corpus = {"documents": running.corpus["documents"], "chunks": running.corpus["chunks"]}
        t_start = running.ready_at  # the supervisor log is timed from the stack being ready, before the ingestion
        supervisor = Supervisor(stack, report=lambda line: events.append((round(time.perf_counter() - t_start, 2), line)))
        stop = threading.Event()

        def supervise() -> None:
            nonlocal gave_up
            while not stop.is_set():
                try:
                    supervisor.check()
                except GaveUp as exc:
                    gave_up = str(exc)[:2000]
                    return
                stop.wait(0.2)

        watcher = threading.Thread(target=supervise, name="supervisor", daemon=True)
        try:
            watcher.start()
            load_start, cpu_start = load_averages(), (machine_cpu_s(), process_tree_cpu_s(running.pids()))
            requests, kills, wall_s, samples = asyncio.run(run_load(gateway, api_key, stack, supervisor, args))
            machine_cpu = machine_cpu_s() - cpu_start[0]
            wait_until_all_ready(stack, supervisor)
            acknowledged: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for r in requests:
                if r.status == 200 and r.conversation_id and r.answer is not None:
                    acknowledged[r.conversation_id].append((r.message, r.answer))
            audit = audit_turns(acknowledged, read_conversations(gateway, api_key, list(acknowledged)))
        finally:  # the supervisor first: it would restart what running_stack stops on the way out
            stop.set()
            supervisor.stop()
    next_200_after(kills, requests)
    summary = summarize(requests, kills, audit)
    result = {
        "users": args.users,
        "duration_s": args.duration,
        "interval_s": args.interval,
        "turns_per_conversation": args.turns,
        "generator_mode": os.environ.get("GENERATOR_MODE", "(service default)"),
        "head": git_head(),
        "corpus": corpus,
        "load_phase_s": round(wall_s, 1),
        "machine_load": {
            "before": load_before,
            "load_start": load_start,
            "during_max_1m": max(samples) if samples else None,
            "during_mean_1m": round(statistics.fmean(samples), 2) if samples else None,
            "after": load_averages(),
            "cpu_count": os.cpu_count(),
            "busy_cores_machine": round(machine_cpu / wall_s, 2),
        },
        "gave_up": gave_up,
        "summary": summary,
        "kills": [asdict(k) for k in kills],
        "supervisor_log": events,
        "requests": [asdict(r) for r in sorted(requests, key=lambda r: r.started_s)],
    }
    write_result(args.out, result)
    print_report(result)
    print(f"\nJSON: {args.out}")
    missed = summary["other"] or audit["missing"] or audit["duplicated"] or gave_up
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
