"""Concurrent chat load on the demo corpus (the project's docs/): what 8 clients at once get (issue 12).

Starts Redis, the LLM server and the five services on free ports and ingests docs/ (or, with
``--gateway``, uses a stack already running and already holding the documents). Then ``--clients``
clients run at once, each through ``--conversations`` two-turn conversations one after the other (a
first question, then a follow-up with the same ``conversation_id``) against ``POST /v1/chat``. Every
conversation is a different question pair, so the clients do not all ask the same thing.

How requests are counted: a follow-up is sent only when its first turn answered 200 (a failed first
turn returns no conversation to follow up on), so the request count is
``clients x conversations + first turns answered``. A conversation is *completed* when both of its
turns answered 200. By default a refused turn (503 with ``Retry-After``) is a failed turn, as in issue
12's run; ``--retries N`` makes the clients wait as asked and retry (every attempt is a request in the
status counts). The client timeout is generous (``--client-timeout``, 300 s) so that what is
observed is the services' own timeouts and refusals. A stack started here runs without the per-caller
chat rate limit (``GATEWAY_RATE_LIMIT_CHAT`` empty: all clients share one API key, and the limiter is
not what is measured); on a gateway with authentication the clients send the key ``start_stack``
created, or ``--api-key`` with ``--gateway``.

Recorded per request: status, latency, the ``degraded`` list and ``abstained`` of 200 answers, the
error of the others. Printed: status counts, p50/p95 latency (all requests, the 200s), completed
conversations, degraded answers by reason, and the ``rag_llm_*`` lines of the gateway's, refiner's
and generator's ``/metrics`` scraped at the end (admission control: rejections, queue wait). The
machine's load averages before, during and after the run are in the JSON, with the mean number of
cores that other processes kept busy during the load phase (``busy_cores_others``, from /proc): the
benchmark is only meaningful on a machine not busy with something else.

    .venv/bin/python bench/chat_load.py [--mode generative] [--clients 8] [--conversations 3]
        [--gateway http://127.0.0.1:8000 [--refiner URL --generator URL]] [--out bench-results/chat_load.json]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import statistics
import time
from collections import Counter
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness import (
    DEMO_DOCS,
    REPO_ROOT,
    describe,
    git_head,
    load_averages,
    machine_cpu_s,
    print_table,
    process_tree_cpu_s,
    result_path,
    running_stack,
    write_result,
)

#: Two-turn conversations about the demo corpus (the project's docs/): a first question, then a
#: follow-up that needs the first for context (so the refiner rewrites it with the LLM).
CONVERSATION_PAIRS = [
    ("What does the reranker service do?", "How is it scaled in production?"),
    ("Where are conversations stored?", "How long are they kept?"),
    ("What happens when a downstream service is down?", "Which status code does it return on a timeout?"),
    ("Which library provides BM25 in the embedded backend?", "Why was it chosen?"),
    ("What is the answerability gate?", "How is its threshold calibrated?"),
    ("What does the refiner do with a follow-up question?", "What happens when the guard rejects its rewrite?"),
    ("What is HyDE?", "Which stage uses the hypothetical answer?"),
    ("Which file formats can be uploaded to the retriever?", "What happens to a file that cannot be parsed?"),
    ("How does the extractive answerer choose sentences?", "How many sentences does it return?"),
    ("What does the diffusion stage of the reranker compute?", "When does it stop iterating?"),
    ("What is geometric MMR?", "How is its lambda chosen?"),
    ("Which LLM runs in the local stack?", "How many requests can it decode at once?"),
    ("How are documents split into chunks?", "How much do consecutive chunks overlap?"),
    ("What does the intent router classify?", "When does it ask the LLM?"),
    ("What does the gateway do when the reranker times out?", "Where is the reason reported?"),
    ("How does streaming work in the chat API?", "What happens if the client disconnects?"),
    ("What are the search modes of the retriever?", "How does hybrid search fuse the results?"),
    ("How are claims checked against their sources in generative mode?", "What happens to unsupported claims?"),
    ("What does the OpenSearch backend provide?", "How is it started for the conformance tests?"),
    ("Which metrics does each service expose?", "Which histogram records the latency of each stage?"),
    ("What is the OpenAI-compatible endpoint of the gateway?", "Does it store the conversation?"),
    ("How much of the history does the refiner see?", "How is it cut to the token budget?"),
    ("What is the difference between the auto and generative modes?", "Which one is the default?"),
    ("Which embedding model does the retriever use?", "Where do its weights come from?"),
]

#: Where each service's /metrics is, when this script started the stack.
METRICS_SERVICES = ("gateway", "refiner", "generator")


@dataclass
class RequestRecord:
    client: int
    conversation: int
    turn: int  # 0 = first question, 1 = follow-up
    message: str
    started_s: float  # since the load started
    latency_s: float
    status: int | None  # None: no HTTP answer (transport error or client timeout)
    error: str = ""
    retry_after: str | None = None
    abstained: bool | None = None
    degraded: list[str] = field(default_factory=list)
    answer_mode: str | None = None
    intent: str | None = None
    refined_query: str | None = None
    server_total_ms: float | None = None
    attempt: int = 0  # 0 = first try; n = the n-th retry after a 503/429 with Retry-After (--retries)
    #: On the turn's last attempt: from its first attempt's start to this answer, retry waits included.
    turn_latency_s: float | None = None


def latency_stats(values: list[float]) -> dict[str, float | int | None]:
    return describe(values, ("n", "p50", "p95", "max"), digits=2)


def reason_key(text: str) -> str:
    """A degraded entry or error without its particulars (numbers, the parenthesised cause), for counting."""
    head = text.split(" (", 1)[0]
    return re.sub(r"\d+(\.\d+)?", "N", head)[:120]


def _file_sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.exists() else None


async def run_client(
    client_id: int,
    gateway: str,
    headers: dict[str, str],
    pairs: list[tuple[str, str]],
    timeout_s: float,
    t0: float,
    records: list[RequestRecord],
    retries: int = 0,
) -> None:
    async with httpx.AsyncClient(base_url=gateway, headers=headers, timeout=timeout_s) as http:
        for conversation, pair in enumerate(pairs):
            cid = None
            for turn, message in enumerate(pair):
                turn_started = time.perf_counter()
                for attempt in range(retries + 1):
                    record, next_cid = await chat(http, client_id, conversation, turn, message, cid, t0)
                    record.attempt = attempt
                    records.append(record)
                    if record.status in (429, 503) and record.retry_after and attempt < retries:
                        await asyncio.sleep(float(record.retry_after))  # as the server asked
                        continue
                    break
                record.turn_latency_s = round(time.perf_counter() - turn_started, 2)
                if record.status != 200:
                    break  # no conversation to follow up on
                cid = next_cid


async def chat(
    http: httpx.AsyncClient, client_id: int, conversation: int, turn: int, message: str, cid: str | None, t0: float
) -> tuple[RequestRecord, str | None]:
    """One turn; the record and the conversation id to continue with (None unless it answered 200)."""
    started = time.perf_counter()
    try:
        response = await http.post("/v1/chat", json={"conversation_id": cid, "message": message})
    except httpx.HTTPError as exc:
        return RequestRecord(
            client_id, conversation, turn, message, round(started - t0, 2), round(time.perf_counter() - started, 2),
            None, error=f"{type(exc).__name__}: {exc}"[:300],
        ), None
    latency = time.perf_counter() - started
    record = RequestRecord(
        client_id, conversation, turn, message, round(started - t0, 2), round(latency, 2), response.status_code,
        retry_after=response.headers.get("retry-after"),
    )
    try:
        body = response.json()
    except ValueError:
        body = {"error": response.text[:300]}
    if response.status_code == 200:
        record.abstained = bool(body.get("abstained"))
        record.degraded = list(body.get("degraded") or [])
        record.answer_mode = body.get("answer_mode")
        record.intent = body.get("intent")
        record.refined_query = body.get("refined_query")
        record.server_total_ms = (body.get("timings_ms") or {}).get("total")
        return record, body["conversation_id"]
    record.error = str(body.get("error", body) if isinstance(body, dict) else body)[:300]
    return record, None


async def sample_load(samples: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        samples.append(round(os.getloadavg()[0], 2))
        try:
            await asyncio.wait_for(stop.wait(), timeout=5)
        except TimeoutError:
            pass


async def run_load(
    gateway: str, headers: dict[str, str], clients: int, conversations: int, timeout_s: float, retries: int = 0
) -> tuple[list[RequestRecord], float, list[float]]:
    records: list[RequestRecord] = []
    load_samples: list[float] = []
    stop = asyncio.Event()
    sampler = asyncio.create_task(sample_load(load_samples, stop))
    t0 = time.perf_counter()
    await asyncio.gather(*(
        run_client(
            c, gateway, headers,
            [CONVERSATION_PAIRS[(c * conversations + k) % len(CONVERSATION_PAIRS)] for k in range(conversations)],
            timeout_s, t0, records, retries,
        )
        for c in range(clients)
    ))
    wall_s = time.perf_counter() - t0
    stop.set()
    await sampler
    return records, wall_s, load_samples


def scrape_llm_metrics(urls: dict[str, str]) -> dict[str, dict[str, float] | str]:
    """The ``rag_llm_*`` samples (no buckets) of each service's /metrics, or why they could not be read."""
    from prometheus_client.parser import text_string_to_metric_families

    scraped: dict[str, dict[str, float] | str] = {}
    for name, url in urls.items():
        try:
            text = httpx.get(f"{url}/metrics", timeout=10).text
        except httpx.HTTPError as exc:
            scraped[name] = f"unreachable: {type(exc).__name__}"
            continue
        lines: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if not sample.name.startswith("rag_llm_") or sample.name.endswith(("_bucket", "_created")):
                    continue
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                lines[f"{sample.name}{{{labels}}}"] = sample.value
        scraped[name] = lines
    return scraped


