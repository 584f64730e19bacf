"""``make fuzz``: schemathesis against every service's OpenAPI document, thousands of cases per API.

Starts the local stack as ``ragctl up`` does (``ragctl.stack.start_stack``: Redis, the SmolLM2
llama.cpp server, the five services, authentication on) on free ports in a temporary directory,
ingests ``--docs`` (the project's docs/*.md) so that searches and chats have something to find, and
runs schemathesis once per service (``ragctl.fuzzing.schemathesis_command``: every phase, every check,
the checked-off rules of ``cli/ragctl/schemathesis.toml``), with a per-operation bound chosen so that
each API gets at least ``--cases`` generated cases (ceil(cases / operations), as the fuzzing phase
alone generates up to that many per operation; the examples and coverage phases add more).

The seeded run of ``make test`` (tests/fuzz) is this with 25 cases per operation.

Generation defaults to extractive answers (``--mode``): a fuzzed chat costs a fraction of a second
instead of an LLM call, and the schemas, validation and error paths are the same in every mode.
Rate limits are off: a 429 is a documented answer, but it would stop the cases from reaching the
routes' validation.

It reports per API: operations, cases generated, requests sent and their responses by status (500s:
goal 0), failures by kind (schema violations, a response the document does not describe: goal 0;
every other check too), seconds; and the machine load. JSON in ``bench-results/fuzz.json`` with schemathesis's own JSON report per API
(``bench-results/fuzz-<service>.json``); exit status 1 if a goal was missed.

    .venv/bin/python bench/openapi_fuzz.py [--cases 1000] [--seed 20261125] [--services gateway,retriever]
        [--mode extractive] [--out bench-results/fuzz.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import DEMO_DOCS, git_head, load_averages, result_path, running_stack, write_result  # noqa: E402

#: schemathesis's failures that mean a response the OpenAPI document does not describe: its status,
#: content type, headers or body. ("schema violations", goal 0; every other check is reported too.)
SCHEMA_VIOLATIONS = {
    "JsonSchemaError", "UndefinedStatusCode", "UndefinedContentType", "MissingContentType", "MissingHeaders",
    "MalformedMediaType", "ContentDeserializationError", "DiscriminatorMismatch", "MalformedJson",
}
HTTP_METHODS = {"get", "put", "post", "delete", "patch", "head", "options", "trace"}


def count_operations(openapi: dict[str, Any]) -> int:
    return sum(1 for item in openapi.get("paths", {}).values() for method in item if method in HTTP_METHODS)


def summarize_report(report: dict[str, Any], har: dict[str, Any] | None) -> dict[str, Any]:
    """Counts from schemathesis's JSON run report (cases, failures by kind) and its HAR file (every
    request it sent, with the response's status)."""
    cases = report.get("test_cases") or {}
    failures: Counter[str] = Counter()
    schema_violations = 0
    for group in report.get("failures") or []:
        failures[f"{group['type']}: {group['title']}"] += group["count"]
        schema_violations += group["count"] if group["type"] in SCHEMA_VIOLATIONS else 0
    statuses: Counter[str] = Counter()
    for entry in (har or {}).get("log", {}).get("entries", []):
        status = entry.get("response", {}).get("status")
        statuses[str(status) if status else "no response"] += 1
    return {
        "cases": cases.get("generated", 0),
        "cases_with_failures": cases.get("with_failures", 0),
        "unique_failures": cases.get("unique_failures", 0),
        "errored": cases.get("errored", 0),
        "requests": sum(statuses.values()),
        "statuses": dict(sorted(statuses.items())),
        "failures": dict(failures),
        "schema_violations": schema_violations,
        "errors": report.get("errors") or [],
    }


def run_schemathesis(
    service: str, url: str, api_key: str, service_token: str, seed: int, per_operation: int, report_dir: Path
) -> dict[str, Any]:
    from ragctl.fuzzing import schemathesis_command

    report_path, har_path = report_dir / f"fuzz-{service}.json", report_dir / f"fuzz-{service}.har"
    command = schemathesis_command(
        service, url, api_key=api_key, service_token=service_token, seed=seed,
        max_examples=per_operation, report_json=report_path, report_har=har_path,
    )
    started = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    stdout = result.stdout
    failures_at = stdout.find("FAILURES")
    row: dict[str, Any] = {
        "max_examples_per_operation": per_operation,
        "exit_code": result.returncode,
        "seconds": round(time.perf_counter() - started, 1),
        "failures_excerpt": stdout[failures_at : failures_at + 20000] if failures_at >= 0 else "",
        "stderr_tail": result.stderr[-2000:],
        "report": str(report_path),
    }
    if report_path.exists():
        har = json.loads(har_path.read_text()) if har_path.exists() else None
        row.update(summarize_report(json.loads(report_path.read_text()), har))
    return row


