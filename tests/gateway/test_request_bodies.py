"""Request bodies at the gateway (issue 29): a wrong content type is the README's 415 on every route
with a JSON body, a key given twice is a 400 naming it (``"acl": {...}, "acl": null`` published a
document to everyone), a 422 shows locations and messages but never an internal repr (the
OpenAI route printed ``<function min_length_validator at 0x7f…>``), and a document id with a
format character is refused before anything reaches the retriever."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from rag_gateway.app import create_app
from ragctl.in_process import serve_in_thread

from .support import gateway_settings
from .test_document_ids import RecordingRetriever

#: What no error body may hold: a memory address, a function's or a class's repr.
REPR = re.compile(r" at 0x[0-9a-fA-F]+|<function |<class |<bound method | object at ")

CHAT = {"message": "What is Acme?"}
COMPLETION = {"model": "m", "messages": [{"role": "user", "content": "What is Acme?"}]}
FEEDBACK = {"rating": "up"}
#: Every gateway route with a JSON body, and a valid body for it.
JSON_ROUTES = [
    ("/v1/chat", CHAT),
    ("/v1/chat/stream", CHAT),
    ("/v1/chat/completions", COMPLETION),
    ("/v1/conversations/abc/turns/0/feedback", FEEDBACK),
]


@pytest.fixture
def gateway(redis_url: str) -> Iterator[tuple[TestClient, RecordingRetriever]]:
    """The gateway in front of a retriever that records what reaches it (and answers 404)."""
    retriever = RecordingRetriever()
    with serve_in_thread(retriever) as url:
        with TestClient(create_app(gateway_settings(redis_url, url))) as client:
            yield client, retriever


# --------------------------------------------------------------------------- 415


@pytest.mark.parametrize(("path", "payload"), JSON_ROUTES)
@pytest.mark.parametrize("headers", [{"content-type": "text/plain"}, {"content-type": "application/x-www-form-urlencoded"}, {}])
def test_a_json_route_answers_415_to_another_content_type(client: TestClient, path, payload, headers) -> None:
    # Before: 422 ("Input should be a valid dictionary"), where the README promises 415.
    response = client.post(path, content=json.dumps(payload).encode(), headers=headers)
    assert response.status_code == 415, response.text
    assert "application/json" in response.json()["error"]


def test_json_with_a_charset_is_json(client: TestClient) -> None:
    response = client.post("/v1/chat", content=json.dumps(CHAT).encode(), headers={"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 200, response.text


def test_ingestion_keeps_its_two_encodings_and_refuses_others(gateway) -> None:
    client, retriever = gateway
    body = json.dumps({"documents": [{"text": "Some text."}]}).encode()
    assert client.post("/v1/documents", content=body, headers={"content-type": "text/plain"}).status_code == 415
    assert client.post("/v1/documents", content=body).status_code == 415
    assert retriever.requests == []
    assert client.post("/v1/documents", content=body, headers={"content-type": "application/json; charset=utf-8"}).status_code == 404
    assert client.post("/v1/documents", files={"files": ("a.txt", b"Some text.", "text/plain")}).status_code == 404
    assert [path for _, path, _ in retriever.requests] == [b"/v1/documents", b"/v1/documents/upload"]


# --------------------------------------------------------------------------- duplicate keys


def test_a_duplicate_acl_is_a_400_and_publishes_nothing(gateway) -> None:
    client, retriever = gateway
    body = b'{"documents": [{"text": "Salaries of 2026.", "acl": {"groups": ["hr"]}, "acl": null}]}'
    response = client.post("/v1/documents", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith("duplicate key 'acl' in the JSON body")
    assert retriever.requests == []


@pytest.mark.parametrize(
    ("path", "body", "key"),
    [
        ("/v1/chat", b'{"message": "hello", "message": "other"}', "message"),
        ("/v1/chat/stream", b'{"message": "hello", "top_k": 3, "top_k": 5}', "top_k"),
        ("/v1/chat/completions", b'{"model": "m", "messages": [{"role": "user", "content": "a", "role": "system"}]}', "role"),
        ("/v1/conversations/abc/turns/0/feedback", b'{"rating": "up", "rating": "down"}', "rating"),
    ],
)
def test_a_duplicate_key_in_any_json_body_is_a_400_naming_it(client: TestClient, path, body, key) -> None:
    response = client.post(path, content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert f"duplicate key '{key}'" in response.json()["error"]


# --------------------------------------------------------------------------- no reprs in 4xx bodies


def test_a_non_text_content_part_is_a_422_without_a_repr(client: TestClient) -> None:
    payload = {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}
    for stream in (False, True):
        response = client.post("/v1/chat/completions", json=payload | {"stream": stream})
        assert response.status_code == 422, response.text
        assert not REPR.search(response.text), response.text
        error = response.json()["error"]
        assert "body.messages.0.user.content.str: Input should be a valid string" in error
        assert "body.messages.0.user.content.list[ContentPart].0.type: Input should be 'text'" in error


BAD_BODIES = [
    ("/v1/chat", {"message": ["x"], "top_k": "3", "hyde": 1}),
    ("/v1/chat", {"message": "", "conversation_id": "a/b"}),
    ("/v1/chat", []),
    ("/v1/chat/stream", {"message": None, "extra": {"nested": True}}),
    ("/v1/chat/completions", {"model": "", "messages": [{"role": "user", "content": [{"type": "text"}]}]}),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": [{"type": "input_audio", "input_audio": {}}, 5]}]}),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": ""}, {"role": "developer", "content": [{}]}]}),
    ("/v1/conversations/abc/turns/0/feedback", {"rating": "sideways", "comment": 5}),
    ("/v1/documents", {"documents": [{"id": "", "text": " ", "acl": {"groups": [""]}, "metadata": []}]}),
    ("/v1/documents", {"documents": "all"}),
]


@pytest.mark.parametrize(("path", "payload"), BAD_BODIES)
def test_no_4xx_body_shows_an_internal_repr(gateway, path, payload) -> None:
    client, retriever = gateway
    response = client.post(path, json=payload)
    assert 400 <= response.status_code < 500, response.text
    assert not REPR.search(response.text), response.text
    assert retriever.requests == []


def test_an_invalid_documents_payload_names_each_problem(gateway) -> None:
    client, _ = gateway
    response = client.post("/v1/documents", json={"documents": [{"id": "a\u200bb", "text": "x"}, {"title": "t"}]})
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["error"].startswith("invalid documents payload: documents.0.id: Value error, document id contains the format character U+200B")
    assert {"loc": ["documents", 1, "text"], "msg": "Field required", "type": "missing"} in body["detail"]


# --------------------------------------------------------------------------- format characters in ids


@pytest.mark.parametrize("doc_id", ["\u200b", "report\u202efdp.exe", "a\u2066b", "\ufeffid", "x\u00ad", "tab\t", "line\n"])
def test_a_document_id_with_a_control_or_format_character_is_a_422_in_a_json_body(gateway, doc_id: str) -> None:
    client, retriever = gateway
    response = client.post("/v1/documents", json={"documents": [{"id": doc_id, "text": "Some text."}]})
    assert response.status_code == 422, response.text
    assert "character U+" in response.json()["error"]
    assert retriever.requests == []
