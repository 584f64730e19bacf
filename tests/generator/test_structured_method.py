"""When an error means "this endpoint refuses json_schema" (fall back to function calling) and when
it does not; the error decisions are checked on the real llama.cpp server's own 400s."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest
from langchain_openai import ChatOpenAI

from rag_common.settings import LLMSettings
from rag_generator.claim_schema import build_claim_schema
from rag_generator.structured_method import function_schema, rejects_json_schema

from .conftest import unresolvable_claim_schema


async def real_bad_request(llm_settings: LLMSettings, schema: dict[str, Any], prompt: str) -> openai.APIStatusError:
    model = ChatOpenAI(
        base_url=llm_settings.base_url, model=llm_settings.model, api_key="x", max_tokens=5, max_retries=0
    )
    with pytest.raises(openai.APIStatusError) as raised:
        await model.with_structured_output(schema, method="json_schema", include_raw=True).ainvoke(prompt)
    return raised.value


async def test_decision_on_the_real_servers_errors(llm_settings: LLMSettings) -> None:
    refused = await real_bad_request(llm_settings, unresolvable_claim_schema(["1.1"], max_claims=2, claim_max_chars=50), "Hi")
    assert refused.status_code == 400 and rejects_json_schema(refused)
    # Also a 400 from the same server, but about the prompt: not a reason to change method.
    good = build_claim_schema(["1.1"], max_claims=2, claim_max_chars=50)
    too_long = await real_bad_request(llm_settings, good, "word " * 6000)
    assert too_long.status_code == 400 and "context" in too_long.message
    assert not rejects_json_schema(too_long)


def status_error(status: int, message: str, body: object = None) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://llm/v1/chat/completions")
    response = httpx.Response(status, request=request)
    return openai.APIStatusError(message, response=response, body=body if body is not None else {"error": {"message": message}})


@pytest.mark.parametrize(
    ("error", "refusal"),
    [
        (status_error(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."), True),
        (status_error(422, "json_schema response format unsupported"), True),
        (status_error(400, "JSON Schema error at #/properties"), True),
        (status_error(400, "Structured output is not available"), True),
        (status_error(400, "Bad request", body={"error": {"param": "response_format"}}), True),  # named in the body only
        (status_error(500, "'response_format' of type 'json_schema' is not supported"), False),
        (status_error(404, "response_format: model not found"), False),
        (status_error(400, "messages: field required"), False),
        (openai.APIConnectionError(request=httpx.Request("POST", "http://llm/v1")), False),
        (ValueError("response_format"), False),
    ],
)
def test_decision_on_other_errors(error: BaseException, refusal: bool) -> None:
    assert rejects_json_schema(error) is refusal


def test_function_schema_carries_the_same_json_schema() -> None:
    schema = build_claim_schema(["1.1", "2.1"], max_claims=2, claim_max_chars=100)
    tool = function_schema(schema)
    assert set(tool) == {"name", "description", "parameters"}
    assert (tool["name"], tool["parameters"]) == ("grounded_claims", schema["schema"])
    assert tool["description"].strip()