def fuzz_service(
    service: str, url: str, api_key: str, service_token: str, args: argparse.Namespace, report_dir: Path
) -> dict[str, Any]:
    """A schemathesis run with ceil(cases / operations) examples per operation. Operations with few
    distinct inputs (a GET without parameters) are exhausted after a handful, so a run can generate
    fewer than ``args.cases``: then up to two more runs, the bound scaled up by the shortfall (x1.25);
    the last run is the one reported, the earlier ones are kept in ``attempts``."""
    operations = count_operations(httpx.get(f"{url}/openapi.json", timeout=30).json())
    per_operation = max(1, math.ceil(args.cases / operations))
    attempts: list[dict[str, Any]] = []
    while True:
        row = run_schemathesis(service, url, api_key, service_token, args.seed, per_operation, report_dir)
        generated = row.get("cases", 0)
        if not 0 < generated < args.cases or row["exit_code"] != 0 or len(attempts) == 2:
            break
        attempts.append({k: v for k, v in row.items() if k not in ("failures_excerpt", "stderr_tail")})
        per_operation = math.ceil(per_operation * args.cases / generated * 1.25)
    row["attempts"] = attempts
    return {"service": service, "operations": operations, **row}


def print_report(result: dict[str, Any]) -> None:
    print(f"\nmake fuzz: seed {result['seed']}, at least {result['cases_goal']} cases per API, head {result['head']}")
    print(f"{'API':<10} {'ops':>4} {'n/op':>5} {'cases':>6} {'requests':>8} {'failing':>7} {'500s':>5} {'schema':>6} {'s':>7}  statuses")
    for row in result["apis"]:
        statuses = " ".join(f"{k}:{v}" for k, v in row.get("statuses", {}).items())
        print(f"{row['service']:<10} {row['operations']:>4} {row['max_examples_per_operation']:>5} {row.get('cases', '?'):>6} "
              f"{row.get('requests', '?'):>8} {row.get('cases_with_failures', '?'):>7} {row['status_500']:>5} "
              f"{row.get('schema_violations', '?'):>6} {row['seconds']:>7}  {statuses}")
        for failure, count in row.get("failures", {}).items():
            print(f"           {count} x {failure}")
        for error in row.get("errors", []):
            print(f"           error: {error}")
    load = result["machine_load"]
    print(f"machine load (1/5/15 min): before {load['before']}, after {load['after']}; {load['cpu_count']} cores")
    print("goals (0 responses of 500, 0 schema violations, >= cases per API):", "met" if result["goals_met"] else "MISSED")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=1000, help="generated cases per API, at least")
    parser.add_argument("--seed", type=int, default=20261125)
    parser.add_argument("--services", default="gateway,refiner,retriever,reranker,generator",
                        help="comma-separated, of the five services")
    parser.add_argument("--mode", choices=("extractive", "generative", "auto"), default="extractive",
                        help="GENERATOR_MODE of the stack")
    parser.add_argument("--docs", type=Path, default=DEMO_DOCS, help="corpus ingested first (*.md)")
    parser.add_argument("--out", type=Path, default=result_path("fuzz"))
    args = parser.parse_args()
    from ragctl.stack import SERVICES

    services = [s.strip() for s in args.services.split(",") if s.strip()]
    unknown = sorted(set(services) - set(SERVICES))
    if unknown:
        parser.error(f"unknown services {unknown}; choose from {', '.join(SERVICES)}")
    os.environ["GENERATOR_MODE"] = args.mode  # the services inherit the launcher's environment
    for kind in ("CHAT", "STREAM", "INGEST"):
        os.environ[f"GATEWAY_RATE_LIMIT_{kind}"] = ""
    args.out.parent.mkdir(parents=True, exist_ok=True)
    load_before = load_averages()
    rows = []
    with running_stack(args.docs) as running:
        corpus = running.corpus
        for service in services:
            print(f"fuzzing {service} ...", flush=True)
            row = fuzz_service(service, running.url(service), running.api_key, running.env["RAG_SERVICE_TOKEN"], args,
                               args.out.parent)
            row["status_500"] = row.get("statuses", {}).get("500", 0)
            rows.append(row)
    goals_met = all(
        row.get("cases", 0) >= args.cases and row["status_500"] == 0 and row.get("schema_violations", 1) == 0
        and row["exit_code"] == 0
        for row in rows
    )
    result = {
        "seed": args.seed,
        "cases_goal": args.cases,
        "generator_mode": args.mode,
        "head": git_head(),
        "corpus": {"documents": corpus["documents"], "chunks": corpus["chunks"]},
        "machine_load": {"before": load_before, "after": load_averages(), "cpu_count": os.cpu_count()},
        "goals_met": goals_met,
        "apis": rows,
    }
    write_result(args.out, result)
    print_report(result)
    for row in rows:
        if row["failures_excerpt"]:
            print(f"\n--- {row['service']}: {row['failures_excerpt'][:6000]}")
    print(f"\nJSON: {args.out}")
    return 0 if goals_met else 1


if __name__ == "__main__":
    raise SystemExit(main())
