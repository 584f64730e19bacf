"""Consume the generator's ``POST /v1/generate/stream`` (Server-Sent Events).

The contract: any number of ``event: token`` with data ``{"text": "..."}`` (answer text deltas),
then exactly one ``event: final`` whose data is a :class:`GenerateResponse` (authoritative: the
generator's verification may have changed the answer or abstained after the tokens went out), or,
when the LLM fails, one ``event: error`` with data ``{"error": "...", "status": 503|504}`` and the
end of the stream. Every failure becomes a :class:`DownstreamError` of stage ``generator``, the
same as the non-streaming call, so the gateway maps it to the same status.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
from httpx_sse import SSEError, aconnect_sse
from pydantic import ValidationError

from rag_common.http import DownstreamError
from rag_common.schemas import GenerateRequest, GenerateResponse

STAGE = "generator"
PATH = "/v1/generate/stream"


@dataclass(frozen=True)
class Token:
    text: str


class GeneratorStreamClient:
    """A pooled client for the stream endpoint. ``timeout_s`` bounds the wait for each event."""

    def __init__(self, base_url: str, timeout_s: float, *, connect_timeout_s: float = 2.0, max_connections: int = 50):
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def stream(self, request: GenerateRequest) -> AsyncIterator[Token | GenerateResponse]:
        """Yield each :class:`Token`, then the final :class:`GenerateResponse`; raise on any failure."""
        try:
            async with aconnect_sse(self._client, "POST", PATH, json=request.model_dump(mode="json")) as source:
                response = source.response
                if response.status_code != 200:
                    await response.aread()
                    raise _status_error(response)
                async for sse in source.aiter_sse():
                    if sse.event == "token":
                        yield Token(_json(sse.data, "token").get("text", ""))
                    elif sse.event == "final":
                        try:
                            yield GenerateResponse.model_validate_json(sse.data)
                        except ValidationError as exc:
                            raise DownstreamError(
                                STAGE, "bad_response", f"final event is not a GenerateResponse: {exc.error_count()} errors"
                            ) from exc
                        return
                    elif sse.event == "error":
                        body = _json(sse.data, "error")
                        status = body.get("status")
                        kind = "timeout" if status == 504 else "unavailable"
                        raise DownstreamError(STAGE, kind, str(body.get("error", "generation failed")), status)
                    # Other event names (and keep-alive comments, which never reach here) are ignored.
        except httpx.TimeoutException as exc:
            raise DownstreamError(STAGE, "timeout", f"no event from {self.base_url}{PATH} in time") from exc
        except httpx.TransportError as exc:
            raise DownstreamError(STAGE, "unavailable", f"cannot reach {self.base_url}{PATH}: {type(exc).__name__}") from exc
        except SSEError as exc:
            raise DownstreamError(STAGE, "bad_response", str(exc)) from exc
        raise DownstreamError(STAGE, "bad_response", "the stream ended without a final event")


def _json(data: str, event: str) -> dict:
    try:
        value = json.loads(data)
    except ValueError as exc:
        raise DownstreamError(STAGE, "bad_response", f"{event} event data is not JSON") from exc
    if not isinstance(value, dict):
        raise DownstreamError(STAGE, "bad_response", f"{event} event data is not a JSON object")
    return value


def _status_error(response: httpx.Response) -> DownstreamError:
    try:
        body = response.json()
        text = str(body["error"]) if isinstance(body, dict) and "error" in body else str(body)[:300]
    except ValueError:
        text = response.text[:300]
    code = response.status_code
    if 400 <= code < 500:
        return DownstreamError(STAGE, "rejected", text, code)
    if code == 504:
        return DownstreamError(STAGE, "timeout", f"HTTP 504: {text}", code)
    return DownstreamError(STAGE, "unavailable", f"HTTP {code}: {text}", code)
