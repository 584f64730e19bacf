"""The counting of ``make fuzz`` (bench/openapi_fuzz.py): schemathesis, run by the same command line
as the benchmark, against a small real API with two known defects (a route that answers 500, a route whose
body contradicts its documented schema) and one correct route; the report must find exactly those.
The benchmark itself fuzzes the five services for many minutes and is not run here."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from ragctl.fuzzing import schemathesis_command
from ragctl.stack import free_port

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from openapi_fuzz import count_operations, summarize_report  # noqa: E402


class Count(BaseModel):
    count: int


def defective_api() -> FastAPI:
    app = FastAPI()

    @app.get("/correct", response_model=Count)
    async def correct(n: int = 0) -> Count:
        return Count(count=n)

    @app.get("/crashes", response_model=Count)
    async def crashes(n: int = 0) -> Count:
        raise RuntimeError("a defect")

    @app.get("/lies", response_model=Count)
    async def lies() -> JSONResponse:
        # Bypasses the response model: the body is not the documented `Count`.
        return JSONResponse({"count": "many"})

    return app


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(defective_api(), host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/openapi.json", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    yield url
    server.should_exit = True
    thread.join(timeout=10)


def test_the_report_counts_the_500s_and_the_schema_violations_it_was_sent(api_url: str, tmp_path: Path) -> None:
    assert count_operations(httpx.get(f"{api_url}/openapi.json").json()) == 3
    report, har = tmp_path / "report.json", tmp_path / "report.har"
    command = schemathesis_command(
        "gateway", api_url, api_key="k", service_token="t", seed=1, max_examples=5, report_json=report, report_har=har
    )
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode != 0, result.stdout[-3000:]
    summary = summarize_report(json.loads(report.read_text()), json.loads(har.read_text()))
    assert summary["cases"] >= 3 and summary["requests"] >= summary["cases"]
    assert summary["statuses"].get("500", 0) >= 1 and set(summary["statuses"]) >= {"200", "500"}
    assert summary["schema_violations"] >= 1
    kinds = {kind.split(":")[0] for kind in summary["failures"]}
    assert {"ServerError", "JsonSchemaError"} <= kinds, summary["failures"]
