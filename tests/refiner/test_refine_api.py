"""POST /v1/refine over HTTP (in-process), with the real LLM behind it.

The app runs on the test's own event loop (ASGITransport + lifespan) rather than TestClient's
private loop: langchain-openai shares one cached async HTTP client per endpoint, which must not
cross event loops.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

import httpx

from rag_common.settings import LLMSettings
from rag_refiner.app import create_app
from rag_refiner.settings import RefinerSettings
from ragctl.in_process import asgi_client


def refiner_client(llm_settings: LLMSettings) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return asgi_client(create_app(RefinerSettings(), llm_settings), "http://refiner")


async def test_refine_route_and_validation(llm_settings: LLMSettings) -> None:
    async with refiner_client(llm_settings) as client:
        first = await client.post("/v1/refine", json={"message": "What does Acme Robotics build?"})
        assert first.status_code == 200, first.text
        assert first.json() == {
            "query": "What does Acme Robotics build?", "rewritten": False, "method": "passthrough", "detail": "no history",
        }

        follow_up = await client.post(
            "/v1/refine",
            json={
                "message": "Who founded it?",
                "history": [{"question": "Where is Zorblax Aerospace based?", "answer": "In Tromsø, Norway."}],
            },
        )
        assert follow_up.status_code == 200, follow_up.text
        assert follow_up.json()["method"] in ("llm", "context_append")
        assert "Zorblax" in follow_up.json()["query"]

        empty = await client.post("/v1/refine", json={"message": ""})
        assert empty.status_code == 422
        assert "message" in empty.json()["error"]

        ready = await client.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["checks"] == {"llm": "ok"}


async def test_readiness_reports_a_dead_llm(dead_llm_settings: LLMSettings) -> None:
    async with refiner_client(dead_llm_settings) as client:
        response = await client.get("/readyz")
    assert response.status_code == 503
    assert "unreachable" in response.json()["checks"]["llm"]
