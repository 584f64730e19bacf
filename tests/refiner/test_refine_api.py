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
            "intent": "rag", "intent_method": "embedding", "hyde_query": None,
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


async def test_refine_route_intent_and_hyde(llm_settings: LLMSettings) -> None:
    async with refiner_client(llm_settings) as client:
        hyde = await client.post("/v1/refine", json={"message": "How does the Zorblax ion drive work?", "hyde": True})
        assert hyde.status_code == 200, hyde.text
        body = hyde.json()
        assert (body["intent"], body["intent_method"], body["method"]) == ("rag", "embedding", "passthrough")
        assert body["hyde_query"].startswith("How does the Zorblax ion drive work?\n")
        assert len(body["hyde_query"]) > len(body["query"]) + 20

        greeting = await client.post(
            "/v1/refine",
            json={
                "message": "Thanks a lot!",
                "hyde": True,
                "history": [{"question": "Where is Zorblax based?", "answer": "Tromsø."}],
            },
        )
        assert greeting.status_code == 200, greeting.text
        body = greeting.json()
        assert (body["intent"], body["intent_method"], body["hyde_query"]) == ("chitchat", "rules", None)
        assert body["query"] == "Thanks a lot!"

        meta = await client.post("/v1/refine", json={"message": "Summarize our conversation"})
        assert meta.json()["intent"] == "meta"

        bad = await client.post("/v1/refine", json={"message": "hi", "hyde": "sometimes"})
        assert bad.status_code == 422


async def test_refine_route_survives_a_dead_llm(dead_llm_settings: LLMSettings) -> None:
    async with refiner_client(dead_llm_settings) as client:
        response = await client.post(
            "/v1/refine",
            json={"message": "book me a hotel in Rome", "hyde": True, "history": [{"question": "q", "answer": "a"}]},
        )
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["intent"], body["intent_method"], body["method"], body["hyde_query"]) == ("rag", "fallback", "fallback", None)
    assert "Connection" in body["detail"]
