"""Request bodies on every service (issue 29), on the five real apps over TestClient: each route
whose OpenAPI document declares a JSON body answers 415 to another content type (and to none),
400 naming the key to a JSON object with a key twice, and no 4xx body of any of them shows an
internal repr. The apps' runtimes are not opened: all of this is decided before a route's logic
runs (tests/common/ has the mechanism, tests/gateway/ and tests/retriever/ the services' own cases)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity

from service_apps import build_service_apps

REPR = re.compile(r" at 0x[0-9a-fA-F]+|<function |<class |<bound method | object at ")
IDENTITY = {IDENTITY_HEADER: encode_identity(Identity(tenant="t", user="u", scopes=["chat", "ingest"]))}
#: Services whose routes validate a body without opening the runtime (the gateway authenticates first).
VALIDATING_WITHOUT_RUNTIME = ("retriever", "reranker", "refiner", "generator")


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, FastAPI]:
    return build_service_apps(tmp_path_factory.mktemp("bodies"))


#: Reads its body itself, after authenticating the caller (tests/gateway/test_request_bodies.py).
READS_ITS_OWN_BODY = {("POST", "/v1/documents")}


def json_operations(app: FastAPI) -> list[tuple[str, str]]:
    """(method, path with each parameter filled) of every operation with a JSON request body."""
    found = []
    for path, item in app.openapi()["paths"].items():
        for method, operation in item.items():
            if "application/json" in operation.get("requestBody", {}).get("content", {}):
                found.append((method.upper(), re.sub(r"\{[^}]+\}", "0", path)))
    if app.title == "rag-gateway":
        found = [operation for operation in found if operation not in READS_ITS_OWN_BODY]
    return found


def test_every_service_has_json_routes(apps) -> None:
    counts = {name: len(json_operations(app)) for name, app in apps.items()}
    assert counts["gateway"] == 4 and counts["generator"] == 2, counts
    assert all(count >= 1 for count in counts.values()), counts


@pytest.mark.parametrize("service", ["gateway", "retriever", "reranker", "refiner", "generator"])
@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", None])
def test_every_json_route_answers_415_to_another_content_type(apps, service, content_type) -> None:
    client = TestClient(apps[service], headers=IDENTITY)
    headers = {} if content_type is None else {"content-type": content_type}
    for method, path in json_operations(apps[service]):
        response = client.request(method, path, content=b'{"query": "x", "message": "x"}', headers=headers)
        assert response.status_code == 415, (method, path, response.text)
        assert "application/json" in response.json()["error"]
        assert "415" in apps[service].openapi()["paths"][_template(apps[service], path)][method.lower()]["responses"]


@pytest.mark.parametrize("service", ["gateway", "retriever", "reranker", "refiner", "generator"])
def test_every_json_route_answers_400_to_a_key_given_twice(apps, service) -> None:
    client = TestClient(apps[service], headers=IDENTITY)
    for method, path in json_operations(apps[service]):
        body = b'{"query": "x", "passages": [{"text": "a", "metadata": {"acl": {"groups": ["g"]}, "acl": null}}]}'
        response = client.request(method, path, content=body, headers={"content-type": "application/json"})
        assert response.status_code == 400, (method, path, response.text)
        assert response.json()["error"].startswith("duplicate key 'acl' in the JSON body"), response.text


BAD_BODIES: list[Any] = [
    [],
    "text",
    None,
    {},
    {"query": ["x"], "top_k": "5", "passages": [{"chunk_id": 1, "score": "high"}], "stages": [{"name": "nope"}]},
    {"query": "x", "passages": [{"chunk_id": "a", "doc_id": "a", "text": "t", "score": 0.5, "sentence_vectors": {"dim": 0}}]},
    {"message": "x", "history": [{"user": 1}], "query_embedding": [True]},
    {"documents": [{"id": "\u202e", "text": " ", "acl": {"groups": [""]}}]},
    {"model": "m", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
]


@pytest.mark.parametrize("service", VALIDATING_WITHOUT_RUNTIME)
@pytest.mark.parametrize("payload", BAD_BODIES)
def test_no_4xx_body_of_a_service_shows_an_internal_repr(apps, service, payload) -> None:
    client = TestClient(apps[service], headers=IDENTITY)
    for method, path in json_operations(apps[service]):
        response = client.request(method, path, json=payload)
        assert 400 <= response.status_code < 500, (method, path, response.text)
        assert not REPR.search(response.text), (method, path, response.text)


def _template(app: FastAPI, filled: str) -> str:
    for path in app.openapi()["paths"]:
        if re.sub(r"\{[^}]+\}", "0", path) == filled:
            return path
    raise KeyError(filled)
