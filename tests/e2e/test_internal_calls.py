"""The internal services answer only the gateway (issue 13): a stack started as `make run` starts it
draws a service credential, and reaching the retriever's port does not bypass the gateway."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from rag_common.identity import Identity, identity_headers
from ragctl.keys import create_local_admin_key
from ragctl.stack import SERVICES, Stack, free_port, start_services

from .conftest import SLOW_MACHINE_TIMEOUTS

pytestmark = pytest.mark.e2e

INTERNAL_CALLS = {
    "retriever": ("POST", "/v1/search", {"query": "Zorblax"}),
    "reranker": ("POST", "/v1/rerank", {"query": "q", "passages": []}),
    "refiner": ("POST", "/v1/refine", {"message": "hello"}),
    "generator": ("POST", "/v1/generate", {"query": "q", "passages": []}),
}


@pytest.fixture(scope="module")
def guarded_stack(tmp_path_factory, redis_url: str, llm_base_url: str) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    stack = Stack()
    ports = {name: free_port() for name in SERVICES}
    try:
        env = start_services(ports, tmp_path_factory.mktemp("guarded"), redis_url, llm_base_url, stack, SLOW_MACHINE_TIMEOUTS)
        yield {p.name: p.url for p in stack.processes}, env
    finally:
        stack.stop()


def test_internal_services_refuse_calls_without_the_service_credential(guarded_stack) -> None:
    urls, env = guarded_stack
    token = env["RAG_SERVICE_TOKEN"]
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


def test_the_gateway_holds_the_credential_so_a_chat_works_end_to_end(guarded_stack, redis_url: str) -> None:
    urls, _ = guarded_stack
    key = create_local_admin_key(redis_url)
    response = httpx.post(
        f"{urls['gateway']}/v1/chat",
        json={"message": "Where is Zorblax Aerospace headquartered?"},
        headers={"Authorization": f"Bearer {key}"},
        timeout=600,
    )
    assert response.status_code == 200, response.text
    assert response.json()["degraded"] == []  # every internal call was accepted
