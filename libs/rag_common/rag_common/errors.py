"""The errors a service's logic raises, free of HTTP.

Logic says *what* went wrong (the input is invalid, a thing does not exist, a dependency is down);
which status code that is on the wire is decided in one table, ``rag_common.service.STATUS_BY_ERROR``,
so a service module never picks a status code and can be tested without FastAPI.
"""

from __future__ import annotations

from typing import Any, Literal

#: How a call to another stage failed. ``rejected``: it answered 4xx to input this service built.
#: ``overloaded``: it could not take the call in time and said when to try again (503 + Retry-After).
FailureKind = Literal["unavailable", "timeout", "bad_response", "rejected", "overloaded"]


class RagError(Exception):
    """Base of every error a service reports to its caller (message, optional detail and stage)."""

    def __init__(self, message: str, *, detail: Any = None, stage: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail
        self.stage = stage


class InvalidInput(RagError):
    """The request parsed but its content cannot be served (e.g. an embedding of the wrong dimension)."""


class InvalidQuery(RagError):
    """The search asks for something the index cannot do (an unknown or empty filter field)."""


class MalformedBody(RagError):
    """The body cannot be read as what its content type says: not valid JSON, or a JSON object
    naming a key twice (``rag_common.request_bodies``)."""


class Unauthenticated(RagError):
    """No credential, or one that is invalid, expired or revoked (401 with ``WWW-Authenticate``)."""


class Forbidden(RagError):
    """The caller is known but lacks the scope this action needs (403)."""


class RateLimited(RagError):
    """The caller is over its rate limit; ``retry_after_s`` says when the window has room (429)."""

    def __init__(self, message: str, *, retry_after_s: float) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class NotFound(RagError):
    """The named conversation or document does not exist (or has expired)."""


class PayloadTooLarge(RagError):
    """The request body is over the configured size limit."""


class UnsupportedMediaType(RagError):
    """The request body's content type is not one the route accepts."""


class DependencyFailed(RagError):
    """A stage this service depends on (another service, the LLM, Redis) failed.

    ``stage`` names it and ``kind`` says how; the message a client sees reads
    ``"<stage> timed out: …"``, ``"<stage> rejected the request: …"`` or ``"<stage> unavailable: …"``.
    ``reason`` keeps the bare cause for logs and for ``degraded`` entries.
    """

    def __init__(
        self,
        stage: str,
        kind: FailureKind,
        reason: str,
        status_code: int | None = None,
        *,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(_summary(stage, kind, reason), stage=stage)
        self.kind = kind
        self.reason = reason
        #: The HTTP status the dependency answered with, when it answered at all.
        self.status_code = status_code
        #: When an ``overloaded`` stage expects to have room again, in seconds (the ``Retry-After``).
        self.retry_after_s = retry_after_s


def _summary(stage: str, kind: FailureKind, reason: str) -> str:
    if kind == "timeout":
        return f"{stage} timed out: {reason}"
    if kind == "overloaded":
        return f"{stage} busy: {reason}"
    if kind == "rejected":
        # A 4xx on input this service built is a contract problem between services, not the user's.
        return f"{stage} rejected the request: {reason}"
    return f"{stage} unavailable: {reason}"
