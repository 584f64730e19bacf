"""Typed JSON calls, and Server-Sent Event streams, to another service over a pooled ``httpx.AsyncClient``.

Every failure of a downstream call becomes a :class:`~rag_common.errors.DependencyFailed` that
names the stage and says how it failed (``unavailable``, ``timeout``, ``bad_response``,
``rejected``); ``rag_common.service`` turns it into 503 or 504. The status mapping and the pooling
live here once, for plain calls and streams alike.

A call that is safe to repeat (``idempotent=True``: a search, a rerank, a refinement) is retried
when the stage could not be reached at all or answered 502/503 without a ``Retry-After``: the
signs of a process restarting or a connection it dropped. Bounded (:class:`RetryPolicy`: a few
attempts, exponential backoff with full jitter so that many callers do not retry in step, never
starting an attempt after the stage's timeout has passed) and done by tenacity rather than by hand.
A timeout is not retried (the budget is spent), nor a 4xx (the same input gets the same answer),
nor an ``overloaded`` 503 (the stage said when to come back; more calls would only lengthen its
queue), nor anything not marked idempotent: a generation retried could store a turn twice.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
from httpx_sse import ServerSentEvent, SSEError, aconnect_sse
from pydantic import BaseModel, ValidationError
from tenacity import AsyncRetrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_random_exponential

from opentelemetry.instrumentation.utils import suppress_http_instrumentation
from opentelemetry.trace import TracerProvider

from rag_common.errors import DependencyFailed
from rag_common.internal_auth import SERVICE_TOKEN_HEADER
from rag_common.telemetry import instrument_httpx_client

ModelT = TypeVar("ModelT", bound=BaseModel)

logger = logging.getLogger(__name__)

#: The statuses that mean "not there right now" rather than "wrong request" or "bug".
_RETRIED_STATUSES = frozenset({502, 503})


@dataclass(frozen=True)
class RetryPolicy:
    """Retries of an idempotent call whose stage was unreachable (see the module docstring)."""

    #: Attempts in all, the first included (the gateway's ``retry_attempts``).
    attempts: int
    #: The longest wait between two attempts, seconds (the gateway's ``retry_max_wait_s``).
    max_wait_s: float
    #: Scale of the backoff: the wait before retry ``n`` is uniform in ``[0, first_wait_s * 2**n]``.
    first_wait_s: float = 0.2


def worth_retrying(exc: BaseException) -> bool:
    """A stage that could not be reached, or answered 502/503 without saying when to come back."""
    return isinstance(exc, DependencyFailed) and exc.kind == "unavailable" and (
        exc.status_code is None or exc.status_code in _RETRIED_STATUSES
    )


class ServiceClient:
    """One pooled client per downstream service, with an explicit timeout (per event, for streams)."""

    def __init__(
        self,
        stage: str,
        base_url: str,
        timeout_s: float,
        *,
        connect_timeout_s: float = 2.0,
        max_connections: int = 50,
        transport: httpx.AsyncBaseTransport | None = None,
        service_token: str | None = None,
        retry: RetryPolicy | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        """``service_token``: sent on every call (``X-RAG-Service-Token``), see ``rag_common.internal_auth``.
        ``retry``: how calls made with ``idempotent=True`` are retried; None, never.
        ``tracer_provider``: the calling service's (``rag_common.telemetry.tracer_provider``); every
        call, each retry attempt and each stream is a client span sending W3C ``traceparent``."""
        self.stage = stage
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self.retry = retry
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(timeout_s, connect=min(connect_timeout_s, timeout_s)),
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
            transport=transport,
            headers={SERVICE_TOKEN_HEADER: service_token} if service_token else None,
        )
        instrument_httpx_client(self._client, tracer_provider)

    async def aclose(self) -> None:
        await self._client.aclose()

    async def request(
        self,
        method: str,
        path: str,
        response_model: type[ModelT],
        *,
        json: BaseModel | None = None,
        idempotent: bool = False,
        **kwargs: Any,
    ) -> ModelT:
        """One typed call; with ``idempotent`` and a retry policy, retried as the module docstring says."""
        payload = json.model_dump(mode="json") if json is not None else None
        if not (idempotent and self.retry):
            return await self._call(method, path, response_model, payload, **kwargs)
        policy = self.retry
        retrying = AsyncRetrying(
            retry=retry_if_exception(worth_retrying),
            stop=stop_after_attempt(policy.attempts) | stop_after_delay(self.timeout_s),
            wait=wait_random_exponential(multiplier=policy.first_wait_s, max=policy.max_wait_s),
            before_sleep=lambda state: logger.warning(
                "%s %s: attempt %d failed (%s), retrying", self.stage, path, state.attempt_number, state.outcome.exception()
            ),
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                return await self._call(method, path, response_model, payload, **kwargs)
        raise AssertionError("unreachable: tenacity re-raises the last failure")  # pragma: no cover

    async def _call(
        self, method: str, path: str, response_model: type[ModelT], payload: Any, **kwargs: Any
    ) -> ModelT:
        response = await self.raw(method, path, json=payload, **kwargs)
        if response.status_code >= 400:
            raise self.status_failure(response)
        try:
            return response_model.model_validate_json(response.content)
        except ValidationError as exc:
            raise DependencyFailed(
                self.stage, "bad_response", f"unexpected response body: {exc.error_count()} errors"
            ) from exc

    async def post(
        self, path: str, body: BaseModel, response_model: type[ModelT], *, idempotent: bool = False, **kwargs: Any
    ) -> ModelT:
        return await self.request("POST", path, response_model, json=body, idempotent=idempotent, **kwargs)

    async def raw(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """An unparsed call, for pass-through endpoints; transport errors still become DependencyFailed."""
        try:
            return await self._client.request(method, path, **kwargs)
        except httpx.HTTPError as exc:
            raise self.transport_failure(path, exc) from exc

    async def stream_sse(self, path: str, body: BaseModel) -> AsyncIterator[ServerSentEvent]:
        """POST ``body`` and yield the response's Server-Sent Events as they arrive.

        A non-200 answer, a broken connection, a silent peer (no event within the timeout) or a
        malformed stream raise DependencyFailed, the same as :meth:`request`; what the events
        mean is the caller's business.
        """
        try:
            async with aconnect_sse(self._client, "POST", path, json=body.model_dump(mode="json")) as source:
                if source.response.status_code != 200:
                    await source.response.aread()
                    raise self.status_failure(source.response)
                async for event in source.aiter_sse():
                    yield event
        # SSEError (a 200 that is no event stream) subclasses httpx.TransportError: catch it first.
        except SSEError as exc:
            raise DependencyFailed(self.stage, "bad_response", str(exc)) from exc
        except httpx.HTTPError as exc:
            raise self.transport_failure(path, exc) from exc

    def status_failure(self, response: httpx.Response) -> DependencyFailed:
        """A 4xx/5xx answer as the failure it means: 4xx ``rejected``, 504 ``timeout``, else ``unavailable``."""
        code, text = response.status_code, error_text(response)
        if 400 <= code < 500:
            return DependencyFailed(self.stage, "rejected", text, code)
        if code == 504:
            return DependencyFailed(self.stage, "timeout", f"HTTP 504: {text}", code)
        if code == 503 and (retry_after := _seconds(response.headers.get("retry-after"))) is not None:
            # The stage is up but full, and said when it expects room: the caller can say the same.
            return DependencyFailed(self.stage, "overloaded", text, code, retry_after_s=retry_after)
        return DependencyFailed(self.stage, "unavailable", f"HTTP {code}: {text}", code)

    def transport_failure(self, path: str, exc: httpx.HTTPError) -> DependencyFailed:
        if isinstance(exc, httpx.TimeoutException):
            return DependencyFailed(self.stage, "timeout", f"no answer from {self.base_url}{path} in time")
        return DependencyFailed(self.stage, "unavailable", f"cannot reach {self.base_url}{path}: {type(exc).__name__}")

    async def is_healthy(self) -> str:
        try:
            # A probe of a probe: no span (the probed /healthz has none either).
            with suppress_http_instrumentation():
                response = await self._client.get("/healthz", timeout=2.0)
        except httpx.HTTPError as exc:
            return f"unreachable: {type(exc).__name__}"
        return "ok" if response.status_code == 200 else f"HTTP {response.status_code}"


def _seconds(retry_after: str | None) -> float | None:
    """A ``Retry-After`` given in seconds (the services never send the HTTP-date form)."""
    try:
        return float(retry_after) if retry_after is not None else None
    except ValueError:
        return None


def error_text(response: httpx.Response) -> str:
    """The ``error`` of a service's JSON error body, else the body itself (cut to 300 characters)."""
    try:
        body = response.json()
    except ValueError:
        return response.text[:300]
    if isinstance(body, dict) and "error" in body:
        return str(body["error"])[:300]
    return str(body)[:300]
