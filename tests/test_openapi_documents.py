"""What the services' OpenAPI documents say about errors, bodies and types (issue 12, defect 4),
checked on the documents themselves; tests/fuzz runs schemathesis against the live services."""

from __future__ import annotations

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from pydantic import ValidationError

from rag_common.schemas import GmmrSpec, RerankRequest, SearchRequest
from rag_gateway.chat_models import ChatRequest
from rag_gateway.openai_compat import ChatCompletionRequest

from service_apps import build_service_apps


@pytest.fixture(scope="module")
def apps(tmp_path_factory) -> dict[str, FastAPI]:
    return build_service_apps(tmp_path_factory.mktemp("openapi"))


def _operations(app: FastAPI):
    for path, item in app.openapi()["paths"].items():
        for method, operation in item.items():
            yield f"{method.upper()} {path}", operation


def test_every_error_response_is_an_error_body_in_json_even_on_streaming_routes(apps) -> None:
    seen = 0
    for app in apps.values():
        for name, operation in _operations(app):
            for code, response in operation["responses"].items():
                if int(code) >= 400 and name != "GET /readyz":
                    assert response["content"] == {
                        "application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}
                    }, (name, code)
                    seen += 1
    assert seen > 30
    stream = apps["gateway"].openapi()["paths"]["/v1/chat/stream"]["post"]["responses"]
    assert {"404", "422", "503", "504", "400"} <= set(stream)


def test_every_operation_with_a_body_declares_the_400_of_an_unparseable_one(apps) -> None:
    for app in apps.values():
        for name, operation in _operations(app):
            assert ("400" in operation["responses"]) == ("requestBody" in operation), name


def test_not_found_is_declared_where_it_can_happen(apps) -> None:
    paths = apps["gateway"].openapi()["paths"]
    for path, method in [
        ("/v1/chat", "post"),
        ("/v1/chat/stream", "post"),
        ("/v1/conversations/{conversation_id}", "get"),
        ("/v1/conversations/{conversation_id}", "delete"),
        ("/v1/documents/{doc_id}", "delete"),
    ]:
        assert "404" in paths[path][method]["responses"], (method, path)
    assert "404" in apps["retriever"].openapi()["paths"]["/v1/documents/{doc_id}"]["delete"]["responses"]


def test_gateway_ingestion_declares_both_of_its_bodies(apps) -> None:
    document = apps["gateway"].openapi()
    body = document["paths"]["/v1/documents"]["post"]["requestBody"]
    assert body["required"] is True
    assert body["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/IngestRequest"}
    assert body["content"]["multipart/form-data"]["schema"]["properties"]["files"]["minItems"] == 1
    assert "DocumentIn" in document["components"]["schemas"] and "IngestRequest" in document["components"]["schemas"]


def test_a_405_lists_every_method_of_the_resource(apps) -> None:
    client = TestClient(apps["gateway"])  # no lifespan: routing answers before any handler runs
    response = client.request("OPTIONS", "/v1/documents")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
    response = client.request("PUT", "/v1/conversations/abc")
    assert response.headers["allow"] == "DELETE, GET"
    retriever = TestClient(apps["retriever"])
    # A literal path is its own resource, not a document id matched by {doc_id:path}.
    assert retriever.request("GET", "/v1/documents/upload").headers["allow"] == "POST"


@pytest.mark.parametrize(
    ("model", "fields", "fragment"),
    [
        (SearchRequest, {"query": "q", "include_embeddings": 0}, "valid boolean"),
        (SearchRequest, {"query": "q", "top_k": "5"}, "valid integer"),
        (SearchRequest, {"query": "q", "top_k": True}, "valid integer"),
        (RerankRequest, {"query": "q", "passages": [], "query_embedding": [False]}, "valid number"),
        (ChatRequest, {"message": "q", "hyde": "yes"}, "valid boolean"),
        (ChatCompletionRequest, {"model": "m", "messages": [{"role": "user", "content": "q"}], "stream": 1}, "boolean"),
        (GmmrSpec, {"mmr_lambda": 1.5}, "less than or equal to 1"),
    ],
)
def test_json_types_are_taken_as_the_schema_says(model, fields, fragment) -> None:
    with pytest.raises(ValidationError, match=fragment):
        model.model_validate(fields)


def test_an_integral_number_is_an_integer_as_in_json_schema() -> None:
    assert SearchRequest.model_validate({"query": "q", "top_k": 5.0}).top_k == 5
    with pytest.raises(ValidationError):
        SearchRequest.model_validate({"query": "q", "top_k": 5.5})


def test_the_stage_discriminator_is_required_on_the_wire() -> None:
    schema = RerankRequest.model_json_schema()["$defs"]
    for stage in ("CrossEncoderSpec", "DiffusionSpec", "GmmrSpec"):
        assert schema[stage]["required"][0] == "name"
