"""How every service reads a request body (issue 29), on an app built by ``create_service_app``
with a few routes of each kind, over TestClient: a JSON body only under a JSON media type (415),
no duplicate keys at any depth (400), validation errors without internal reprs, and paths that
match a newline like any other character."""

from __future__ import annotations

import json
import re
from contextlib import asynccontextmanager
from typing import Annotated, Any

import pytest
from fastapi import FastAPI, Form
from fastapi.testclient import TestClient
from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from rag_common.errors import MalformedBody
from rag_common.request_bodies import (
    is_json_media_type,
    parse_json_body,
    problems_summary,
    validation_problems,
    without_reprs,
)
from rag_common.schemas import DocumentId
from rag_common.service import create_service_app

#: What no error body may hold: a memory address, a function's or a class's repr.
REPR = re.compile(r" at 0x[0-9a-fA-F]+|<function |<class |<bound method | object at ")


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("blank")
    return text


class Part(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    type: str
    text: str


class Item(BaseModel):
    """A union whose first member pydantic names by its validators (as ``openai_compat``'s content)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    content: Annotated[str, AfterValidator(_not_blank), Field(min_length=1)] | Annotated[list[Part], Field(min_length=1)]
    tags: dict[str, Any] = Field(default_factory=dict)


class _Runtime:
    async def readiness(self) -> dict[str, str]:
        return {"test": "ok"}


@asynccontextmanager
async def _open_runtime():
    yield _Runtime()


def build_app() -> FastAPI:
    app = create_service_app("bodies", _open_runtime, internal=False)

    @app.post("/items")
    async def create_item(body: Item) -> dict:
        return body.model_dump()

    @app.post("/optional")
    async def optional_body(body: Item | None = None) -> dict:
        return {"body": None if body is None else body.model_dump()}

    @app.post("/form")
    async def form(name: Annotated[str, Form()]) -> dict:
        return {"name": name}

    @app.delete("/documents/{doc_id:path}")
    async def delete(doc_id: DocumentId) -> dict:
        return {"doc_id": doc_id}

    @app.get("/echo/{rest:path}")
    async def echo(rest: str) -> dict:
        return {"rest": rest}

    return app


@pytest.fixture(scope="module")
def client():
    with TestClient(build_app()) as test_client:
        yield test_client


ITEM = b'{"content": "hello", "tags": {"a": 1}}'


# --------------------------------------------------------------------------- 415: the content type


@pytest.mark.parametrize(
    "headers",
    [
        {"content-type": "text/plain"},  # a cross-site form can send this without a preflight
        {"content-type": "text/plain; charset=utf-8"},
        {"content-type": "application/x-www-form-urlencoded"},
        {"content-type": "multipart/form-data; boundary=x"},
        {"content-type": "application/jsonx"},
        {"content-type": "json"},
        {},  # no Content-Type at all
    ],
)
def test_a_json_body_under_another_content_type_is_a_415(client, headers) -> None:
    response = client.post("/items", content=ITEM, headers=headers)
    assert response.status_code == 415, response.text
    body = response.json()
    assert "application/json" in body["error"]
    if headers:
        assert headers["content-type"] in body["error"]
    else:
        assert "no Content-Type" in body["error"]


def test_a_required_json_body_that_is_missing_without_a_content_type_is_a_415(client) -> None:
    assert client.post("/items").status_code == 415


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "Application/JSON", "application/merge-patch+json"],
)
def test_json_media_types_are_read(client, content_type) -> None:
    response = client.post("/items", content=ITEM, headers={"content-type": content_type})
    assert response.status_code == 200, response.text
    assert response.json() == {"content": "hello", "tags": {"a": 1}}


def test_an_optional_body_may_be_left_out_without_a_content_type(client) -> None:
    assert client.post("/optional").json() == {"body": None}
    assert client.post("/optional", content=ITEM, headers={"content-type": "text/plain"}).status_code == 415


def test_a_form_route_reads_its_form_as_before(client) -> None:
    assert client.post("/form", data={"name": "x"}).json() == {"name": "x"}
    assert client.post("/form", files={"name": (None, b"y")}).json() == {"name": "y"}


def test_the_openapi_document_declares_the_415_of_a_json_body(client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert "415" in paths["/items"]["post"]["responses"]
    assert "415" in paths["/optional"]["post"]["responses"]
    assert "415" not in paths["/form"]["post"]["responses"]


# --------------------------------------------------------------------------- 400: duplicate keys


@pytest.mark.parametrize(
    ("body", "key"),
    [
        (b'{"content": "a", "content": "b"}', "content"),
        (b'{"content": "a", "tags": {"x": 1, "y": {"z": [{"acl": {"g": 1}, "acl": null}]}}}', "acl"),
        (b'{"content": [{"type": "text", "text": "a", "text": ""}]}', "text"),
    ],
)
def test_a_key_given_twice_at_any_depth_is_a_400_naming_it(client, body, key) -> None:
    response = client.post("/items", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 400, response.text
    assert response.json()["error"].startswith(f"duplicate key '{key}' in the JSON body")


def test_the_same_key_in_different_objects_is_fine(client) -> None:
    body = b'{"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "tags": {"type": 1}}'
    assert client.post("/items", content=body, headers={"content-type": "application/json"}).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "fragment"),
    [
        (b'{"content": ', 422, "JSON decode error"),  # as FastAPI words it
        (b'{"content": "\xff"}', 400, "not UTF-8"),
        (b"[" * 100_000, 400, "nested too deeply"),
        (b'{"content": "a", "tags": {"n": ' + b"9" * 5000 + b"}}", 400, "too many digits"),
    ],
)
def test_an_unreadable_body_is_a_4xx_that_says_why(client, body, status, fragment) -> None:
    response = client.post("/items", content=body, headers={"content-type": "application/json"})
    assert response.status_code == status, response.text
    assert fragment in response.text


def test_parse_json_body_keeps_the_values_and_refuses_duplicates() -> None:
    assert parse_json_body(b'{"a": [{"b": 1}, {"b": 2}], "c": {"a": null}}') == {"a": [{"b": 1}, {"b": 2}], "c": {"a": None}}
    with pytest.raises(MalformedBody, match="duplicate key 'b'"):
        parse_json_body('[{"b": 1, "a": 0, "b": 2}]')
    with pytest.raises(json.JSONDecodeError):
        parse_json_body(b"{")


def test_json_media_types() -> None:
    assert is_json_media_type("application/json; charset=utf-8")
    assert is_json_media_type("application/vnd.api+json")
    assert not is_json_media_type("text/json")
    assert not is_json_media_type(None)


# --------------------------------------------------------------------------- validation errors


@pytest.mark.parametrize(
    "payload",
    [
        {"content": [{"type": "image_url", "image_url": {"url": "x"}}]},
        {"content": 5},
        {"content": ""},
        {"content": [], "tags": []},
        {"content": None, "extra": {"a": 1}},
        [],
    ],
)
def test_a_validation_error_names_location_and_message_and_no_repr(client, payload) -> None:
    response = client.post("/items", json=payload)
    assert response.status_code == 422, response.text
    assert not REPR.search(response.text), response.text
    body = response.json()
    assert body["error"].startswith("invalid request: body")
    assert all(problem["loc"][0] == "body" and problem["msg"] for problem in body["detail"])


def test_a_union_member_named_by_its_validators_is_shown_as_its_type(client) -> None:
    response = client.post("/items", json={"content": [{"type": "image_url"}]})
    locations = [".".join(map(str, problem["loc"])) for problem in response.json()["detail"]]
    assert "body.content.str" in locations
    assert "body.content.list[Part].0.text" in locations


def test_reprs_become_bare_names() -> None:
    def helper() -> None: ...

    class Thing:
        def method(self) -> None: ...

    anonymous = lambda: 0  # noqa: E731
    text = without_reprs(" ".join(map(str, [helper, Thing, Thing(), Thing().method, len, anonymous])))
    assert not REPR.search(text), text
    assert text.split() == ["helper", "Thing", "Thing", "method", "len", "lambda"]


def test_validation_problems_drop_input_and_context() -> None:
    errors = [{"loc": ("body", 0, "function-after[f(), str]"), "msg": "bad <class 'x.Y'>", "type": "t", "input": object(), "ctx": {}}]
    problems = validation_problems(errors)
    assert problems == [{"loc": ["body", 0, "str"], "msg": "bad Y", "type": "t"}]
    assert problems_summary(problems) == "body.0.str: bad Y"


# --------------------------------------------------------------------------- paths


@pytest.mark.parametrize(("encoded", "code"), [("%0A", "000A"), ("abc%0A", "000A"), ("a%0Ab", "000A"), ("%E2%80%8B", "200B")])
def test_a_newline_in_a_path_parameter_is_part_of_it(client, encoded, code) -> None:
    # Before: "%0A" was a 404 (no route matched) and "abc%0A" was the route of "abc".
    response = client.delete(f"/documents/{encoded}")
    assert response.status_code == 422, response.text
    assert f"U+{code}" in response.json()["error"]
    assert client.get(f"/echo/{encoded}").json() == {"rest": encoded.replace("%0A", "\n").replace("%E2%80%8B", "\u200b")}


def test_a_literal_path_with_a_newline_after_it_is_not_that_path(client) -> None:
    assert client.get("/healthz").status_code == 200
    assert client.get("/healthz%0A").status_code == 404
