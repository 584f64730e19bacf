"""Helpers shared by the gateway tests."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import httpx
from httpx_sse import connect_sse

from rag_gateway.settings import GatewaySettings


#: Where these tests' gateways write their query log unless a test names its own file.
QUERY_LOG_DIR = Path(tempfile.mkdtemp(prefix="rag-gateway-tests-query-log-"))


def gateway_settings(redis_url: str, url: str, **overrides: Any) -> GatewaySettings:
    """Every downstream service at ``url`` (the fakes), small retrieval sizes, and authentication
    off: these tests are about chat and documents; tests/gateway/test_access.py turns it on. The
    query log goes to a temporary file, never into the working directory."""
    fields: dict[str, Any] = dict(
        redis_url=redis_url, refiner_url=url, retriever_url=url, reranker_url=url, generator_url=url,
        retrieval_candidates=8, default_top_k=3, auth="off", query_log_path=str(QUERY_LOG_DIR / "queries.jsonl"),
    )
    fields.update(overrides)
    return GatewaySettings(**fields)


def sse_events(client: httpx.Client, path: str, payload: dict) -> list[tuple[str, Any]]:
    """POST ``payload`` and read the whole event stream as ``[(event, parsed data), ...]``."""
    with connect_sse(client, "POST", path, json=payload) as source:
        assert source.response.status_code == 200, source.response.read()
        return [(sse.event, json.loads(sse.data)) for sse in source.iter_sse()]
