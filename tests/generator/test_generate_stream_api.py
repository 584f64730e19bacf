"""POST /v1/generate/stream (Server-Sent Events) over HTTP in-process, with the real LLM behind it,
and AnswerGenerator.stream directly (token text against the model's raw reply)."""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
from langchain_core.callbacks import AsyncCallbackHandler
from langchain_core.outputs import LLMResult

from rag_common.llm import build_chat_model
from rag_common.schemas import GenerateRequest, GenerateResponse, Passage
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import ABSTAIN_MESSAGE, AnswerGenerator
from rag_generator.app import create_app, to_server_sent_event
from rag_generator.runtime import build_answer_model
from rag_generator.citation_selection import strip_unbacked_markers
from rag_generator.settings import GeneratorSettings
from rag_generator.stream_events import ErrorEvent, FinalEvent, TokenEvent
from ragctl.in_process import asgi_client

QUESTION = "Who founded Zorblax Aerospace?"


def generator_client(llm_settings: LLMSettings) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return asgi_client(create_app(GeneratorSettings(), llm_settings), "http://generator")


def parse_sse(body: str) -> list[tuple[str, Any]]:
    """(event, decoded data) per event; keep-alive comments skipped."""
    events = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        lines = [line for line in block.split("\n") if line and not line.startswith(":")]
        if not lines:
            continue
        fields: dict[str, list[str]] = {}
        for line in lines:
            name, _, value = line.partition(":")
            fields.setdefault(name, []).append(value.removeprefix(" "))
        events.append((fields["event"][0], json.loads("\n".join(fields["data"]))))
    return events


async def stream_events(client: httpx.AsyncClient, body: dict[str, Any]) -> tuple[httpx.Response, list[tuple[str, Any]]]:
    async with client.stream("POST", "/v1/generate/stream", json=body) as response:
        text = "".join([piece async for piece in response.aiter_text()])
    return response, parse_sse(text)


def request_body(passages: list[Passage], query: str = QUESTION) -> dict[str, Any]:
    return {"query": query, "passages": [p.model_dump() for p in passages]}


async def test_stream_sends_answer_tokens_then_one_verified_final(llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with generator_client(llm_settings) as client:
        response, events = await stream_events(client, request_body(passages))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    names = [name for name, _ in events]
    assert names.count("final") == 1 and names[-1] == "final"
    assert set(names[:-1]) == {"token"}, names
    tokens = [data["text"] for name, data in events if name == "token"]
    assert all(isinstance(text, str) and text for text in tokens)
    streamed = "".join(tokens)
    # Answer text only, never the JSON around it.
    assert not streamed.lstrip().startswith("{") and '"answer"' not in streamed and '"citations"' not in streamed
    final = GenerateResponse.model_validate(events[-1][1])
    if not final.abstained and not final.repaired:
        # The final answer is the streamed text with the markers of dropped citations removed.
        assert final.answer == strip_unbacked_markers(streamed, {c.id for c in final.citations})
    for citation in final.citations:
        assert citation.quote in " ".join(passages[citation.id - 1].text.split())


async def test_dead_llm_is_one_error_event(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with generator_client(dead_llm_settings) as client:
        response, events = await stream_events(client, request_body(passages))
    assert response.status_code == 200  # the stream had started; the failure is reported in-band
    assert [name for name, _ in events] == ["error"]
    error = events[0][1]
    assert error["status"] == 503 and error["error"].startswith("llm unavailable:")
    assert set(error) == {"error", "status"}


async def test_no_passages_is_an_immediate_final_abstention(dead_llm_settings: LLMSettings) -> None:
    # Behind a dead LLM: any model call would end in an error event instead.
    async with generator_client(dead_llm_settings) as client:
        _, events = await stream_events(client, {"query": QUESTION, "passages": []})
    assert events == [
        ("final", {
            "answer": ABSTAIN_MESSAGE, "citations": [], "abstained": True, "abstain_reason": "no_passages",
            "citation_precision": None, "repaired": False,
        })
    ]


async def test_invalid_body_is_a_plain_422(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with generator_client(dead_llm_settings) as client:
        response = await client.post("/v1/generate/stream", json={**request_body(passages), "query": ""})
    assert response.status_code == 422 and "query" in response.json()["error"]


class RawReplies(AsyncCallbackHandler):
    """Every complete model reply text, as the chat model reports it at the end of a call."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    async def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        self.texts.append(response.generations[0][0].text)


async def test_tokens_are_exactly_the_answer_the_model_wrote(llm_settings: LLMSettings, passages: list[Passage]) -> None:
    raw = RawReplies()
    settings = GeneratorSettings()
    model = build_answer_model(llm_settings, settings).model_copy(update={"callbacks": [raw]})
    generator = AnswerGenerator(model, answer_max_chars=settings.answer_max_chars, max_citations=settings.max_citations)
    events = [event async for event in generator.stream(GenerateRequest(query=QUESTION, passages=passages))]
    assert isinstance(events[-1], FinalEvent) and not any(isinstance(e, (FinalEvent, ErrorEvent)) for e in events[:-1])
    assert len(raw.texts) == 1  # one streamed call, no repair: the server's grammar keeps the reply valid JSON
    model_answer = json.loads(raw.texts[0])["answer"]
    assert "".join(e.text for e in events if isinstance(e, TokenEvent)) == model_answer
    assert sum(isinstance(e, TokenEvent) for e in events) >= 1 or model_answer == ""


async def test_hung_llm_stream_is_a_504_error_event(hung_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    generator = AnswerGenerator(build_chat_model(hung_llm_settings), llm_timeout_s=1.0)
    events = [event async for event in generator.stream(GenerateRequest(query=QUESTION, passages=passages))]
    [event] = events
    assert isinstance(event, ErrorEvent) and event.error.message == "llm timed out: no answer within 1s"
    assert to_server_sent_event(event).data == {"error": "llm timed out: no answer within 1s", "status": 504}
