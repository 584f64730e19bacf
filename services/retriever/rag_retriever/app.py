"""The retriever's HTTP API. Routes are thin: validation by the wire schemas, logic in the
ingestor and the search service, assembled by ``runtime.py``."""

from __future__ import annotations

import asyncio

from typing import Annotated

from fastapi import FastAPI, File, Request, UploadFile

from rag_common.embedders import Embedder
from rag_common.errors import NotFound
from rag_common.schemas import (
    DocumentDeleted,
    DocumentId,
    DocumentList,
    IngestFailure,
    IngestRequest,
    IngestResponse,
    SearchRequest,
    SearchResponse,
)
from rag_common.service import create_service_app, error_responses
from rag_retriever.parsers import UploadRejected, parse_upload, upload_name
from rag_retriever.runtime import RetrieverRuntime, open_runtime
from rag_retriever.settings import RetrieverSettings


def _runtime(request: Request) -> RetrieverRuntime:
    return request.app.state.runtime


def create_app(settings: RetrieverSettings | None = None, *, embedder: Embedder | None = None) -> FastAPI:
    """``embedder`` lets tests share one loaded model; the service builds its own from settings."""
    settings = settings or RetrieverSettings()
    app = create_service_app("retriever", lambda: open_runtime(settings, embedder=embedder), service_token=settings.service_token)

    # 503: the search backend (OpenSearch) is down; the embedded one is in-process.
    @app.post("/v1/search", response_model=SearchResponse, tags=["search"], responses=error_responses(503))
    async def search(body: SearchRequest, request: Request) -> SearchResponse:
        return await _runtime(request).search.search(body)

    @app.post("/v1/documents", response_model=IngestResponse, tags=["documents"], responses=error_responses(503))
    async def ingest(body: IngestRequest, request: Request) -> IngestResponse:
        return await _runtime(request).ingestor.ingest(body.documents)

    @app.post(
        "/v1/documents/upload", response_model=IngestResponse, tags=["documents"], responses=error_responses(503)
    )
    async def upload(request: Request, files: Annotated[list[UploadFile], File(min_length=1)]) -> IngestResponse:
        """One or more ``.txt``, ``.md``, ``.html``, ``.pdf``, ``.json`` or ``.jsonl`` files; each is accepted
        or rejected whole."""
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
        return await _runtime(request).ingestor.ingest(documents, failures)

    @app.get("/v1/documents", response_model=DocumentList, tags=["documents"], responses=error_responses(503))
    async def list_documents(request: Request) -> DocumentList:
        return DocumentList(documents=await _runtime(request).backend.list_documents())

    @app.delete(
        "/v1/documents/{doc_id:path}",
        response_model=DocumentDeleted,
        tags=["documents"],
        responses=error_responses(404, 503),
    )
    async def delete_document(doc_id: DocumentId, request: Request) -> DocumentDeleted:
        deleted = await _runtime(request).ingestor.delete(doc_id)
        if deleted == 0:
            raise NotFound(f"no document with id {doc_id!r}")
        return DocumentDeleted(doc_id=doc_id, deleted_chunks=deleted)

    return app
