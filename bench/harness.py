"""The shared part of every benchmark in ``bench/``: where results go, how samples are summarised,
how a local stack is brought up for a run, and how the machine's load is recorded beside the numbers.

Not a benchmark itself (``tests/bench/test_bench_scripts.py`` runs every other file here with ``--help``).
Scripts are run as ``.venv/bin/python bench/<name>.py``, so this directory is first on ``sys.path``
and they import it as ``from harness import ...`` (the tests that import a bench script put ``bench/``
on ``sys.path`` first, too).

**One percentile convention.** Every p50 / p95 a bench prints or writes is :func:`describe`'s, which
is ``rag_eval.stats.percentiles``: numpy's default *linear interpolation* between the two closest
ranks (``np.percentile(..., method="linear")``, the same as ``statistics.quantiles(method="inclusive")``
and, for p50, ``statistics.median``). Before this module some benches took the nearest rank for p95
(``sorted(v)[round(0.95 * (n - 1))]`` or ``int(...)``); on the same samples those can differ from the
interpolated value by up to one gap between neighbouring samples. Bootstrap confidence intervals
(the 2.5th / 97.5th percentile of resampled means) are a different quantity and stay where they are.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_eval.stats import percentiles

if TYPE_CHECKING:  # ragctl is imported only when a stack is started: most benches never start one
    from ragctl.stack import Stack

REPO_ROOT = Path(__file__).resolve().parents[1]
#: Where every bench writes its JSON by default (git-ignored).
RESULTS_DIR = REPO_ROOT / "bench-results"
#: The demo corpus the chat benches ingest: the project's own documentation.
DEMO_DOCS = REPO_ROOT / "docs"


def result_path(name: str, variant: str | None = None) -> Path:
    """``bench-results/<name>[_<variant>].json``: the default ``--out`` of a bench."""
    return RESULTS_DIR / f"{name}{'_' + variant if variant else ''}.json"


# ------------------------------------------------------------------------------------ statistics


def describe(values: Iterable[float], stats: Sequence[str] = ("p50", "p95"), *, digits: int | None) -> dict[str, Any]:
    """The named statistics of ``values``, in the order asked: ``p<q>`` (linear interpolation, see the
    module docstring), ``mean``, ``max`` and ``n``; each rounded to ``digits`` (None: not rounded).
    With no values every statistic is None and ``n`` is 0."""
    data = [float(v) for v in values]
    qs = [float(name[1:]) for name in stats if name.startswith("p")]
    found: dict[str, Any] = {"n": len(data), "mean": None, "max": None}
    found |= {name: value for name, value in zip((s for s in stats if s.startswith("p")), percentiles(data, qs).values())}
    if data:
        found |= {"mean": statistics.fmean(data), "max": max(data)}
    unknown = set(stats) - set(found)
    if unknown:
        raise ValueError(f"unknown statistics {sorted(unknown)}: p<q>, mean, max or n")
    rounded = (lambda v: v) if digits is None else (lambda v: round(v, digits))
    return {name: found[name] if name == "n" or found[name] is None else rounded(found[name]) for name in stats}


def latency_ms(samples_ms: Iterable[float]) -> dict[str, Any]:
    """The retrieval benches' summary of search times: p50, p95, mean (ms to the µs) and n."""
    return describe(samples_ms, ("p50", "p95", "mean", "n"), digits=3)


# ------------------------------------------------------------------------------------ results


