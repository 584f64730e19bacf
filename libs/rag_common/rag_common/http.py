"""Typed JSON calls to another service over a pooled ``httpx.AsyncClient``.

Every failure of a downstream call becomes a :class:`DownstreamError` that names the stage,
so the gateway can answer 503 (unavailable / bad answer) or 504 (timed out) with that name.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

ModelT = TypeVar("ModelT", bound=BaseModel)

FailureKind = Literal["unavailable", "timeout", "bad_response", "rejected"]


class DownstreamError(Exception):
    def __init__(self, stage: str, kind: FailureKind, message: str, status_code: int | None = None):
        super().__init__(f"{stage}: {message}")
        self.stage = stage
        self.kind = kind
        self.message = message
        self.status_code = status_code


class ServiceClient:
    """One pooled client per downstream service, with an explicit timeout."""

    def __init__(
        self,
        stage: str,
        base_url: str,
        timeout_s: float,
        *,
        connect_timeout_s: float = 2.0,
        max_connections: int = 50,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.stage = stage
        self.base_url = base_url.rstrip("/")
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        response_model: type[ModelT],
        *,
        json: BaseModel | None = None,
        **kwargs: Any,
    ) -> ModelT:
        payload = json.model_dump(mode="json") if json is not None else None
        response = await self.raw(method, path, json=payload, **kwargs)
        if 400 <= response.status_code < 500:
            raise DownstreamError(self.stage, "rejected", _error_text(response), response.status_code)
        if response.status_code == 504:
            raise DownstreamError(self.stage, "timeout", f"HTTP 504: {_error_text(response)}", response.status_code)
        if response.status_code >= 500:
            raise DownstreamError(
                self.stage, "unavailable", f"HTTP {response.status_code}: {_error_text(response)}", response.status_code
            )
        try:
            return response_model.model_validate_json(response.content)
        except ValidationError as exc:
            raise DownstreamError(self.stage, "bad_response", f"unexpected response body: {exc.error_count()} errors") from exc

    async def post(self, path: str, body: BaseModel, response_model: type[ModelT], **kwargs: Any) -> ModelT:
        return await self.request("POST", path, response_model, json=body, **kwargs)

    async def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """An unparsed call, for pass-through endpoints; transport errors still become DownstreamError."""
        try:
            return await self._client.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise DownstreamError(self.stage, "timeout", f"no answer from {self.base_url}{path} in time") from exc
        except httpx.TransportError as exc:
            raise DownstreamError(
                self.stage, "unavailable", f"cannot reach {self.base_url}{path}: {type(exc).__name__}"
            ) from exc

    async def is_healthy(self) -> str:
        try:
            response = await self._client.get("/healthz", timeout=2.0)
        except httpx.HTTPError as exc:
            return f"unreachable: {type(exc).__name__}"
        return "ok" if response.status_code == 200 else f"HTTP {response.status_code}"


def _error_text(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])
    return str(body)[:300]
