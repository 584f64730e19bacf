"""Latency of /v1/chat by stage on the demo corpus (the project's docs/), through the real stack.

Starts Redis, the LLM server and the five services on free ports, ingests docs/, asks a fixed set
of questions (first turns and follow-ups), prints p50/p95 per stage (end to end: ``total``; first
turns and follow-ups apart, since only follow-ups call the LLM to rewrite) and writes JSON.
``--mode`` sets ``GENERATOR_MODE`` for the stack (extractive, generative or auto).

    .venv/bin/python bench/chat_latency.py [--mode extractive] [--rounds 3] [--out bench-results/chat_latency.json]
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import httpx

from harness import describe, print_table, result_path, running_stack, write_result

CONVERSATIONS = [
    ["What does the reranker service do?", "How is it scaled in production?"],
    ["Where are conversations stored?", "How long are they kept?"],
    ["What happens when a downstream service is down?", "Which status code does it return on a timeout?"],
    ["Which library provides BM25 in the embedded backend?", "Why was it chosen?"],
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mode", choices=("extractive", "generative", "auto"), default=None,
                        help="GENERATOR_MODE of the stack (default: the service default)")
    parser.add_argument("--out", type=Path, default=None, help="default bench-results/chat_latency[_MODE].json")
    args = parser.parse_args()
    if args.mode:
        os.environ["GENERATOR_MODE"] = args.mode  # the services inherit the launcher's environment
    out = args.out or result_path("chat_latency", args.mode)
    modes: dict[str, int] = {}

    with running_stack() as running:
        samples: dict[str, list[float]] = {}
        abstained = 0
        turns = 0
        answers: list[dict[str, object]] = []  # first round's turns: what each question got
        with httpx.Client(base_url=running.gateway, headers=running.headers, timeout=300) as client:
            for _ in range(args.rounds):
                for conversation in CONVERSATIONS:
                    cid = None
                    for position, message in enumerate(conversation):
                        response = client.post("/v1/chat", json={"conversation_id": cid, "message": message})
                        response.raise_for_status()
                        body = response.json()
                        cid = body["conversation_id"]
                        turns += 1
                        abstained += body["abstained"]
                        if len(answers) < sum(map(len, CONVERSATIONS)):
                            answers.append({
                                "message": message, "refined_query": body.get("refined_query"),
                                "abstained": body["abstained"], "answer": body["answer"],
                                "citations": len(body.get("citations") or []),
                            })
                        modes[str(body.get("answer_mode"))] = modes.get(str(body.get("answer_mode")), 0) + 1
                        for stage, ms in body["timings_ms"].items():
                            samples.setdefault(stage, []).append(ms)
                        kind = "total.first_turn" if position == 0 else "total.follow_up"
                        samples.setdefault(kind, []).append(body["timings_ms"]["total"])
    summary, startup_s, ingest_s = running.corpus, running.startup_s, running.ingest_s

    result = {
        "turns": turns,
        "generator_mode": os.environ.get("GENERATOR_MODE", "(service default)"),
        "answer_modes": modes,
        "abstained": abstained,
        "answers": answers,
        "stack_startup_s": round(startup_s, 2),
        "demo_ingest": {"seconds": round(ingest_s, 2), "documents": summary["documents"], "chunks": summary["chunks"]},
        "stages_ms": {stage: describe(values, ("p50", "p95", "mean"), digits=1) for stage, values in samples.items()},
    }
    write_result(out, result)
    print(f"mode={result['generator_mode']} answer modes={modes}")
    print(f"turns={turns} abstained={abstained} startup={startup_s:.1f}s ingest={ingest_s:.1f}s "
          f"({summary['documents']} docs, {summary['chunks']} chunks)")
    print_table("stage", result["stages_ms"], {"p50 ms": "p50", "p95 ms": "p95"})
    print(f"written to {out}")


if __name__ == "__main__":
    main()
