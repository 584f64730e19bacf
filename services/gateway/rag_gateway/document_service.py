"""Documents through the gateway: checks at the edge, then the retriever's answer passed through.

The gateway owns no documents; it enforces its own limits (size, content type, a valid JSON body)
and relays the retriever's response as it is, except that a retriever failure is the retriever
being unavailable, never the caller's fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from pydantic import ValidationError

from rag_common.errors import InvalidInput, InvalidQuery, PayloadTooLarge, UnsupportedMediaType
from rag_common.http import ServiceClient
from rag_common.identity import Identity, identity_headers
from rag_common.schemas import IngestRequest

MIB = 1024 * 1024


@dataclass(frozen=True)
class Relayed:
    """The retriever's answer, to be sent back unchanged."""

    status_code: int
    content: bytes
    media_type: str


class DocumentService:
    def __init__(self, retriever: ServiceClient, *, max_upload_mb: float) -> None:
        self._retriever = retriever
        self._max_upload_bytes = int(max_upload_mb * MIB)
        self._max_upload_mb = max_upload_mb

    def check_length(self, declared_length: int) -> None:
        if declared_length > self._max_upload_bytes:
            raise PayloadTooLarge(f"request of {declared_length} bytes exceeds the {self._max_upload_mb:g} MiB limit")

    async def ingest(self, identity: Identity, body: bytes, content_type: str) -> Relayed:
        """JSON ``{"documents": [...]}`` or a ``multipart/form-data`` upload of ``files``, into the
        caller's tenant (the retriever reads it from the identity)."""
        if content_type.startswith("application/json"):
            try:
                payload = IngestRequest.model_validate_json(body)
            except ValidationError as exc:
                if any(error["type"] == "json_invalid" for error in exc.errors()):
                    raise InvalidQuery("the body is not valid JSON") from exc
                raise InvalidInput(f"invalid documents payload: {exc}") from exc
            return await self._relay(identity, "POST", "/v1/documents", json=payload.model_dump(mode="json"))
        if content_type.startswith("multipart/form-data"):
            return await self._relay(identity, "POST", "/v1/documents/upload", content=body, content_type=content_type)
        raise UnsupportedMediaType("send application/json {'documents': [...]} or multipart/form-data with 'files'")

    async def list(self, identity: Identity) -> Relayed:
        return await self._relay(identity, "GET", "/v1/documents")

    async def delete(self, identity: Identity, doc_id: str) -> Relayed:
        return await self._relay(identity, "DELETE", f"/v1/documents/{path_segment(doc_id)}")

    async def _relay(
        self, identity: Identity, method: str, path: str, *, content_type: str | None = None, **kwargs: object
    ) -> Relayed:
        headers = identity_headers(identity)
        if content_type is not None:
            headers["content-type"] = content_type
        upstream = await self._retriever.raw(method, path, headers=headers, **kwargs)
        if upstream.status_code >= 500:
            raise self._retriever.status_failure(upstream)
        return Relayed(upstream.status_code, upstream.content, upstream.headers.get("content-type", "application/json"))


def path_segment(value: str) -> str:
    """``value`` percent-encoded as one URL path segment: ``/``, ``#``, ``?`` and ``%`` cannot end the
    segment, start a query or a fragment, or climb to another route. Ids are validated before this
    (``rag_common.schemas.DocumentId``: no control characters, not ``.`` or ``..``)."""
    return quote(value, safe="")
