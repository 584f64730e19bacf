"""Fallback from json_schema to function_calling when the endpoint refuses the response format.

The llama.cpp test server accepts our schema, so to make it refuse one for real the schema builder
is patched to add a ``$ref`` it cannot resolve: llama.cpp then answers HTTP 400 "JSON schema error"
for ``response_format``, while it ignores ``tools`` (no tool-call template), so the function-calling
retry gets a plain-text reply that goes through validation and repair like any other (kept to
80 tokens here: free text is slow to generate, and a cut-off reply abstains without repair).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI

import rag_generator.answer_generator as answer_generator_module
from rag_common.schemas import GenerateRequest, GenerateResponse, Passage
from rag_common.settings import LLMSettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.answer_schema import build_answer_schema
from rag_generator.stream_events import FinalEvent
from rag_generator.structured_method import function_schema, rejects_json_schema

QUESTION = "Who founded Zorblax Aerospace?"


def unresolvable_schema(*args: Any, **kwargs: Any) -> dict[str, Any]:
    schema = build_answer_schema(*args, **kwargs)
    schema["schema"]["properties"]["answer"] = {"$ref": "#/$defs/missing"}
    return schema


class Recorder:
    """httpx event hooks: what each request asked for and the status it got."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.statuses: list[int] = []

    async def on_request(self, request: httpx.Request) -> None:
        body = json.loads(request.content)
        self.kinds.append("json_schema" if "response_format" in body else "tools" if "tools" in body else "plain")

    async def on_response(self, response: httpx.Response) -> None:
        self.statuses.append(response.status_code)


def recording_model(llm_settings: LLMSettings, recorder: Recorder, max_tokens: int = 80) -> ChatOpenAI:
    client = httpx.AsyncClient(
        timeout=llm_settings.timeout_s,
        event_hooks={"request": [recorder.on_request], "response": [recorder.on_response]},
    )
    return ChatOpenAI(
        base_url=llm_settings.base_url,
        model=llm_settings.model,
        api_key=llm_settings.api_key,
        temperature=0.0,
        max_tokens=max_tokens,
        max_retries=0,
        http_async_client=client,
    )


@pytest.fixture
def refused_schema(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(answer_generator_module, "build_answer_schema", unresolvable_schema)
    yield


async def real_bad_request(llm_settings: LLMSettings, schema: dict[str, Any], prompt: str) -> openai.APIStatusError:
    model = ChatOpenAI(base_url=llm_settings.base_url, model=llm_settings.model, api_key="x", max_tokens=5, max_retries=0)
    with pytest.raises(openai.APIStatusError) as raised:
        await model.with_structured_output(schema, method="json_schema", include_raw=True).ainvoke(prompt)
    return raised.value


async def test_decision_on_the_real_servers_errors(llm_settings: LLMSettings) -> None:
    good_schema = build_answer_schema([1, 2], answer_max_chars=100, max_citations=2)
    refused = await real_bad_request(llm_settings, unresolvable_schema([1, 2], answer_max_chars=100, max_citations=2), "Hi")
    assert refused.status_code == 400 and rejects_json_schema(refused)
    # Also a 400 from the same server, but about the prompt: not a reason to change method.
    too_long = await real_bad_request(llm_settings, good_schema, "word " * 6000)
    assert too_long.status_code == 400 and "context" in too_long.message
    assert not rejects_json_schema(too_long)


def test_decision_on_other_errors() -> None:
    request = httpx.Request("POST", "http://llm/v1/chat/completions")

    def status_error(status: int, message: str) -> openai.APIStatusError:
        response = httpx.Response(status, request=request)
        return openai.APIStatusError(message, response=response, body={"error": {"message": message}})

    openai_refusal = "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."
    assert rejects_json_schema(status_error(400, openai_refusal))
    assert rejects_json_schema(status_error(422, "json_schema response format unsupported"))
    assert not rejects_json_schema(status_error(500, openai_refusal))
    assert not rejects_json_schema(status_error(400, "messages: field required"))
    assert not rejects_json_schema(openai.APIConnectionError(request=request))
    assert not rejects_json_schema(ValueError("response_format"))


def test_function_schema_carries_the_same_json_schema() -> None:
    schema = build_answer_schema([1, 2], answer_max_chars=100, max_citations=2)
    tool = function_schema(schema)
    assert (tool["name"], tool["parameters"]) == ("grounded_answer", schema["schema"])


async def test_refused_json_schema_falls_back_to_function_calling_for_good(
    llm_settings: LLMSettings, passages: list[Passage], refused_schema: None
) -> None:
    recorder = Recorder()
    generator = AnswerGenerator(recording_model(llm_settings, recorder), llm_timeout_s=170.0)
    first = await generator.generate(GenerateRequest(query=QUESTION, passages=passages))
    # One refused json_schema request, then function calling (the answer call, maybe one repair).
    assert recorder.kinds[0] == "json_schema" and recorder.statuses[0] == 400
    assert recorder.kinds[1:] and set(recorder.kinds[1:]) == {"tools"} and len(recorder.kinds) <= 3
    assert set(recorder.statuses[1:]) == {200}
    assert generator.structured_method == "function_calling"
    GenerateResponse.model_validate(first.model_dump())
    for citation in first.citations:
        assert citation.quote in " ".join(passages[citation.id - 1].text.split())

    seen = len(recorder.kinds)
    await generator.generate(GenerateRequest(query=QUESTION, passages=passages))
    assert set(recorder.kinds[seen:]) == {"tools"}  # no second try of json_schema


async def test_streaming_falls_back_too(llm_settings: LLMSettings, passages: list[Passage], refused_schema: None) -> None:
    recorder = Recorder()
    generator = AnswerGenerator(recording_model(llm_settings, recorder), llm_timeout_s=170.0)
    events = [event async for event in generator.stream(GenerateRequest(query=QUESTION, passages=passages))]
    assert isinstance(events[-1], FinalEvent)
    assert recorder.kinds[:2] == ["json_schema", "tools"] and recorder.statuses[:2] == [400, 200]
    assert generator.structured_method == "function_calling"
