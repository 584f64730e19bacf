"""The retriever's HTTP API. Routes are thin: validation by the wire schemas, logic in the
ingestor and the search service, assembled by ``runtime.py``.

Every route but the probes serves one caller: the identity the gateway authenticated, in the
``X-RAG-Identity`` header (``rag_common.identity``), read by ``caller_identity``. Every route sees
and changes only what that identity may read (``document_access``): searches, the list, duplicates,
the readable check; ingestion writes into its tenant and replaces or deletes only readable documents.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Annotated

from fastapi import Depends, FastAPI, File, Form, Request, Security, UploadFile
from fastapi.security import APIKeyHeader

from rag_common.embedders import Embedder
from pydantic import ValidationError

from rag_common.errors import InvalidInput, NotFound, PayloadTooLarge, Unauthenticated
from rag_common.identity import IDENTITY_HEADER, Identity, decode_identity
from rag_common.languages import UnsupportedLanguageError, language
from rag_common.schemas import (
    DocumentAcl,
    DocumentDeleted,
    DocumentId,
    DocumentIn,
    DocumentList,
    IngestFailure,
    IngestRequest,
    IngestResponse,
    ReadableRequest,
    ReadableResponse,
    SearchRequest,
    SearchResponse,
)
from rag_common.service import create_service_app, declares_document_access, error_responses
from rag_common.telemetry import bind_tenant
from rag_common.upload_formats import UPLOAD_ACL_DESCRIPTION, UPLOAD_LANGUAGE_DESCRIPTION
from rag_retriever.backends.base import AccessFilter
from rag_retriever.document_access import DocumentAccess
from rag_retriever.parsers import UploadRejected, upload_name
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


def upload_language(value: str | None) -> str | None:
    """The ``language`` form field of an upload: a supported ISO 639-1 code, or absent."""
    if value is None or not value.strip():
        return None
    try:
        return language(value.strip().lower()).code
    except UnsupportedLanguageError as exc:
        raise InvalidInput(f"the language form field: {exc}") from exc


def with_declared_language(documents: list[DocumentIn], declared: str | None) -> list[DocumentIn]:
    """``declared`` on each document that declares none (a JSON file's own per-document languages win)."""
    if declared is None:
        return documents
    return [d if d.language is not None else d.model_copy(update={"language": declared}) for d in documents]


Caller = Annotated[Identity, Depends(caller_identity)]
#: What each route that returns or changes document data declares (tests/test_document_routes_access.py).
CALLER_ACL = declares_document_access("caller-acl")
DOCUMENT_ACCESS = declares_document_access("document-access")


def _runtime(request: Request) -> RetrieverRuntime:
    return request.app.state.runtime


def ingest_turn(request: Request) -> AbstractAsyncContextManager[None]:
    """This request's turn of the ingest pool (``ingest_pool.IngestAdmission``), to hold while it does
    its work: 503 with ``Retry-After`` at once when every ingest worker is busy and the queue is full.
    Taken in the route, after the body is validated (a malformed request is a 422, not a turn)."""
    return _runtime(request).ingest_pool.admission.turn()


def create_app(settings: RetrieverSettings | None = None, *, embedder: Embedder | None = None) -> FastAPI:
    """``embedder`` lets tests share one loaded model; the service builds its own from settings."""
    settings = settings or RetrieverSettings()
    app = create_service_app("retriever", lambda: open_runtime(settings, embedder=embedder), service_token=settings.service_token)

    # 503: the search backend (OpenSearch) is down; the embedded one is in-process.
    @app.post(
        "/v1/search", response_model=SearchResponse, tags=["search"], responses=error_responses(401, 503),
        openapi_extra=CALLER_ACL,
    )
    async def search(body: SearchRequest, request: Request, identity: Caller) -> SearchResponse:
        """Passages the caller may read: of its tenant, without an ACL or with one naming it or a group of it."""
        return await _runtime(request).search.search(body, AccessFilter.of(identity))

    @app.post(
        "/v1/documents", response_model=IngestResponse, tags=["documents"],
        responses=error_responses(401, 403, 413, 503), openapi_extra=DOCUMENT_ACCESS,
    )
    async def ingest(body: IngestRequest, request: Request, identity: Caller) -> IngestResponse:
        """Index the documents in the caller's tenant; a ``metadata.tenant`` naming another is a 422, an id
        held by a document the caller may not read a 403 (nothing of the request is written)."""
        async with ingest_turn(request):
            return await _runtime(request).ingestor.ingest(body.documents, access=DocumentAccess.of(identity))

    @app.post(
        "/v1/documents/upload",
        response_model=IngestResponse,
        tags=["documents"],
        responses=error_responses(401, 403, 413, 503),
        openapi_extra=DOCUMENT_ACCESS,
    )
    async def upload(
        request: Request,
        identity: Caller,
        files: Annotated[list[UploadFile], File(min_length=1)],
        acl: Annotated[str | None, Form(description=UPLOAD_ACL_DESCRIPTION)] = None,
        language: Annotated[str | None, Form(description=UPLOAD_LANGUAGE_DESCRIPTION)] = None,
    ) -> IngestResponse:
        """One or more ``.txt``, ``.md``, ``.html``, ``.pdf``, ``.json`` or ``.jsonl`` files; each is accepted
        or rejected whole."""
        default_acl = upload_acl(acl)
        declared = upload_language(language)
        if len(files) > settings.max_upload_files:
            raise PayloadTooLarge(f"{len(files)} files in one request; at most {settings.max_upload_files}")
        async with ingest_turn(request):
            documents, failures = [], []
            for file in files:
                # One byte past the limit is enough to know a file is too big, without reading it all.
                data = await file.read(settings.max_upload_bytes + 1)
                try:
                    # Parsing a PDF takes seconds: in the ingest pool, so searches and probes keep flowing.
                    documents.extend(
                        await _runtime(request).ingest_pool.work.parse(
                            file.filename, data, settings.max_upload_bytes, file.content_type
                        )
                    )
                except UploadRejected as exc:
                    failures.append(IngestFailure(name=upload_name(file.filename) or "(unnamed)", reason=str(exc)))
                finally:
                    await file.close()
            return await _runtime(request).ingestor.ingest(
                with_declared_language(with_default_acl(documents, default_acl), declared), failures,
                access=DocumentAccess.of(identity),
            )

    @app.get(
        "/v1/documents", response_model=DocumentList, tags=["documents"], responses=error_responses(401, 503),
        openapi_extra=DOCUMENT_ACCESS,
    )
    async def list_documents(request: Request, identity: Caller) -> DocumentList:
        """The documents of the caller's tenant that it may read (the admin scope: all of them)."""
        return DocumentList(documents=await _runtime(request).catalog.list(DocumentAccess.of(identity)))

    @app.post(
        "/v1/documents/readable",
        response_model=ReadableResponse,
        tags=["documents"],
        responses=error_responses(401, 503),
        openapi_extra=CALLER_ACL,
    )
    async def readable_documents(body: ReadableRequest, request: Request, identity: Caller) -> ReadableResponse:
        """Those of the ids that exist in the caller's tenant and that its own principals may read now."""
        # The caller's own principals, even with the admin scope: the gateway asks before it shows a
        # stored answer or source again, and answers never show an admin more than its own ACL.
        readable = await _runtime(request).catalog.readable(body.doc_ids, DocumentAccess.reading_as(identity))
        return ReadableResponse(doc_ids=readable)

    @app.delete(
        "/v1/documents/{doc_id:path}",
        response_model=DocumentDeleted,
        tags=["documents"],
        responses=error_responses(401, 403, 404, 503),
        openapi_extra=DOCUMENT_ACCESS,
    )
    async def delete_document(doc_id: DocumentId, request: Request, identity: Caller) -> DocumentDeleted:
        """Delete a document of the caller's tenant that it may read; another tenant's id is the 404 of an
        unknown one, a document of its tenant it may not read a 403."""
        deleted = await _runtime(request).ingestor.delete(doc_id, access=DocumentAccess.of(identity))
        if deleted == 0:
            raise NotFound(f"no document with id {doc_id!r}")
        return DocumentDeleted(doc_id=doc_id, deleted_chunks=deleted)

    return app
