"""Every benchmark script still imports and parses its arguments (`make bench` is not run in CI).

Only ``--help``: the benchmarks themselves take minutes and measure speed, which tests never do;
the stage benchmark is also run once on a tiny size so its computation path is exercised.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
#: What the scripts share (tests/bench/test_bench_harness.py); not a script itself.
SHARED = {"harness.py"}


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py") if p.name not in SHARED))
def test_bench_script_imports_and_parses_arguments(script: str) -> None:
    result = subprocess.run([sys.executable, str(BENCH / script), "--help"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "usage:" in result.stdout


def test_stage_benchmark_runs_on_a_tiny_size(tmp_path: Path) -> None:
    out = tmp_path / "stages.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "reranker_stages.py"), "--sizes", "5", "--runs", "3", "--out", str(out)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    (row,) = json.loads(out.read_text())["results"]
    assert row["n"] == 5 and row["diffusion_iterations"] >= 1
    assert 0 < row["diffusion_p50_ms"] <= row["diffusion_p95_ms"] and 0 < row["gmmr_p50_ms"] <= row["gmmr_p95_ms"]


def test_ingest_scaling_benchmark_runs_on_tiny_sizes(tmp_path: Path) -> None:
    """bench/ingest_scaling.py end to end on tiny documents: its children ingest through the runtime
    (process isolation, the default), its retriever server answers searches during an ingest."""
    out = tmp_path / "ingest_scaling.json"
    result = subprocess.run(
        [sys.executable, str(BENCH / "ingest_scaling.py"), "--sizes", "0.01,0.02", "--latency-mb", "0.01",
         "--idle-s", "2", "--max-queries", "20", "--corpus-docs", "5", "--out", str(out)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [row["size_mib"] for row in report["scaling"]] == [0.01, 0.02]
    for row in report["scaling"]:
        assert row["chunks"] > 0 and row["seconds"] > 0 and row["cpu_s"] > 0 and row["isolation"] == "process"
        assert row["peak_rss_mib"] > 0 and row["worker_peak_rss_mib"] > 0
    assert set(report["linear"]) == {"seconds_per_mib", "cpu_s_per_mib"}
    latency = report["latency"]
    assert latency["ingest"]["status"] == 200 and latency["ingest"]["chunks"] > 0
    assert latency["idle"]["queries"] > 0 and latency["idle"]["errors"] == 0
    assert latency["during_ingest"]["errors"] == 0


def test_load_benchmark_counts_against_a_stand_in_gateway(tmp_path: Path) -> None:
    """The counting rules of bench/chat_load.py, against a stand-in gateway (``--gateway``): a follow-up
    is sent only after a 200 first turn, a conversation is completed when both turns are 200, a 503 with
    Retry-After is retried with ``--retries`` (and counted), and the ``rag_llm_*`` lines of /metrics are
    reported."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Gateway(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "reranker" in body["message"]:  # client 0's first conversation: its first turn fails
                self._send(504, {"error": "llm timed out: no answer within 60s", "stage": "generator"})
            elif "stored" in body["message"] and body["message"] not in refused:  # refused once, then answered
                refused.add(body["message"])
                self._send(503, {"error": "generator busy: llm busy", "stage": "generator"}, {"Retry-After": "0"})
            else:
                degraded = ["generator: extractive answer, the LLM is busy (expected wait 9s)"] if body["conversation_id"] else []
                self._send(200, {"conversation_id": body["conversation_id"] or "c1", "answer": "a", "citations": [],
                                 "refined_query": body["message"], "abstained": False, "timings_ms": {"total": 5.0},
                                 "degraded": degraded, "answer_mode": "extractive"})

        def do_GET(self) -> None:  # noqa: N802
            text = 'rag_llm_rejected_total{service="generator"} 3.0\nrag_llm_queue_length{service="generator"} 0.0\n'
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(text.encode())

        def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    refused: set[str] = set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Gateway)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    out = tmp_path / "load.json"
    try:
        result = subprocess.run(
            [sys.executable, str(BENCH / "chat_load.py"), "--gateway", f"http://127.0.0.1:{server.server_port}",
             "--clients", "2", "--conversations", "2", "--retries", "1", "--out", str(out)],
            capture_output=True, text=True, timeout=120,
        )
    finally:
        server.shutdown()
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(out.read_text())["summary"]
    assert summary["requests"] == 8 and summary["follow_ups_sent"] == 3 and summary["retries"] == 1
    assert summary["status_counts"] == {"200": 6, "503": 1, "504": 1}
    assert summary["completed_conversations"] == 3 and summary["clients_with_a_completed_conversation"] == 2
    assert summary["degraded_by_reason"] == {"generator: extractive answer, the LLM is busy": 3}
    assert json.loads(out.read_text())["llm_metrics"]["gateway"] == {'rag_llm_rejected_total{service="generator"}': 3.0,
                                                                    'rag_llm_queue_length{service="generator"}': 0.0}
