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

BENCH = Path(__file__).resolve().parents[1] / "bench"


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")))
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
