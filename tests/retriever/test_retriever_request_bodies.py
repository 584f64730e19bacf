"""Request bodies and document ids at the retriever (issue 29), through the real app and lifespan:
415 for a JSON body under another content type, 400 for a key given twice, and a 422 (or, for an
upload, the file refused with its reason) for a control or format character anywhere in an id."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_retriever.app import create_app
from rag_retriever.settings import RetrieverSettings

REPR = re.compile(r" at 0x[0-9a-fA-F]+|<function |<class |<bound method | object at ")
SEARCH = {"query": "lava"}
INGEST = {"documents": [{"id": "kept", "text": "Kites need steady wind."}]}


def identity_header() -> dict[str, str]:
    """``X-RAG-Identity`` of ann (tenant acme) as the gateway sends it."""
    return {IDENTITY_HEADER: encode_identity(Identity(tenant="acme", user="ann", scopes=["chat", "ingest"]))}


@pytest.fixture(scope="module")
def client(tmp_path_factory, embedder) -> Iterator[TestClient]:
    settings = RetrieverSettings(index_dir=str(tmp_path_factory.mktemp("bodies") / "index"))
    with TestClient(create_app(settings, embedder=embedder), headers=identity_header()) as test_client:
        yield test_client


def _ids(client: TestClient) -> list[str]:
    return sorted(document["doc_id"] for document in client.get("/v1/documents").json()["documents"])


@pytest.mark.parametrize(("path", "payload"), [("/v1/search", SEARCH), ("/v1/documents", INGEST)])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_a_json_route_answers_415_to_another_content_type(client, path, payload, content_type) -> None:
    headers = {} if content_type is None else {"content-type": content_type}
    response = client.post(path, content=json.dumps(payload).encode(), headers=headers)
    assert response.status_code == 415, response.text
    assert _ids(client) == []


def test_json_with_a_charset_is_json(client) -> None:
    response = client.post("/v1/search", content=json.dumps(SEARCH).encode(), headers={"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 200, response.text


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/v1/search", b'{"query": "lava", "query": "kites"}', "query"),
        ("/v1/search", b'{"query": "lava", "filters": {"doc_id": ["a"], "doc_id": ["b"]}}', "doc_id"),
        ("/v1/documents", b'{"documents": [{"text": "Salaries.", "acl": {"groups": ["hr"]}, "acl": null}]}', "acl"),
        ("/v1/documents", b'{"documents": [{"text": "Salaries.", "acl": {"users": ["ann"], "users": []}}]}', "users"),
    ],
)
def test_a_duplicate_key_is_a_400_naming_it_and_writes_nothing(client, path, body, key) -> None:
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"duplicate key '{key}' in the JSON body")
    assert _ids(client) == []


@pytest.mark.parametrize(
    "payload",
    [
        {"query": ["lava"], "top_k": "5", "filters": {"author": 1}},
        {"query": "x", "stages": [{}], "mode": None},
        {"documents": [{"id": 5, "text": None, "acl": {"groups": [7]}}]},
        [],
    ],
)
def test_no_4xx_body_shows_an_internal_repr(client, payload) -> None:
    path = "/v1/documents" if isinstance(payload, dict) and "documents" in payload else "/v1/search"
    response = client.post(path, json=payload)
    assert 400 <= response.status_code < 500, response.text
    assert not REPR.search(response.text), response.text


@pytest.mark.parametrize("encoded", ["%0A", "abc%0A", "%E2%80%8B", "report%E2%80%AEfdp.exe", "%EF%BB%BFid", "x%C2%AD"])
def test_a_control_or_format_character_in_the_path_is_a_422(client, encoded) -> None:
    response = client.delete(f"/v1/documents/{encoded}")
    assert response.status_code == 422, response.text
    assert "character U+" in response.json()["error"]


def test_abc_newline_does_not_delete_abc(client) -> None:
    # Before the fix the route matched "abc" (its "$" matched before the final newline).
    assert client.post("/v1/documents", json={"documents": [{"id": "abc", "text": "Gamma rays are photons."}]}).status_code == 200
    assert client.delete("/v1/documents/abc%0A").status_code == 422
    assert _ids(client) == ["abc"]
    assert client.delete("/v1/documents/abc").status_code == 200


@pytest.mark.parametrize("doc_id", ["\u200b", "a\u202eb", "\u2066x", "\ufeffid", "x\u00ad", "line\n"])
def test_a_control_or_format_character_in_a_json_id_is_a_422(client, doc_id) -> None:
    response = client.post("/v1/documents", json={"documents": [{"id": doc_id, "text": "Some text."}]})
    assert response.status_code == 422, response.text
    assert "character U+" in response.json()["error"]
    assert _ids(client) == []


def _multipart(files: list[tuple[str, bytes]]) -> tuple[bytes, str]:
    """A ``multipart/form-data`` body of ``files`` with each name as its raw UTF-8 bytes (httpx would
    percent-encode a control character in a file name; other clients send it as it is)."""
    boundary = b"issue-29-boundary"
    parts = [
        b"--" + boundary + b'\r\nContent-Disposition: form-data; name="files"; filename="' + name.encode()
        + b'"\r\nContent-Type: text/plain\r\n\r\n' + data + b"\r\n"
        for name, data in files
    ]
    return b"".join(parts) + b"--" + boundary + b"--\r\n", f"multipart/form-data; boundary={boundary.decode()}"


@pytest.mark.parametrize("name", ["zero\u200bwidth.txt", "gpj\u202etxt", "trailing.txt\x1f", "tab.txt\t", "nel.txt\x85"])
def test_an_upload_whose_name_holds_a_control_or_format_character_is_refused(client, name) -> None:
    # Before: the format characters became part of the id, and str.strip() took the trailing
    # control characters off ("trailing.txt\x1f" was ingested as "trailing.txt").
    body, content_type = _multipart([(name, b"Some text of the file."), ("fine.txt", b"Fine text.")])
    response = client.post("/v1/documents/upload", content=body, headers={"content-type": content_type})
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["doc_ids"] == ["fine.txt"]
    [failure] = result["failed"]
    assert "the file name cannot be a document id" in failure["reason"] and "character U+" in failure["reason"]
    assert client.delete("/v1/documents/fine.txt").status_code == 200
