"""Bodies every service returns: readiness and errors."""

from __future__ import annotations

from typing import Any, Literal


from rag_common.schemas.wire import WireModel


class Readiness(WireModel):
    """Body of ``/readyz``: 200 when every dependency is ``ok``, 503 otherwise."""

    status: Literal["ready", "not_ready"]
    service: str
    #: ``{dependency: "ok" | reason}``.
    checks: dict[str, str]


class ErrorBody(WireModel):
    """Body of every 4xx/5xx the services return."""

    error: str
    detail: Any = None
    stage: str | None = None
