"""Every route that returns or changes document data declares its access check (issue 29), and the
leak test exercises every route that declares one.

Read from the OpenAPI documents of the gateway and the retriever (built as tests/test_openapi_documents.py
builds them: creating an app opens nothing). A route carries document data when its success response
(transitively, through ``$ref``s, arrays, maps and unions) has a field that is document data
(``DOCUMENT_FIELDS``: ids, titles, sources, hashes, texts, quotes, passages, citations, duplicates,
readers), when its request names documents (a ``doc_id``/``chunk_id`` path parameter, or a body field
in ``REQUEST_DOCUMENT_FIELDS``), or when its response cannot be judged from its schema (an object
without declared properties, a Server-Sent Event stream whose events' ``data`` is a string): such a
route must say what it returns in its operation, or be in ``NO_DOCUMENT_DATA`` with the reason.

The declaration is the operation's ``x-rag-document-access`` extension (FastAPI:
``openapi_extra={"x-rag-document-access": "..."}`` on the route), one of ``ACCESS_CHECKS``.
``tests/e2e/test_access_leaks.py`` lists the routes it exercises in ``DOCUMENT_ROUTES`` with the check
each must declare (and fails its run when one of them was not called): the declared routes and that
list must be the same, with the same checks.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from fastapi import FastAPI
from pydantic import BaseModel

from rag_common.schemas import DocumentInfo, DocumentList
from rag_gateway.app import create_app as create_gateway
from rag_retriever.app import create_app as create_retriever

from e2e.test_access_leaks import DOCUMENT_ROUTES
from gateway.support import gateway_settings

#: The OpenAPI extension a route declares its access check in.
ACCESS_EXTENSION = "x-rag-document-access"
#: What a declaration may say. Two rules, both in rag_retriever/document_access.py.
ACCESS_CHECKS: dict[str, str] = {
    "caller-acl": "only documents the caller's own principals may read (tenant + ACL, applied inside the "
    "search or when a stored answer or source is shown); the admin scope gets nothing more",
    "document-access": "only documents the caller may read, all of its own tenant with the admin scope; a "
    "write to a document it may not read is a 403 and writes nothing",
}
#: Field names that are document data wherever they appear in a response.
DOCUMENT_FIELDS = frozenset({
    "doc_id", "doc_ids", "chunk_id", "title", "source", "content_hash", "text", "quote", "passages",
    "citations", "duplicates", "duplicate_of", "readers", "acl", "documents",
})
#: Field names that name or carry documents in a request (``text`` is not one: chat messages have it).
REQUEST_DOCUMENT_FIELDS = frozenset({"doc_id", "doc_ids", "chunk_id", "content_hash", "readers", "acl", "documents"})
#: Path parameters that name a document or a chunk.
DOCUMENT_PARAMETERS = frozenset({"doc_id", "chunk_id"})
#: (schema, field) pairs whose name matches but that are not document data, with the reason.
NOT_DOCUMENT_DATA: dict[tuple[str, str], str] = {
    ("ConversationSummary", "title"): "a conversation's title is its first question: the caller's own words",
}
#: Routes whose response the schema cannot describe (or that carry no document field) known to hold no
#: document data, with the reason. An entry whose route starts carrying a document field fails the audit.
NO_DOCUMENT_DATA: dict[tuple[str, str], str] = {
    ("gateway", "GET /v1/models"): "the configured model id, nothing of the index",
    ("gateway", "GET /healthz"): "liveness probe: {status: ok}",
    ("retriever", "GET /healthz"): "liveness probe: {status: ok}",
}


@dataclass
class RouteData:
    service: str
    route: str  # "METHOD /path"
    operation: dict[str, Any]
    #: Where document data is: "Schema.field" (response), "request Schema.field", "path parameter x".
    found: set[str] = field(default_factory=set)
    #: Parts of the success response the schema does not describe.
    opaque: set[str] = field(default_factory=set)

    @property
    def key(self) -> tuple[str, str]:
        return (self.service, self.route)

    @property
    def declared(self) -> Any:
        return self.operation.get(ACCESS_EXTENSION)


#: Keys that say what shape a JSON Schema admits; a schema with none of them admits anything.
_SHAPES = frozenset({"type", "$ref", "anyOf", "oneOf", "allOf", "properties", "items", "prefixItems", "enum", "const", "not"})


class _Walker:
    """Walks a schema of one OpenAPI document through ``$ref``s, collecting document fields and
    the places where the schema admits any JSON."""

    def __init__(self, document: dict[str, Any], names: frozenset[str]) -> None:
        self._schemas = document.get("components", {}).get("schemas", {})
        self._names = names
        self.found: set[str] = set()
        self.opaque: set[str] = set()
        self._seen: set[str] = set()

    def walk(self, schema: Any, owner: str) -> None:
        if schema is True or schema == {}:
            self.opaque.add(owner)
            return
        if not isinstance(schema, dict):
            return
        if not _SHAPES & set(schema):  # e.g. {"title": "Detail"}: pydantic's Any
            self.opaque.add(owner)
            return
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in self._seen:
                self._seen.add(name)
                self.walk(self._schemas[name], name)
            return
        for union in ("anyOf", "oneOf", "allOf"):
            for part in schema.get(union, []):
                self.walk(part, owner)
        properties = schema.get("properties", {})
        for name, sub in properties.items():
            if name in self._names and (owner, name) not in NOT_DOCUMENT_DATA:
                self.found.add(f"{owner}.{name}")
            self.walk(sub, f"{owner}.{name}" if "$ref" not in sub else owner)
        extra = schema.get("additionalProperties")
        is_object = schema.get("type") == "object" or "properties" in schema
        if is_object and not properties and extra in (None, True, {}):
            self.opaque.add(owner)  # any keys, any values
        elif isinstance(extra, dict) and extra:
            self.walk(extra, owner)
        elif extra is True:
            self.opaque.add(owner)
        if "items" in schema:
            self.walk(schema["items"], owner)
        for item in schema.get("prefixItems", []):
            self.walk(item, owner)


def routes(service: str, app: FastAPI) -> Iterator[RouteData]:
    document = app.openapi()
    for path, item in document["paths"].items():
        for method, operation in item.items():
            route = RouteData(service, f"{method.upper()} {path}", operation)
            responses = _Walker(document, DOCUMENT_FIELDS)
            for code, response in operation.get("responses", {}).items():
                if not code.startswith("2"):
                    continue
                for media_type, content in response.get("content", {}).items():
                    if "itemSchema" in content:  # a stream: each event's data is a string of JSON
                        route.opaque.add(f"{media_type} events")
                    responses.walk(content.get("schema"), f"{code} {media_type}")
            requests = _Walker(document, REQUEST_DOCUMENT_FIELDS)
            for content in operation.get("requestBody", {}).get("content", {}).values():
                requests.walk(content.get("schema"), "body")
            route.found = responses.found | {f"request {found}" for found in requests.found} | {
                f"path parameter {p['name']}" for p in operation.get("parameters", [])
                if p.get("in") == "path" and p["name"] in DOCUMENT_PARAMETERS
            }
            route.opaque |= responses.opaque
            yield route


def audit(apps: dict[str, FastAPI]) -> list[str]:
    """What is wrong with the apps' declarations, one line each (empty: nothing)."""
    problems = []
    all_routes = [route for service, app in apps.items() for route in routes(service, app)]
    known = {route.key for route in all_routes}
    for route in all_routes:
        declared = route.declared
        if route.key in NO_DOCUMENT_DATA:
            if route.found:
                problems.append(f"{route.service} {route.route} is listed as carrying no document data but has {sorted(route.found)}")
            continue
        needs = bool(route.found or route.opaque)
        if declared is None:
            if needs:
                why = sorted(route.found) or [f"undescribed response: {sorted(route.opaque)}"]
                problems.append(f"{route.service} {route.route} carries document data ({', '.join(why)}) "
                                f"and declares no {ACCESS_EXTENSION}")
            continue
        if declared not in ACCESS_CHECKS:
            problems.append(f"{route.service} {route.route} declares {ACCESS_EXTENSION}={declared!r}, not one of {sorted(ACCESS_CHECKS)}")
        elif route.key not in DOCUMENT_ROUTES:
            problems.append(f"{route.service} {route.route} declares {declared!r} but the leak test "
                            "(tests/e2e/test_access_leaks.py DOCUMENT_ROUTES) does not exercise it")
        elif DOCUMENT_ROUTES[route.key] != declared:
            problems.append(f"{route.service} {route.route} declares {declared!r}; the leak test checks it as "
                            f"{DOCUMENT_ROUTES[route.key]!r}")
    for key in sorted(set(DOCUMENT_ROUTES) - known):
        problems.append(f"the leak test lists {key[0]} {key[1]}, which is not a route of the {key[0]}")
    for key in sorted(set(NO_DOCUMENT_DATA) - known):
        problems.append(f"NO_DOCUMENT_DATA lists {key[0]} {key[1]}, which is not a route")
    return problems


