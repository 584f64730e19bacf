"""Which structured-output method to ask the endpoint for, and when to fall back.

``json_schema`` (``response_format``) is preferred: a grammar-constrained endpoint cannot write
anything outside the schema. An endpoint that refuses it answers HTTP 400 (some 422) naming
``response_format`` / ``json_schema`` (OpenAI: "'response_format' of type 'json_schema' is not
supported with this model"; llama.cpp: "... JSON schema error at ..."); the generator then retries
that request, and every later one, with ``function_calling`` (the same schema as a forced tool).
"""

from __future__ import annotations

from typing import Any, Literal

import openai

StructuredMethod = Literal["json_schema", "function_calling"]

_REJECTION_STATUS = (400, 422)
_REJECTION_HINTS = ("response_format", "json_schema", "json schema", "structured output")


def rejects_json_schema(exc: BaseException) -> bool:
    """Whether ``exc`` is the endpoint refusing a ``json_schema`` response format (not an outage)."""
    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in _REJECTION_STATUS:
        return False
    text = f"{exc.message} {exc.body}".lower()
    return any(hint in text for hint in _REJECTION_HINTS)


def function_schema(response_format_schema: dict[str, Any]) -> dict[str, Any]:
    """The ``{"name", "schema"}`` response-format schema as an OpenAI function (tool) definition."""
    return {
        "name": response_format_schema["name"],
        "description": "Reply with the answer as claims, each citing the ids of the sentences that say it.",
        "parameters": response_format_schema["schema"],
    }
