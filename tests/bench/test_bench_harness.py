"""bench/harness.py, the part every benchmark shares: one percentile convention (``rag_eval.stats``'s
linear interpolation), the result file, the printed table, and the stack set-up (here with a stand-in
``start_stack`` and ``upload_files``: the real stack takes minutes and is not started by tests)."""

from __future__ import annotations

import json
import os
import statistics
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from rag_eval.stats import percentiles

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import harness  # noqa: E402
from harness import describe, latency_ms, print_table, result_path, running_stack, write_result  # noqa: E402


def test_percentiles_are_rag_eval_stats_linear_interpolation() -> None:
    values = [1.0, 2.0, 3.0, 4.0, 10.0]
    stats = describe(values, ("p50", "p95", "p99"), digits=None)
    assert stats == {"p50": 3.0, "p95": pytest.approx(8.8), "p99": pytest.approx(9.76)}
    assert stats == percentiles(values, (50, 95, 99))
    assert stats["p95"] == pytest.approx(float(np.percentile(values, 95)))
    # Not the nearest rank some benches used to take (sorted(v)[round(0.95 * (n - 1))] = 10.0).
    assert stats["p95"] != sorted(values)[round(0.95 * (len(values) - 1))]
    even = [5.0, 1.0, 4.0, 2.0]
    assert describe(even, ("p50",), digits=None)["p50"] == statistics.median(even) == 3.0
    assert describe(even, ("p95",), digits=None)["p95"] == pytest.approx(
        statistics.quantiles(even, n=20, method="inclusive")[18])


def test_describe_gives_the_statistics_asked_in_order_rounded() -> None:
    stats = describe([0.12345, 0.2, 0.9], ("n", "max", "p50", "mean"), digits=2)
    assert list(stats) == ["n", "max", "p50", "mean"]
    assert stats == {"n": 3, "max": 0.9, "p50": 0.2, "mean": 0.41}
    assert describe([1.0], digits=3) == {"p50": 1.0, "p95": 1.0}
    assert latency_ms([1.0, 2.0, 3.0]) == {"p50": 2.0, "p95": 2.9, "mean": 2.0, "n": 3}


def test_describe_of_no_values_is_none_and_zero() -> None:
    assert describe([], ("n", "p50", "p95", "mean", "max"), digits=1) == {
        "n": 0, "p50": None, "p95": None, "mean": None, "max": None}


def test_describe_refuses_a_statistic_it_does_not_know() -> None:
    with pytest.raises(ValueError, match="min"):
        describe([1.0], ("p50", "min"), digits=1)


def test_results_are_written_under_bench_results_as_indented_utf8_json(tmp_path: Path) -> None:
    assert result_path("chat_load") == harness.REPO_ROOT / "bench-results" / "chat_load.json"
    assert result_path("chat_latency", "generative").name == "chat_latency_generative.json"
    assert result_path("chat_latency", None).name == "chat_latency.json"
    out = tmp_path / "deeper" / "result.json"
    write_result(out, {"answer": "naïve → ok", "n": 2})
    text = out.read_text(encoding="utf-8")
    assert json.loads(text) == {"answer": "naïve → ok", "n": 2}
    assert "naïve → ok" in text and text.endswith("}\n") and '\n  "n": 2' in text


def test_the_table_aligns_columns_and_shows_none_as_a_dash(capsys: pytest.CaptureFixture[str]) -> None:
    print_table("stage", {"total": {"p50": 1234.5, "p95": None}, "refine": {"p50": 2.0, "p95": 3.25}},
                {"p50 ms": "p50", "p95 ms": "p95"})
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "stage  p50 ms p95 ms",
        "total  1234.5      –",
        "refine    2.0   3.25",
    ]


def test_machine_load_and_cpu_readings() -> None:
    assert set(harness.load_averages()) == {"1m", "5m", "15m", "uptime"}
    if Path("/proc/stat").exists():
        assert harness.machine_cpu_s() > 0
        assert harness.process_tree_cpu_s([os.getpid()]) > 0
    assert harness.process_tree_cpu_s([]) == 0.0


class _Process:
    def __init__(self, name: str, pid: int) -> None:
        self.name, self.process = name, SimpleNamespace(pid=pid)


class _Stack:
    def __init__(self) -> None:
        self.processes = [_Process("redis", 11), _Process("gateway", 12)]
        self.stopped = False

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def fake_stack(monkeypatch: pytest.MonkeyPatch) -> SimpleNamespace:
    """``ragctl.stack.start_stack`` and ``ragctl.cli.upload_files`` replaced: what they were asked is recorded."""
    import ragctl.cli
    import ragctl.stack

    seen = SimpleNamespace(stack=_Stack(), started=[], uploads=[])

    def start_stack(ports: dict[str, int], data_dir: Path, *, persist_redis: bool) -> tuple[_Stack, dict[str, str]]:
        (data_dir / "logs").mkdir(parents=True)
        (data_dir / "logs" / "gateway.log").write_text("started\n")
        seen.started.append((dict(ports), persist_redis))
        return seen.stack, {ragctl.stack.API_KEY_ENV: "key-1", "RAG_SERVICE_TOKEN": "token"}

    def upload_files(gateway: str, paths: list[Path], api_key: str | None = None) -> dict:
        seen.uploads.append((gateway, paths, api_key))
        return {"documents": len(paths), "chunks": 10 * len(paths), "failed": []}

    monkeypatch.setattr(ragctl.stack, "start_stack", start_stack)
    monkeypatch.setattr(ragctl.cli, "upload_files", upload_files)
    return seen


def test_running_stack_starts_on_free_ports_ingests_the_corpus_and_stops(fake_stack: SimpleNamespace, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("b.md", "a.md", "notes.txt"):
        (docs / name).write_text("text")
    with running_stack(docs, persist_redis=True, copy_logs_to=tmp_path / "logs") as running:
        assert not fake_stack.stack.stopped
        ((ports, persist_redis),) = fake_stack.started
        assert set(ports) == {"retriever", "reranker", "refiner", "generator", "gateway", "llm", "redis"}
        assert persist_redis is True and len(set(ports.values())) == len(ports)
        assert running.gateway == f"http://127.0.0.1:{ports['gateway']}" == running.url("gateway")
        assert fake_stack.uploads == [(running.gateway, [docs / "a.md", docs / "b.md"], "key-1")]
        assert running.api_key == "key-1" and running.headers == {"Authorization": "Bearer key-1"}
        assert running.env["RAG_SERVICE_TOKEN"] == "token"
        assert running.corpus == {"documents": 2, "chunks": 20, "failed": []}
        assert running.startup_s >= 0 and running.ingest_s >= 0 and running.ready_at > 0
        assert running.pids() == [os.getpid(), 11, 12]
    assert fake_stack.stack.stopped
    assert (tmp_path / "logs" / "gateway.log").read_text() == "started\n"


def test_running_stack_without_a_corpus_and_stopped_on_an_error(fake_stack: SimpleNamespace) -> None:
    with pytest.raises(RuntimeError, match="bench failed"), running_stack(None) as running:
        assert running.corpus is None and running.ingest_s is None
        raise RuntimeError("bench failed")
    assert fake_stack.uploads == [] and fake_stack.stack.stopped
    assert fake_stack.started[0][1] is False  # no Redis persistence unless asked