def _build_apps(tmp_path_factory) -> dict[str, FastAPI]:
    from rag_retriever.settings import RetrieverSettings

    data = tmp_path_factory.mktemp("document-routes")
    return {
        "gateway": create_gateway(gateway_settings("redis://127.0.0.1:1", "http://127.0.0.1:1")),
        "retriever": create_retriever(RetrieverSettings(data_dir=data)),
    }


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, FastAPI]:
    return _build_apps(tmp_path_factory)


def test_the_audit_finds_the_routes_that_return_document_data(apps) -> None:
    """The detector is not blind: the routes known to return document data are found by their schemas,
    and routes known to hold none are not."""
    found = {route.key: route for service, app in apps.items() for route in routes(service, app)}
    for key, where in [
        (("gateway", "GET /v1/documents"), "DocumentInfo.content_hash"),
        (("gateway", "POST /v1/documents"), "DuplicateContent.duplicate_of"),
        (("gateway", "POST /v1/chat"), "Citation.quote"),
        (("gateway", "GET /v1/conversations/{conversation_id}"), "Citation.chunk_id"),
        (("gateway", "GET /v1/conversations/{conversation_id}/sources/{chunk_id}"), "SourceChunk.text"),
        (("gateway", "DELETE /v1/documents/{doc_id}"), "path parameter doc_id"),
        (("retriever", "POST /v1/search"), "Passage.text"),
        (("retriever", "POST /v1/documents/upload"), "request Body_upload_v1_documents_upload_post.acl"),
    ]:
        assert where in found[key].found, (key, sorted(found[key].found))
    for key in [("gateway", "POST /v1/chat/stream"), ("gateway", "POST /v1/chat/completions")]:
        assert found[key].opaque, key  # streams and the OpenAI body are not described field by field
    for key in [
        ("gateway", "GET /v1/conversations"),
        ("gateway", "POST /v1/conversations/{conversation_id}/turns/{turn_index}/feedback"),
        ("gateway", "DELETE /v1/conversations/{conversation_id}"),
        ("gateway", "GET /v1/auth/config"),
        ("gateway", "GET /readyz"),
        ("retriever", "GET /readyz"),
    ]:
        assert not found[key].found and not found[key].opaque, (key, found[key].found, found[key].opaque)


