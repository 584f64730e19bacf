"""Documents through the gateway: checks at the edge, then the retriever's answer passed through.

The gateway owns no documents; it enforces its own limits (size, content type, a valid JSON body)
and relays the retriever's response as it is, except that a retriever failure is the retriever
being unavailable, never the caller's fault.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import quote

from pydantic import ValidationError

from rag_common.errors import InvalidInput, MalformedBody, PayloadTooLarge, UnsupportedMediaType
from rag_common.http import ServiceClient
from rag_common.identity import Identity, identity_headers
from rag_common.request_bodies import is_json_media_type, parse_json_body, problems_summary, validation_problems
from rag_common.schemas import IngestRequest, ReadableRequest, ReadableResponse

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
        caller's tenant (the retriever reads it from the identity). A JSON body is read as every
        service reads one (``rag_common.request_bodies``: a key twice is a 400), in one pass."""
        if is_json_media_type(content_type):
            try:
                payload = IngestRequest.model_validate(parse_json_body(body))
            except json.JSONDecodeError as exc:
                raise MalformedBody(f"the body is not valid JSON: {exc.msg} at position {exc.pos}") from exc
            except ValidationError as exc:
                problems = validation_problems(exc.errors())
                raise InvalidInput(f"invalid documents payload: {problems_summary(problems)}", detail=problems) from exc
            return await self._relay(identity, "POST", "/v1/documents", json=payload.model_dump(mode="json"))
        if content_type.startswith("multipart/form-data"):
            return await self._relay(identity, "POST", "/v1/documents/upload", content=body, content_type=content_type)
        raise UnsupportedMediaType("send application/json {'documents': [...]} or multipart/form-data with 'files'")

    async def list(self, identity: Identity) -> Relayed:
        return await self._relay(identity, "GET", "/v1/documents")

    async def delete(self, identity: Identity, doc_id: str) -> Relayed:
        return await self._relay(identity, "DELETE", f"/v1/documents/{path_segment(doc_id)}")

    async def readable(self, identity: Identity, doc_ids: set[str]) -> set[str]:
        """Those of ``doc_ids`` the caller may read now (the retriever's rule, docs/security.md).
        Fails closed: a retriever that cannot answer is a ``DependencyFailed``, never "all readable"."""
        if not doc_ids:
            return set()
        answer = await self._retriever.post(
            "/v1/documents/readable", ReadableRequest(doc_ids=sorted(doc_ids)), ReadableResponse,
            headers=identity_headers(identity), idempotent=True,
        )
        return set(answer.doc_ids)

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
    (``rag_common.schemas.DocumentId``: no control or format characters, not ``.`` or ``..``)."""
    return quote(value, safe="")
