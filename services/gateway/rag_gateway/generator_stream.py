"""Read the generator's ``POST /v1/generate/stream`` (Server-Sent Events) as tokens and a final answer.

The contract: any number of ``event: token`` with data ``{"text": "..."}`` (answer text deltas),
then exactly one ``event: final`` whose data is a :class:`GenerateResponse` (authoritative: the
generator's verification may have changed the answer or abstained after the tokens went out), or,
when the LLM fails, one ``event: error`` with data ``{"error": "...", "status": 503|504}`` and the
end of the stream. Transport and status failures are the shared client's
(``ServiceClient.stream_sse``); this module only gives the events their meaning, and every failure
is a :class:`DependencyFailed` of stage ``generator``, as for the non-streaming call.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

from pydantic import ValidationError

from rag_common.errors import DependencyFailed
from rag_common.http import ServiceClient
from rag_common.schemas import GenerateRequest, GenerateResponse

STAGE = "generator"
PATH = "/v1/generate/stream"


@dataclass(frozen=True)
class Token:
    text: str


async def generation_events(client: ServiceClient, request: GenerateRequest) -> AsyncIterator[Token | GenerateResponse]:
    """Yield each :class:`Token`, then the final :class:`GenerateResponse`; raise on any failure."""
    async for sse in client.stream_sse(PATH, request):
        if sse.event == "token":
            yield Token(_json(sse.data, "token").get("text", ""))
        elif sse.event == "final":
            try:
                yield GenerateResponse.model_validate_json(sse.data)
            except ValidationError as exc:
                raise DependencyFailed(
                    STAGE, "bad_response", f"final event is not a GenerateResponse: {exc.error_count()} errors"
                ) from exc
            return
        elif sse.event == "error":
            body = _json(sse.data, "error")
            status = body.get("status")
            retry_after_s = body.get("retry_after_s")
            if status == 504:
                kind = "timeout"
            elif status == 503 and isinstance(retry_after_s, int | float):
                kind = "overloaded"  # busy, and said when it expects room: the client is told the same
            else:
                kind, retry_after_s = "unavailable", None
            message = str(body.get("error", "generation failed"))
            raise DependencyFailed(STAGE, kind, message, status, retry_after_s=retry_after_s)
        # Other event names (and keep-alive comments, which never reach here) are ignored.
    raise DependencyFailed(STAGE, "bad_response", "the stream ended without a final event")


def _json(data: str, event: str) -> dict:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise DependencyFailed(STAGE, "bad_response", f"{event} event data is not JSON") from exc
    if not isinstance(value, dict):
        raise DependencyFailed(STAGE, "bad_response", f"{event} event data is not a JSON object")
    return value
