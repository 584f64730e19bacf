"""Time to first token and total time of ``POST /v1/chat/stream`` on the local LLM, vs ``POST /v1/chat``.

Starts the real stack as ``make run`` does (``ragctl.stack.start_stack``: Redis, the llama.cpp
SmolLM2-135M server and the five services, default settings, free ports), ingests the project's
``docs/*.md`` through the gateway, then asks 10 questions (5 two-turn conversations: the four of
``bench/chat_latency.py`` and one more) ``--rounds`` times through both endpoints. Each conversation
is asked once streamed and once not, in new conversations, alternating which goes first, so both
endpoints see the same questions, history and machine load. One unmeasured warm-up request each.

Streamed, measured on the client from just before the request is sent (httpx streaming, SSE parsed
line by line): time to the response headers, to the ``meta`` event (refine done), to the first
``token`` event (TTFT), to the ``final`` event (total); also the gateway's own ``first_token``
timing from the final event. Not streamed: the total of ``/v1/chat``. p50 / p95 per measure
(``rag_eval.stats.percentiles``); Markdown table and JSON.

    .venv/bin/python bench/chat_stream_latency.py [--rounds 2] [--out bench-results/chat_stream_latency.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from chat_latency import CONVERSATIONS as CHAT_LATENCY_CONVERSATIONS  # noqa: E402
from harness import describe, result_path, running_stack, write_result  # noqa: E402

CONVERSATIONS = [
    *CHAT_LATENCY_CONVERSATIONS,
    ["How does the refiner rewrite a follow-up question?", "What does it do when the LLM times out?"],
]


def sse_events(response: httpx.Response, t0: float) -> Any:
    """``(event name, data, seconds since t0)`` per Server-Sent Event, as the lines arrive."""
    name, data = "message", []
    for line in response.iter_lines():
        if line == "":
            if data:
                yield name, "\n".join(data), time.perf_counter() - t0
            name, data = "message", []
        elif line.startswith(":"):
            continue
        elif line.startswith("event:"):
            name = line[6:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
    if data:
        yield name, "\n".join(data), time.perf_counter() - t0


def ask_stream(client: httpx.Client, message: str, conversation_id: str | None) -> dict[str, Any]:
    sample: dict[str, Any] = {"endpoint": "stream", "message": message, "tokens": 0}
    t0 = time.perf_counter()
    with client.stream("POST", "/v1/chat/stream", json={"conversation_id": conversation_id, "message": message}) as response:
        sample["headers_s"] = time.perf_counter() - t0
        sample["status"] = response.status_code
        if response.status_code != 200:
            response.read()
            sample["error"] = f"HTTP {response.status_code}: {response.text[:200]}"
            sample["total_s"] = time.perf_counter() - t0
            return sample
        for event, data, at in sse_events(response, t0):
            if event == "meta" and "meta_s" not in sample:
                sample["meta_s"] = at
                sample["conversation_id"] = json.loads(data).get("conversation_id")
                sample["intent"] = json.loads(data).get("intent")
            elif event == "token":
                sample["tokens"] += 1
                sample.setdefault("first_token_s", at)
            elif event == "final":
                body = json.loads(data)
                sample["total_s"] = at
                sample["abstained"] = body.get("abstained")
                sample["conversation_id"] = body.get("conversation_id", sample.get("conversation_id"))
                sample["gateway_timings_ms"] = body.get("timings_ms", {})
            elif event == "error":
                sample["error"] = data[:300]
                sample["total_s"] = at
    sample.setdefault("total_s", time.perf_counter() - t0)
    return sample


def ask_chat(client: httpx.Client, message: str, conversation_id: str | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    response = client.post("/v1/chat", json={"conversation_id": conversation_id, "message": message})
    sample: dict[str, Any] = {"endpoint": "chat", "message": message, "total_s": time.perf_counter() - t0,
                              "status": response.status_code}
    if response.status_code != 200:
        sample["error"] = f"HTTP {response.status_code}: {response.text[:200]}"
        return sample
    body = response.json()
    sample.update(conversation_id=body["conversation_id"], abstained=body["abstained"], intent=body.get("intent"),
                  gateway_timings_ms=body.get("timings_ms", {}))
    return sample


def run_conversation(client: httpx.Client, endpoint: str, conversation: list[str], round_no: int) -> list[dict[str, Any]]:
    ask = ask_stream if endpoint == "stream" else ask_chat
    cid = None
    samples = []
    for turn, message in enumerate(conversation, start=1):
        sample = ask(client, message, cid)
        sample.update(round=round_no, turn=turn)
        samples.append(sample)
        cid = sample.get("conversation_id")
        label = "error " + sample["error"][:80] if "error" in sample else f"{sample['total_s']:.1f} s"
        print(f"   round {round_no} {endpoint:<6} turn {turn}: {label}", flush=True)
    return samples


def stats(values: list[float]) -> dict[str, Any]:
    return describe(values, ("n", "p50", "p95"), digits=2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2, help="Times each conversation is asked per endpoint")
    parser.add_argument("--timeout", type=float, default=300.0, help="Client timeout per request, seconds")
    parser.add_argument("--out", type=Path, default=result_path("chat_stream_latency"))
    args = parser.parse_args()

    started = time.perf_counter()
    samples: list[dict[str, Any]] = []
    with running_stack() as running:
        summary, startup_s, ingest_s = running.corpus, running.startup_s, running.ingest_s
        print(f"stack up in {startup_s:.1f} s; ingested {summary['documents']} docs / {summary['chunks']} chunks "
              f"in {ingest_s:.1f} s", flush=True)
        with httpx.Client(base_url=running.gateway, headers=running.headers, timeout=args.timeout) as client:
            ask_chat(client, "What is this project?", None)  # warm-up, not measured
            ask_stream(client, "What is this project?", None)
            for round_no in range(1, args.rounds + 1):
                for index, conversation in enumerate(CONVERSATIONS):
                    order = ("stream", "chat") if (index + round_no) % 2 == 0 else ("chat", "stream")
                    for endpoint in order:
                        samples += run_conversation(client, endpoint, conversation, round_no)

    ok_stream = [s for s in samples if s["endpoint"] == "stream" and "error" not in s]
    ok_chat = [s for s in samples if s["endpoint"] == "chat" and "error" not in s]
    with_tokens = [s for s in ok_stream if "first_token_s" in s]
    result = {
        "questions": sum(len(c) for c in CONVERSATIONS),
        "rounds": args.rounds,
        "requests": {"stream": sum(s["endpoint"] == "stream" for s in samples),
                     "chat": sum(s["endpoint"] == "chat" for s in samples)},
        "errors": {"stream": sum(s["endpoint"] == "stream" and "error" in s for s in samples),
                   "chat": sum(s["endpoint"] == "chat" and "error" in s for s in samples)},
        "stack_startup_s": round(startup_s, 1),
        "demo_ingest": {"seconds": round(ingest_s, 1), "documents": summary["documents"], "chunks": summary["chunks"]},
        "stream_s": {
            "headers": stats([s["headers_s"] for s in ok_stream]),
            "meta": stats([s["meta_s"] for s in ok_stream if "meta_s" in s]),
            "first_token": stats([s["first_token_s"] for s in with_tokens]),
            "first_token_to_final": stats([s["total_s"] - s["first_token_s"] for s in with_tokens]),
            "final_total": stats([s["total_s"] for s in ok_stream]),
            "gateway_first_token_ms": stats([s["gateway_timings_ms"]["first_token"] for s in ok_stream
                                             if "first_token" in s.get("gateway_timings_ms", {})]),
        },
        "chat_s": {"total": stats([s["total_s"] for s in ok_chat])},
        "stream_without_tokens": len(ok_stream) - len(with_tokens),
        "token_events": stats([s["tokens"] for s in ok_stream]),
        "abstained": {"stream": sum(bool(s.get("abstained")) for s in ok_stream),
                      "chat": sum(bool(s.get("abstained")) for s in ok_chat)},
        "stream_tokens_then_abstained": sum(1 for s in with_tokens if s.get("abstained")),
        "gateway_stage_ms_p50": {
            endpoint: {stage: describe([s["gateway_timings_ms"][stage] for s in group
                                         if stage in s.get("gateway_timings_ms", {})], ("p50",), digits=1)["p50"] or 0
                       for stage in sorted({k for s in group for k in s.get("gateway_timings_ms", {})})}
            for endpoint, group in (("stream", ok_stream), ("chat", ok_chat))
        },
        "samples": samples,
        "total_seconds": round(time.perf_counter() - started, 1),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    write_result(args.out, result)

    s, c = result["stream_s"], result["chat_s"]

    def row(label: str, st: dict[str, Any]) -> str:
        return f"| {label} | {st['n']} | {st['p50'] if st['p50'] is not None else '–'} | {st['p95'] if st['p95'] is not None else '–'} |"

    print(f"\n**/v1/chat/stream vs /v1/chat** ({result['questions']} questions × {args.rounds} rounds per endpoint, "
          f"local SmolLM2-135M; errors: stream {result['errors']['stream']}, chat {result['errors']['chat']}; "
          f"abstained: stream {result['abstained']['stream']}, chat {result['abstained']['chat']})\n")
    print("| measure (client side, seconds) | n | p50 | p95 |")
    print("|---|---:|---:|---:|")
    print(row("stream: response headers", s["headers"]))
    print(row("stream: `meta` event (refine done)", s["meta"]))
    print(row("stream: first `token` event (TTFT)", s["first_token"]))
    print(row("stream: first token → `final`", s["first_token_to_final"]))
    print(row("stream: `final` event (total)", s["final_total"]))
    print(row("chat: total", c["total"]))
    g = s["gateway_first_token_ms"]
    print(f"\ngateway's own first_token (ms from the start of generate): p50 {g['p50']}, p95 {g['p95']}; "
          f"streams without any token: {result['stream_without_tokens']}; "
          f"tokens streamed then abstained: {result['stream_tokens_then_abstained']}")
    print("gateway stage p50 (ms):", json.dumps(result["gateway_stage_ms_p50"]))
    print(f"\nwrote {args.out} ({result['total_seconds']} s)")


if __name__ == "__main__":
    main()