def summarize(records: list[RequestRecord], clients: int, conversations: int) -> dict[str, Any]:
    statuses = Counter("no answer" if r.status is None else str(r.status) for r in records)
    ok = [r for r in records if r.status == 200]
    completed_by_client = {c: 0 for c in range(clients)}
    for r in records:
        if r.turn == 1 and r.status == 200:
            completed_by_client[r.client] += 1
    degraded = Counter(reason_key(entry) for r in ok for entry in r.degraded)
    errors = Counter(f"{r.status}: {reason_key(r.error)}" for r in records if r.status != 200)
    return {
        "requests": len(records),
        "first_turns": sum(r.turn == 0 and r.attempt == 0 for r in records),
        "follow_ups_sent": sum(r.turn == 1 and r.attempt == 0 for r in records),
        "retries": sum(r.attempt > 0 for r in records),
        "status_counts": dict(sorted(statuses.items())),
        "latency_s": {
            "all": latency_stats([r.latency_s for r in records]),
            "200": latency_stats([r.latency_s for r in ok]),
            "200_first_turn": latency_stats([r.latency_s for r in ok if r.turn == 0]),
            "200_follow_up": latency_stats([r.latency_s for r in ok if r.turn == 1]),
            "non_200": latency_stats([r.latency_s for r in records if r.status != 200]),
            "200_turn_with_retries": latency_stats([r.turn_latency_s for r in ok if r.turn_latency_s is not None]),
        },
        "conversations": clients * conversations,
        "completed_conversations": sum(completed_by_client.values()),
        "clients_with_a_completed_conversation": sum(n > 0 for n in completed_by_client.values()),
        "completed_by_client": completed_by_client,
        "answers_200": len(ok),
        "abstained": sum(bool(r.abstained) for r in ok),
        "answer_modes": dict(Counter(str(r.answer_mode) for r in ok)),
        "degraded_answers": sum(bool(r.degraded) for r in ok),
        "degraded_by_reason": dict(degraded.most_common()),
        "errors_by_reason": dict(errors.most_common()),
    }