def write_result(path: Path, result: Any) -> None:
    """The bench's JSON (indented, UTF-8 as is, with a final newline), its directory made if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def print_table(first: str, rows: Mapping[str, Mapping[str, Any]], columns: Mapping[str, str]) -> None:
    """A plain-text table: one line per row (its name, then the value of each column's key; ``columns``
    maps heading to key), columns as wide as their widest cell, None shown as ``–``."""
    cells = {name: [("–" if row.get(key) is None else str(row[key])) for key in columns.values()] for name, row in rows.items()}
    width = max([len(first), *map(len, rows)])
    widths = [max([len(heading), *(len(line[i]) for line in cells.values())]) for i, heading in enumerate(columns)]
    print(" ".join([f"{first:<{width}}", *(f"{h:>{w}}" for h, w in zip(columns, widths))]))
    for name, line in cells.items():
        print(" ".join([f"{name:<{width}}", *(f"{c:>{w}}" for c, w in zip(line, widths))]))


# ------------------------------------------------------------------------------------ the machine


def git_head() -> str:
    """The short commit the bench ran on (empty outside a git checkout)."""
    done = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return done.stdout.strip()


def load_averages() -> dict[str, Any]:
    one, five, fifteen = os.getloadavg()
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    return {"1m": round(one, 2), "5m": round(five, 2), "15m": round(fifteen, 2), "uptime": uptime}


def machine_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (Linux /proc/stat; 0 elsewhere)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def process_tree_cpu_s(pids: list[int]) -> float:
    """CPU seconds used so far by these processes and their threads (Linux /proc; 0 elsewhere)."""
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime
    return total


# ------------------------------------------------------------------------------------ the stack


@dataclass(frozen=True)
class RunningStack:
    """A local stack started by :func:`running_stack`, its corpus already ingested."""

    stack: Stack
    #: The services' environment, with ``RAGCTL_API_KEY`` (``ragctl.stack.API_KEY_ENV``) added.
    env: dict[str, str]
    ports: dict[str, int]
    api_key: str | None
    #: Seconds from the first process started to the gateway ready.
    startup_s: float
    #: ``time.perf_counter()`` when the stack was ready (before the ingestion).
    ready_at: float
    #: ``ragctl ingest``'s summary of the corpus (``documents``, ``chunks``, ``failed``...); None without one.
    corpus: dict[str, Any] | None
    ingest_s: float | None

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self.ports[name]}"

    @property
    def gateway(self) -> str:
        return self.url("gateway")

    @property
    def headers(self) -> dict[str, str]:
        """The bearer header of the stack's API key (none when the stack has no authentication)."""
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def pids(self) -> list[int]:
        """This process's and the stack's: whose CPU time is the benchmark's own."""
        return [os.getpid(), *(p.process.pid for p in self.stack.processes)]


@contextmanager
def running_stack(
    docs: Path | None = DEMO_DOCS, *, persist_redis: bool = False, copy_logs_to: Path | None = None
) -> Iterator[RunningStack]:
    """Redis, the LLM server and the five services as ``ragctl up`` starts them (``ragctl.stack.
    start_stack``: authentication on, an API key created) on free ports of 127.0.0.1 with their data in
    a temporary directory, each waited for until ready; then ``docs/*.md`` uploaded through the gateway
    (no ingestion when ``docs`` is None). Stopped on the way out, its process logs copied to
    ``copy_logs_to`` first when given. The services inherit this process's environment: set
    ``GENERATOR_MODE`` and the like before entering."""
    from ragctl.cli import upload_files
    from ragctl.stack import API_KEY_ENV, SERVICES, free_port, start_stack

    ports = {name: free_port() for name in (*SERVICES, "llm", "redis")}
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        stack, env = start_stack(ports, Path(tmp), persist_redis=persist_redis)
        ready_at = time.perf_counter()
        try:
            api_key = env.get(API_KEY_ENV)
            corpus = ingest_s = None
            if docs is not None:
                gateway = f"http://127.0.0.1:{ports['gateway']}"
                corpus = upload_files(gateway, sorted(docs.glob("*.md")), api_key=api_key)
                ingest_s = time.perf_counter() - ready_at
            yield RunningStack(stack, env, ports, api_key, ready_at - started, ready_at, corpus, ingest_s)
        finally:
            stack.stop()
            if copy_logs_to is not None:
                shutil.copytree(Path(tmp) / "logs", copy_logs_to, dirs_exist_ok=True)
