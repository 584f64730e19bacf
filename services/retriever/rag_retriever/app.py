"""The retriever's HTTP API. Routes are thin: validation by the wire schemas, logic in the
ingestor and the search service, assembled by ``runtime.py``.

Every route but the probes serves one caller: the identity the gateway authenticated, in the
``X-RAG-Identity`` header (``rag_common.identity``), read by ``caller_identity``. Searches see what
that identity may read, ingestion writes into its tenant, list and delete see only its tenant.
"""

from __future__ import annotations

import asyncio

from typing import Annotated

from fastapi import Depends, FastAPI, File, Form, Request, Security, UploadFile
from fastapi.security import APIKeyHeader

from rag_common.embedders import Embedder
from pydantic import ValidationError

from rag_common.errors import InvalidInput, NotFound, PayloadTooLarge, Unauthenticated
from rag_common.identity import IDENTITY_HEADER, Identity, decode_identity
from rag_common.schemas import (
    DocumentAcl,
    DocumentDeleted,
    DocumentId,
    DocumentIn,
    DocumentList,
    IngestFailure,
    IngestRequest,
    IngestResponse,
    SearchRequest,
    SearchResponse,
)
from rag_common.service import create_service_app, error_responses
from rag_common.telemetry import bind_tenant
from rag_common.upload_formats import UPLOAD_ACL_DESCRIPTION
from rag_retriever.backends.base import AccessFilter
from rag_retriever.parsers import UploadRejected, parse_upload, upload_name
from rag_retriever.runtime import RetrieverRuntime, open_runtime
from rag_retriever.settings import RetrieverSettings


#: In the OpenAPI document as an ``apiKey`` scheme in the ``X-RAG-Identity`` header.
_IDENTITY = APIKeyHeader(
    name=IDENTITY_HEADER,
    scheme_name="RagIdentity",
    auto_error=False,
    description="The caller's identity as the gateway authenticated it: base64url of the JSON "
    "`{tenant, user, groups, scopes}` (`rag_common.identity.encode_identity`). Missing: 401; "
    "malformed: 422.",
)


async def caller_identity(value: Annotated[str | None, Security(_IDENTITY)] = None) -> Identity:
    """The caller of this request: 401 without the header, 422 when it does not decode."""
    if not value:
        raise Unauthenticated(
            f"missing {IDENTITY_HEADER} header: the retriever serves calls on behalf of a caller the "
            "gateway authenticated, and answers none without one"
        )
    identity = decode_identity(value)
    bind_tenant(identity.tenant)
    return identity


def upload_acl(value: str | None) -> DocumentAcl | None:
    """The ``acl`` form field of an upload: JSON ``{"groups": [...], "users": [...]}``, or absent."""
    if value is None or not value.strip():
        return None
    try:
        return DocumentAcl.model_validate_json(value)
    except ValidationError as exc:
        raise InvalidInput(
            f'the acl form field must be JSON {{"groups": [...], "users": [...]}}: {exc.errors()[0]["msg"]}'
        ) from exc


def with_default_acl(documents: list[DocumentIn], acl: DocumentAcl | None) -> list[DocumentIn]:
    """``acl`` on each document that carries none (a JSON file's own per-document ACLs win)."""
    if acl is None:
        return documents
    return [document if document.acl is not None else document.model_copy(update={"acl": acl}) for document in documents]


Caller = Annotated[Identity, Depends(caller_identity)]


def _runtime(request: Request) -> RetrieverRuntime:
    return request.app.state.runtime


def create_app(settings: RetrieverSettings | None = None, *, embedder: Embedder | None = None) -> FastAPI:
    """``embedder`` lets tests share one loaded model; the service builds its own from settings."""
    settings = settings or RetrieverSettings()
    app = create_service_app("retriever", lambda: open_runtime(settings, embedder=embedder), service_token=settings.service_token)

    # 503: the search backend (OpenSearch) is down; the embedded one is in-process.
    @app.post("/v1/search", response_model=SearchResponse, tags=["search"], responses=error_responses(401, 503))
    async def search(body: SearchRequest, request: Request, identity: Caller) -> SearchResponse:
        """Passages the caller may read: of its tenant, without an ACL or with one naming it or a group of it."""
        return await _runtime(request).search.search(body, AccessFilter.of(identity))

    @app.post(
        "/v1/documents", response_model=IngestResponse, tags=["documents"], responses=error_responses(401, 503)
    )
    async def ingest(body: IngestRequest, request: Request, identity: Caller) -> IngestResponse:
        """Index the documents in the caller's tenant; a ``metadata.tenant`` naming another is a 422."""
        return await _runtime(request).ingestor.ingest(body.documents, tenant=identity.tenant)

    @app.post(
        "/v1/documents/upload",
        response_model=IngestResponse,
        tags=["documents"],
        responses=error_responses(401, 413, 503),
    )
    async def upload(
        request: Request,
        identity: Caller,
        files: Annotated[list[UploadFile], File(min_length=1)],
        acl: Annotated[str | None, Form(description=UPLOAD_ACL_DESCRIPTION)] = None,
    ) -> IngestResponse:
        """One or more ``.txt``, ``.md``, ``.html``, ``.pdf``, ``.json`` or ``.jsonl`` files; each is accepted
        or rejected whole."""
        default_acl = upload_acl(acl)
        if len(files) > settings.max_upload_files:
            raise PayloadTooLarge(f"{len(files)} files in one request; at most {settings.max_upload_files}")
        documents, failures = [], []
        for file in files:
            # One byte past the limit is enough to know a file is too big, without reading it all.
            data = await file.read(settings.max_upload_bytes + 1)
            try:
                # Parsing a PDF takes seconds: off the event loop, so searches and probes keep flowing.
                documents.extend(
                    await asyncio.to_thread(
                        parse_upload, file.filename, data, settings.max_upload_bytes, file.content_type
                    )
                )
            except UploadRejected as exc:
                failures.append(IngestFailure(name=upload_name(file.filename) or "(unnamed)", reason=str(exc)))
            finally:
                await file.close()
        return await _runtime(request).ingestor.ingest(
            with_default_acl(documents, default_acl), failures, tenant=identity.tenant
        )

    @app.get(
        "/v1/documents", response_model=DocumentList, tags=["documents"], responses=error_responses(401, 503)
    )
    async def list_documents(request: Request, identity: Caller) -> DocumentList:
        """The documents of the caller's tenant."""
        return DocumentList(documents=await _runtime(request).backend.list_documents(tenant=identity.tenant))

    @app.delete(
        "/v1/documents/{doc_id:path}",
        response_model=DocumentDeleted,
        tags=["documents"],
        responses=error_responses(401, 404, 503),
    )
    async def delete_document(doc_id: DocumentId, request: Request, identity: Caller) -> DocumentDeleted:
        """Delete a document of the caller's tenant; another tenant's id is the 404 of an unknown one."""
        deleted = await _runtime(request).ingestor.delete(doc_id, tenant=identity.tenant)
        if deleted == 0:
            raise NotFound(f"no document with id {doc_id!r}")
        return DocumentDeleted(doc_id=doc_id, deleted_chunks=deleted)

    return app