def test_every_route_with_document_data_declares_its_access_check_and_is_leak_tested(apps) -> None:
    assert audit(apps) == []


def test_the_leak_test_covers_every_document_route_with_a_known_check() -> None:
    assert set(DOCUMENT_ROUTES.values()) <= set(ACCESS_CHECKS)
    assert {service for service, _ in DOCUMENT_ROUTES} == {"gateway", "retriever"}


class _Peek(BaseModel):
    doc_id: str
    title: str


def test_an_undeclared_route_with_document_data_fails_the_audit(tmp_path_factory) -> None:
    """Routes added here to fresh apps, as a developer might add them: each undeclared one is named."""
    apps = _build_apps(tmp_path_factory)
    gateway, retriever = apps["gateway"], apps["retriever"]

    @gateway.get("/v1/documents/{doc_id:path}/peek", response_model=DocumentInfo)
    async def peek(doc_id: str) -> DocumentInfo:  # returns a document's data, declares nothing
        raise NotImplementedError

    @gateway.get("/v1/library", response_model=dict[str, list[DocumentList]])
    async def library() -> dict:  # document data nested in a map of lists
        raise NotImplementedError

    @gateway.get("/v1/anything")
    async def anything() -> dict:  # an undescribed object: could hold anything
        raise NotImplementedError

    @retriever.put("/v1/documents/{doc_id:path}/acl", status_code=204)
    async def set_acl(doc_id: str) -> None:  # changes a document, returns nothing
        raise NotImplementedError

    @retriever.get("/v1/peek", response_model=_Peek, openapi_extra={ACCESS_EXTENSION: "document-access"})
    async def declared_but_untested() -> _Peek:
        raise NotImplementedError

    @retriever.get("/v1/peek2", response_model=_Peek, openapi_extra={ACCESS_EXTENSION: "trust me"})
    async def declared_nonsense() -> _Peek:
        raise NotImplementedError

    problems = audit(apps)
    for route, fragment in [
        ("gateway GET /v1/documents/{doc_id}/peek ", "declares no x-rag-document-access"),
        ("gateway GET /v1/library ", "DocumentInfo.doc_id"),
        ("gateway GET /v1/anything ", "undescribed response"),
        ("retriever PUT /v1/documents/{doc_id}/acl ", "path parameter doc_id"),
        ("retriever GET /v1/peek ", "does not exercise it"),
        ("retriever GET /v1/peek2 ", "not one of"),
    ]:
        assert any(p.startswith(route) and fragment in p for p in problems), (route, problems)
