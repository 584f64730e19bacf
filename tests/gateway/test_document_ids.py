"""Document and conversation ids at the edge: validated, and forwarded as exactly one path segment.

Regression tests for issue 12's path injection (``DELETE /v1/documents/json-gamma.md%23not-this-one``
deleted ``json-gamma.md``; ``..%2Fsearch`` reached the retriever as ``DELETE /v1/search``) and its 500
(``DELETE /v1/documents/%01`` → ``internal error: InvalidURL``). The retriever here records the raw
request line it receives, so what the gateway sends is checked byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from rag_common.identity import IDENTITY_HEADER, decode_identity
from rag_gateway.app import create_app
from ragctl.in_process import serve_in_thread

from .support import gateway_settings


class RecordingRetriever:
    """A raw ASGI app: answers every request 404 and records (method, raw path, query string)."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, bytes, bytes]] = []
        #: The X-RAG-Identity header of each request (None when absent).
        self.identities: list[str | None] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        self.requests.append((scope["method"], scope["raw_path"], scope["query_string"]))
        headers = dict(scope["headers"])
        identity = headers.get(IDENTITY_HEADER.lower().encode())
        self.identities.append(identity.decode() if identity else None)
        body = b'{"error": "no such document"}'
        await send({"type": "http.response.start", "status": 404, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def recording_retriever() -> Iterator[tuple[str, RecordingRetriever]]:
    app = RecordingRetriever()
    with serve_in_thread(app) as url:
        yield url, app


@pytest.fixture
def gateway(redis_url: str, recording_retriever) -> Iterator[tuple[TestClient, RecordingRetriever]]:
    url, retriever = recording_retriever
    retriever.requests.clear()
    retriever.identities.clear()
    with TestClient(create_app(gateway_settings(redis_url, url))) as client:
        yield client, retriever


@pytest.mark.parametrize(
    ("public_path", "forwarded_path"),
    [
        # A fragment marker must not cut the id: this deleted "json-gamma.md" before the fix.
        ("/v1/documents/json-gamma.md%23not-this-one", b"/v1/documents/json-gamma.md%23not-this-one"),
        # An encoded slash must not climb out of /v1/documents: this was DELETE /v1/search.
        ("/v1/documents/..%2Fsearch", b"/v1/documents/..%2Fsearch"),
        # An encoded query must stay part of the id: this arrived as /v1/documents/x?y=1.
        ("/v1/documents/x%3Fy%3D1", b"/v1/documents/x%3Fy%3D1"),
        ("/v1/documents/a%2Fb%2Fc.md", b"/v1/documents/a%2Fb%2Fc.md"),
        ("/v1/documents/%C3%9Cber%20(1).pdf", b"/v1/documents/%C3%9Cber%20%281%29.pdf"),
        ("/v1/documents/100%25", b"/v1/documents/100%25"),
    ],
)
def test_document_id_is_forwarded_as_one_encoded_segment(gateway, public_path: str, forwarded_path: bytes) -> None:
    client, retriever = gateway
    response = client.delete(public_path)
    assert response.status_code == 404, response.text  # the retriever's answer, relayed
    assert retriever.requests == [("DELETE", forwarded_path, b"")]


@pytest.mark.parametrize(
    "encoded",
    [
        "%01", "%09", "%0D", "%7F", "a%00b", "%C2%85", "%2E%2E", "%2E", "%20%20",
        # Issue 29: a newline was a 404 ("%0A") or the id without it ("abc%0A" named "abc"); format
        # characters (zero-width space, bidi override, BOM, soft hyphen) were accepted.
        "%0A", "abc%0A", "a%0Ab", "%E2%80%8B", "report%E2%80%AEfdp.exe", "%EF%BB%BFid", "x%C2%AD",
    ],
)
def test_an_invalid_document_id_is_a_422_that_reaches_nobody(gateway, encoded: str) -> None:
    client, retriever = gateway
    response = client.delete(f"/v1/documents/{encoded}")
    assert response.status_code == 422, response.text
    assert "document id" in response.json()["error"] or "'.' and '..'" in response.json()["error"]
    assert retriever.requests == []


def test_a_too_long_document_id_is_a_422(gateway) -> None:
    client, retriever = gateway
    response = client.delete("/v1/documents/" + "a" * 513)
    assert response.status_code == 422
    assert "longer than 512" in response.json()["error"]
    assert retriever.requests == []


@pytest.mark.parametrize("encoded", ["%01", "x%3Fy", "%20", "a.b", "%C3%9C"])
def test_a_malformed_conversation_id_is_a_422(gateway, encoded: str) -> None:
    client, _ = gateway
    for method in ("GET", "DELETE"):
        response = client.request(method, f"/v1/conversations/{encoded}")
        assert response.status_code == 422, (method, encoded, response.text)


def test_a_chat_with_a_malformed_conversation_id_is_a_422(gateway) -> None:
    client, _ = gateway
    response = client.post("/v1/chat", json={"conversation_id": "a/b", "message": "hello"})
    assert response.status_code == 422
    assert "conversation_id" in response.json()["error"]


def test_document_calls_carry_the_callers_identity(gateway) -> None:
    # The retriever scopes ingestion, listing and deletion to the caller's tenant (auth is off in
    # these tests: the caller is the configured default identity).
    client, retriever = gateway
    client.post("/v1/documents", json={"documents": [{"text": "Some text."}]})
    client.get("/v1/documents")
    client.delete("/v1/documents/some-doc")
    identities = [decode_identity(value) for value in retriever.identities if value is not None]
    assert len(retriever.identities) == 3 and len(identities) == 3
    assert {(i.tenant, i.user) for i in identities} == {("default", "local")}
