"""The retriever's HTTP API. Routes are thin: validation by the wire schemas, logic in the services."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, File, Request, UploadFile

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import (
    DocumentList,
    IngestFailure,
    IngestRequest,
    IngestResponse,
    SearchRequest,
    SearchResponse,
)
from rag_common.service import ServiceError, create_service_app
from rag_retriever.backends.factory import fusion_settings, open_backend
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import Ingestor
from rag_retriever.locking import ReadWriteLock
from rag_retriever.parsing import UploadRejected, parse_upload, upload_name
from rag_retriever.search_service import SearchService
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer


def create_app(
    settings: RetrieverSettings | None = None, *, embedder: SentenceTransformerEmbedder | None = None
) -> FastAPI:
    """``embedder`` lets tests share one loaded model; the service builds its own from settings."""
    settings = settings or RetrieverSettings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        model = embedder or SentenceTransformerEmbedder(settings.embedding_model, device=settings.device)
        await asyncio.to_thread(model.warm_up)
        app.state.embedder = model
        backend = await open_backend(settings, dim=model.dim, model_id=model.model_id)
        app.state.backend = backend
        lock = ReadWriteLock()
        chunker = Chunker(EmbedderTokenizer(model), settings.chunk_tokens, settings.chunk_overlap_tokens)
        app.state.ingestor = Ingestor(backend, model, chunker, lock)
        app.state.search = SearchService(
            backend,
            model,
            lock,
            fusion=fusion_settings(settings),
            default_top_k=settings.default_top_k,
        )
        try:
            yield
        finally:
            await backend.close()

    async def readiness() -> dict[str, str]:
        checks = {"embedder": "ok" if hasattr(app.state, "embedder") else "not loaded"}
        backend = getattr(app.state, "backend", None)
        if backend is None:
            checks["index"] = "not open"
        else:
            try:
                await backend.count()
                checks["index"] = "ok"
            except Exception as exc:  # noqa: BLE001 - any failure means not ready
                checks["index"] = f"unavailable: {type(exc).__name__}"
        return checks

    app = create_service_app("retriever", lifespan=lifespan, readiness=readiness)

    @app.post("/v1/search", response_model=SearchResponse, tags=["search"])
    async def search(body: SearchRequest, request: Request) -> SearchResponse:
        return await request.app.state.search.search(body)

    @app.post("/v1/documents", response_model=IngestResponse, tags=["documents"])
    async def ingest(body: IngestRequest, request: Request) -> IngestResponse:
        return await request.app.state.ingestor.ingest(body.documents)

    @app.post("/v1/documents/upload", response_model=IngestResponse, tags=["documents"])
    async def upload(request: Request, files: list[UploadFile] = File(...)) -> IngestResponse:
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
        return await request.app.state.ingestor.ingest(documents, failures)

    @app.get("/v1/documents", response_model=DocumentList, tags=["documents"])
    async def list_documents(request: Request) -> DocumentList:
        return DocumentList(documents=await request.app.state.backend.list_documents())

    @app.delete("/v1/documents/{doc_id:path}", tags=["documents"])
    async def delete_document(doc_id: str, request: Request) -> dict[str, str | int]:
        deleted = await request.app.state.ingestor.delete(doc_id)
        if deleted == 0:
            raise ServiceError(404, f"no document with id {doc_id!r}")
        return {"doc_id": doc_id, "deleted_chunks": deleted}

    return app
