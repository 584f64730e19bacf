"""The internal services answer only the gateway (issue 13): a stack started as `make run` starts it
draws a service credential, and reaching the retriever's port does not bypass the gateway."""

from __future__ import annotations

import httpx
import pytest

from rag_common.identity import Identity, identity_headers
from ragctl.keys import create_local_admin_key

from .conftest import AuthenticatedStack

pytestmark = pytest.mark.e2e

INTERNAL_CALLS = {
    "retriever": ("POST", "/v1/search", {"query": "Zorblax"}),
    "reranker": ("POST", "/v1/rerank", {"query": "q", "passages": []}),
    "refiner": ("POST", "/v1/refine", {"message": "hello"}),
    "generator": ("POST", "/v1/generate", {"query": "q", "passages": []}),
}


def test_internal_services_refuse_calls_without_the_service_credential(authenticated_stack: AuthenticatedStack) -> None:
    urls, token = authenticated_stack.urls, authenticated_stack.service_token
    assert len(token) >= 32
    for service, (method, path, body) in INTERNAL_CALLS.items():
        for headers in ({}, {"X-RAG-Service-Token": "wrong"}):
            response = httpx.request(method, f"{urls[service]}{path}", json=body, headers=headers, timeout=60)
            assert response.status_code == 401, (service, headers, response.text)
            assert "X-RAG-Service-Token" in response.json()["error"]
        # With the credential the call is served (the retriever also needs the caller's identity).
        headers = {"X-RAG-Service-Token": token, **identity_headers(Identity(tenant="default", user="probe", scopes=["chat"]))}
        allowed = httpx.request(method, f"{urls[service]}{path}", json=body, headers=headers, timeout=120)
        assert allowed.status_code == 200, (service, allowed.text)
        assert httpx.get(f"{urls[service]}/readyz", timeout=30).status_code == 200  # probes stay open
        document = httpx.get(f"{urls[service]}/openapi.json", timeout=30).json()
        assert document["components"]["securitySchemes"]["ServiceToken"]["name"] == "X-RAG-Service-Token"


def test_the_gateway_holds_the_credential_so_a_chat_works_end_to_end(
    authenticated_stack: AuthenticatedStack, redis_url: str
) -> None:
    urls = authenticated_stack.urls
    key = create_local_admin_key(redis_url)
    response = httpx.post(
        f"{urls['gateway']}/v1/chat",
        json={"message": "Where is Zorblax Aerospace headquartered?"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=600,
    )
    assert response.status_code == 200, response.text
    assert response.json()["degraded"] == []  # every internal call was accepted