def print_report(result: dict[str, Any]) -> None:
    s = result["summary"]
    print(f"mode={result['generator_mode']} clients={result['clients']} conversations/client={result['conversations_per_client']} "
          f"load phase {result['load_phase_s']}s; machine load 1m before {result['machine_load']['before']['1m']}, "
          f"max during {result['machine_load']['during_max_1m']}, after {result['machine_load']['after']['1m']}; "
          f"busy cores (of {result['machine_load']['cpu_count']}) {result['machine_load']['busy_cores_machine']}, "
          f"not this benchmark's {result['machine_load']['busy_cores_others']}")
    print(f"requests={s['requests']} (first turns {s['first_turns']}, follow-ups sent {s['follow_ups_sent']}, "
          f"retries after Retry-After {s['retries']})")
    print("status  count")
    for status, count in s["status_counts"].items():
        print(f"{status:<7} {count:>5}")
    print_table("latency s", s["latency_s"], {"n": "n", "p50": "p50", "p95": "p95", "max": "max"})
    print(f"completed conversations {s['completed_conversations']}/{s['conversations']}, clients with >=1: "
          f"{s['clients_with_a_completed_conversation']}/{result['clients']} (per client {list(s['completed_by_client'].values())})")
    print(f"200 answers {s['answers_200']}: abstained {s['abstained']}, answer modes {s['answer_modes']}, "
          f"degraded {s['degraded_answers']}")
    for reason, count in s["degraded_by_reason"].items():
        print(f"  degraded {count:>3}  {reason}")
    for reason, count in s["errors_by_reason"].items():
        print(f"  error    {count:>3}  {reason}")
    for service, lines in result["llm_metrics"].items():
        if isinstance(lines, str) or not lines:
            print(f"  /metrics {service}: {lines or 'no rag_llm_* lines'}")
            continue
        for line, value in lines.items():
            print(f"  /metrics {service}: {line} {value:g}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--conversations", type=int, default=3, help="two-turn conversations per client, one after the other")
    parser.add_argument("--mode", choices=("extractive", "generative", "auto"), default=None,
                        help="GENERATOR_MODE of the stack this script starts (default: the service default)")
    parser.add_argument("--gateway", default=None,
                        help="URL of a running stack's gateway (documents already ingested); no stack is started")
    parser.add_argument("--api-key", default=os.environ.get("RAGCTL_API_KEY"),
                        help="with --gateway: the key sent as a bearer token (default $RAGCTL_API_KEY; none if unset)")
    parser.add_argument("--refiner", default=None, help="with --gateway: the refiner's URL, for its /metrics")
    parser.add_argument("--generator", default=None, help="with --gateway: the generator's URL, for its /metrics")
    parser.add_argument("--docs", type=Path, default=DEMO_DOCS, help="corpus ingested into a started stack (*.md)")
    parser.add_argument("--retries", type=int, default=0,
                        help="retry a 503/429 that has Retry-After, after that many seconds, up to N times a turn "
                        "(default 0: a refused turn is a failed turn, as in issue 12's run)")
    parser.add_argument("--client-timeout", type=float, default=300.0, help="seconds; above every server-side timeout")
    parser.add_argument("--out", type=Path, default=None, help="default bench-results/chat_load[_MODE].json")
    parser.add_argument("--logs", type=Path, default=None, help="copy the started stack's process logs into this directory")
    args = parser.parse_args()
    if args.gateway and args.mode:
        parser.error("--mode configures a stack this script starts; a running stack (--gateway) keeps its own")
    if args.mode:
        os.environ["GENERATOR_MODE"] = args.mode  # the services inherit the launcher's environment
    if not args.gateway:
        # One key for all clients: a per-caller chat rate limit would measure the limiter, not the LLM's
        # admission control. Empty = no limit (ignored by a gateway without rate limits).
        os.environ.setdefault("GATEWAY_RATE_LIMIT_CHAT", "")
    out = args.out or result_path("chat_load", args.mode)

    load_before = load_averages()
    startup_s = ingest_s = None
    corpus: dict[str, Any] | None = None
    with nullcontext() if args.gateway else running_stack(args.docs, copy_logs_to=args.logs) as stack:
        if stack is None:
            gateway = args.gateway.rstrip("/")
            api_key = args.api_key
            metrics_urls = {"gateway": gateway}
            metrics_urls |= {name: url.rstrip("/") for name, url in (("refiner", args.refiner), ("generator", args.generator)) if url}
            own_pids = [os.getpid()]
        else:
            # A stack with authentication returns the key it created; one without (before issue 13) none.
            gateway, api_key = stack.gateway, stack.api_key
            startup_s, ingest_s = round(stack.startup_s, 2), round(stack.ingest_s, 2)
            metrics_urls = {name: stack.url(name) for name in METRICS_SERVICES}
            corpus = {"dir": str(args.docs), "documents": stack.corpus["documents"], "chunks": stack.corpus["chunks"]}
            own_pids = stack.pids()
        load_start = load_averages()
        # Whose CPU the load phase used: the stack started here and this script, or someone else's.
        cpu_start = (machine_cpu_s(), process_tree_cpu_s(own_pids))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        records, wall_s, samples = asyncio.run(
            run_load(gateway, headers, args.clients, args.conversations, args.client_timeout, args.retries)
        )
        load_end = load_averages()
        machine_cpu, own_cpu = machine_cpu_s() - cpu_start[0], process_tree_cpu_s(own_pids) - cpu_start[1]
        metrics = scrape_llm_metrics(metrics_urls)
    load_after = load_averages()

    result = {
        "generator_mode": os.environ.get("GENERATOR_MODE", "(service default)") if stack is not None else "(running stack)",
        "clients": args.clients,
        "conversations_per_client": args.conversations,
        "client_timeout_s": args.client_timeout,
        "retries": args.retries,
        "code": {
            "repo": str(REPO_ROOT),
            "head": git_head(),
            "authentication": bool(api_key),
            # Which admission control ran (the file's hash; null: none, the code before issue 12).
            "admission_control_sha256": _file_sha256(REPO_ROOT / "libs/rag_common/rag_common/llm_admission.py"),
            "llm_env": {k: v for k, v in os.environ.items() if k.startswith(("LLM_", "GENERATOR_", "REFINER_", "GATEWAY_"))},
        },
        "stack_startup_s": startup_s,
        "demo_ingest_s": ingest_s,
        "corpus": corpus,
        "load_phase_s": round(wall_s, 1),
        "machine_load": {
            "before": load_before,
            "load_start": load_start,
            "during_max_1m": max(samples) if samples else None,
            "during_mean_1m": round(statistics.fmean(samples), 2) if samples else None,
            "load_end": load_end,
            "after": load_after,
            # Mean busy cores over the load phase: the whole machine, and what was not this benchmark's
            # own stack (other people's jobs: the disturbance). The machine has os.cpu_count() cores.
            "cpu_count": os.cpu_count(),
            "busy_cores_machine": round(machine_cpu / wall_s, 2),
            "busy_cores_others": round(max(0.0, machine_cpu - own_cpu) / wall_s, 2) if stack is not None else None,
        },
        "summary": summarize(records, args.clients, args.conversations),
        "llm_metrics": metrics,
        "requests": [asdict(r) for r in sorted(records, key=lambda r: r.started_s)],
    }
    write_result(out, result)
    print_report(result)
    print(f"written to {out}")


if __name__ == "__main__":
    main()
