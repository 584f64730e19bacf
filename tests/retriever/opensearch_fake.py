"""A real ``AsyncOpenSearch`` whose transport talks to a script instead of a cluster.

``RecordingConnection`` replaces opensearch-py's aiohttp connection: everything above it (the
client's URL building, parameter escaping, serialisation, the bulk helper, error mapping) is the
real library, so the recorded requests are exactly what a cluster would receive.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from opensearchpy import AsyncOpenSearch
from opensearchpy._async.http_aiohttp import AsyncConnection

Answer = tuple[int, Any]


@dataclass
class Call:
    method: str
    path: str
    params: dict[str, str]
    #: Parsed JSON body; for ``_bulk`` and ``_msearch`` the list of parsed NDJSON lines; None without a body.
    body: Any


@dataclass
class FakeCluster:
    """Answers by ``(method, path)``; searches from a queue; bulk items succeed unless listed in
    ``bulk_errors`` (``{chunk_id: (status, error)}``)."""

    calls: list[Call] = field(default_factory=list)
    routes: dict[tuple[str, str], Answer | Callable[[Call], Answer]] = field(default_factory=dict)
    searches: deque[Any] = field(default_factory=deque)
    bulk_errors: dict[str, tuple[int, dict[str, Any]]] = field(default_factory=dict)

    def client(self) -> AsyncOpenSearch:
        return AsyncOpenSearch(hosts=["http://opensearch.test:9200"], connection_class=RecordingConnection, cluster=self)

    def requests(self, method: str | None = None, path: str | None = None) -> list[Call]:
        return [c for c in self.calls if (method is None or c.method == method) and (path is None or c.path == path)]

    def answer(self, call: Call) -> Answer:
        route = self.routes.get((call.method, call.path))
        if route is not None:
            return route(call) if callable(route) else route
        if call.path == "/_bulk":
            return 200, self._bulk_answer(call.body)
        if call.path.endswith("/_search"):
            return 200, self.searches.popleft() if self.searches else hits_answer([])
        if call.method == "HEAD":
            return 404, None
        return 200, {"acknowledged": True}

    def _bulk_answer(self, lines: list[dict[str, Any]]) -> dict[str, Any]:
        items = []
        for action in lines[::2]:
            [(op, meta)] = action.items()
            status, error = self.bulk_errors.get(meta["_id"], (201, None))
            item = {"_index": meta["_index"], "_id": meta["_id"], "status": status}
            if error is not None:
                item["error"] = error
            else:
                item["result"] = "created"
            items.append({op: item})
        return {"took": 1, "errors": bool(self.bulk_errors), "items": items}


class RecordingConnection(AsyncConnection):
    def __init__(self, *, cluster: FakeCluster, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._cluster = cluster

    async def perform_request(
        self,
        method: str,
        url: str,
        params: Any = None,
        body: bytes | None = None,
        timeout: Any = None,
        ignore: Any = (),
        headers: Any = None,
    ) -> tuple[int, dict[str, str], str]:
        call = Call(method, url, {k: _text(v) for k, v in (params or {}).items()}, _parse(url, body))
        self._cluster.calls.append(call)
        status, payload = self._cluster.answer(call)
        raw = "" if payload is None else json.dumps(payload)
        if not 200 <= status < 300 and status not in ignore:
            self._raise_error(status, raw, "application/json")
        return status, {"content-type": "application/json"}, raw

    async def close(self) -> None:
        pass


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _parse(url: str, body: bytes | str | None) -> Any:
    if body is None:
        return None
    text = _text(body)
    if url.endswith("/_bulk") or url.endswith("/_msearch"):
        return [json.loads(line) for line in text.splitlines() if line]
    return json.loads(text)


def hit(source: dict[str, Any], score: float, **extra: Any) -> dict[str, Any]:
    return {"_index": "rag-chunks-v1-20250102-030405", "_id": source["chunk_id"], "_score": score, "_source": source, **extra}


def hits_answer(hits: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "took": 2,
        "timed_out": False,
        "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
        "hits": {
            "total": {"value": len(hits), "relation": "eq"},
            "max_score": max((h["_score"] for h in hits if h.get("_score") is not None), default=None),
            "hits": hits,
        },
    }
