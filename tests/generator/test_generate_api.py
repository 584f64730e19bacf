"""POST /v1/generate over HTTP (in-process), with the real LLM behind it.

The app runs on the test's own event loop (ASGITransport + lifespan) rather than TestClient's
private loop: langchain-openai shares one cached async HTTP client per endpoint, which must not
cross event loops.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import httpx

from rag_common.schemas import GenerateResponse, Passage
from rag_common.settings import LLMSettings
from rag_generator.app import create_app
from rag_generator.settings import GeneratorSettings
from ragctl.in_process import asgi_client


def generator_client(llm_settings: LLMSettings) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return asgi_client(create_app(GeneratorSettings(), llm_settings), "http://generator")


async def test_generate_route_and_validation(llm_settings: LLMSettings, passages: list[Passage]) -> None:
    body = {"query": "Who founded Zorblax Aerospace?", "passages": [p.model_dump() for p in passages]}
    async with generator_client(llm_settings) as client:
        response = await client.post("/v1/generate", json=body)
        assert response.status_code == 200, response.text
        generated = GenerateResponse.model_validate(response.json())
        assert generated.abstained or {c.chunk_id for c in generated.citations} <= {p.chunk_id for p in passages}

        empty = await client.post("/v1/generate", json={**body, "query": ""})
        assert empty.status_code == 422
        assert "query" in empty.json()["error"]

        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"] == {"llm": "ok"}


async def test_dead_llm_is_a_503_with_a_clear_body(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    body = {"query": "Who founded Zorblax Aerospace?", "passages": [p.model_dump() for p in passages]}
    async with generator_client(dead_llm_settings) as client:
        response = await client.post("/v1/generate", json=body)
    assert response.status_code == 503
    assert response.json()["error"].startswith("llm unavailable:")
