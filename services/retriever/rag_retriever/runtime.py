"""The retriever assembled from its settings: the one place its parts are built.

``async with open_runtime(settings) as runtime`` loads the embedder, opens the configured backend
(index, template and pipelines in place) and wires the ingestor and the search service around one
read/write lock. The app's lifespan, the eval harness and the benchmarks all open it, so what they
measure is what the service runs.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from rag_common.embedders import Embedder
from rag_common.embedders.factory import build_embedder as build_configured_embedder
from rag_retriever.backends.base import FusionSettings, SearchBackend
from rag_retriever.chunking import Chunker
from rag_retriever.document_access import ContentDigest, DocumentCatalog
from rag_retriever.ingest_limits import IngestLimits
from rag_retriever.ingest_pool import IngestPool, open_ingest_pool
from rag_retriever.ingestion import Ingestor
from rag_retriever.learned_fusion import SHIPPED_MODEL, FusionModel
from rag_retriever.locking import ReadWriteLock
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer


@dataclass
class RetrieverRuntime:
    settings: RetrieverSettings
    embedder: Embedder
    backend: SearchBackend
    lock: ReadWriteLock
    ingestor: Ingestor
    search: SearchService
    catalog: DocumentCatalog
    #: Where ingestion's CPU work runs and the queue in front of it (``ingest_pool``).
    ingest_pool: IngestPool

    def search_with(self, fusion: FusionSettings, learned: FusionModel | None = None) -> SearchService:
        """A search service over the same index and lock with another hybrid fusion, or a learned
        fusion model over a min-max first pass (for evaluation)."""
        return SearchService(
            self.backend, self.embedder, self.lock, fusion=fusion, default_top_k=self.settings.default_top_k,
            graph=GraphDefaults.of(self.settings), learned=learned,
        )

    async def readiness(self) -> dict[str, str]:
        try:
            await self.backend.count()
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            return {"embedder": "ok", "index": f"unavailable: {type(exc).__name__}"}
        return {"embedder": "ok", "index": "ok"}


def fusion_settings(settings: RetrieverSettings) -> FusionSettings:
    """The backend's hybrid fusion; learned fusion starts from a min-max first pass."""
    method = "min_max" if settings.hybrid_normalization == "learned" else settings.hybrid_normalization
    return FusionSettings(method=method, dense_weight=settings.hybrid_dense_weight)


def load_fusion_model(settings: RetrieverSettings) -> FusionModel | None:
    """The learned fusion model when ``hybrid_normalization`` is ``learned`` (``fusion_model``, or the
    shipped one); raises :class:`~rag_retriever.learned_fusion.FusionModelError` for a file it cannot
    serve, so the retriever does not start with it."""
    if settings.hybrid_normalization != "learned":
        return None
    return FusionModel.load(settings.fusion_model or SHIPPED_MODEL)


async def open_backend(settings: RetrieverSettings, *, dim: int, model_id: str) -> SearchBackend:
    """Open the backend ``settings.backend`` names, for vectors of ``dim`` made by ``model_id``."""
    if settings.backend == "embedded":
        from rag_retriever.backends.embedded import EmbeddedBackend

        # Opening reads and reconciles files on disk: off the event loop.
        return await asyncio.to_thread(
            EmbeddedBackend,
            settings.index_dir,
            dim,
            settings.hnsw_m,
            settings.hnsw_ef_construction,
            settings.hnsw_ef_search,
            model_id=model_id,
        )

    # Imported here so the embedded deployment never needs the OpenSearch client.
    from rag_retriever.backends.opensearch import OpenSearchBackend, create_client
    from rag_retriever.backends.opensearch_requests import IndexConfig

    config = IndexConfig(
        alias=settings.opensearch_index,
        dim=dim,
        model_id=model_id,
        engine=settings.knn_engine,
        space=settings.knn_space,
        m=settings.hnsw_m,
        ef_construction=settings.hnsw_ef_construction,
        ef_search=settings.hnsw_ef_search,
    )
    backend = OpenSearchBackend(create_client(settings), config, fusion=fusion_settings(settings))
    try:
        await backend.ensure_index()
    except BaseException:
        await backend.close()
        raise
    return backend


def build_embedder(settings: RetrieverSettings) -> Embedder:
    """``settings.embedding_model`` run as ``EMBEDDER_BACKEND`` says (onnx by default)."""
    return build_configured_embedder(settings.embedding_model, device=settings.device)


@asynccontextmanager
async def open_runtime(
    settings: RetrieverSettings | None = None, *, embedder: Embedder | None = None
) -> AsyncIterator[RetrieverRuntime]:
    """Settings default to the ``RETRIEVER_*`` environment. ``embedder`` lets a caller share one
    loaded model across runtimes (tests, evaluation); otherwise it is built from the settings."""
    settings = settings or RetrieverSettings()
    learned = load_fusion_model(settings)  # before the slow parts: a bad file stops the start at once
    digest = content_digest(settings)
    model = embedder or build_embedder(settings)
    await asyncio.to_thread(model.warm_up)
    backend = await open_backend(settings, dim=model.dim, model_id=model.model_id)
    pool: IngestPool | None = None
    try:
        lock = ReadWriteLock()
        chunker = Chunker(
            EmbedderTokenizer(model), settings.chunk_tokens, settings.chunk_overlap_tokens, settings.embed_template,
            sentence_vectors=settings.sentence_vectors,
        )
        # An embedder handed in (tests, the eval harness) cannot cross into a worker process: threads.
        pool = open_ingest_pool(settings, chunker, model, isolation="thread" if embedder is not None else None)
        yield RetrieverRuntime(
            settings=settings,
            embedder=model,
            backend=backend,
            lock=lock,
            ingestor=Ingestor(
                backend, model, chunker, lock, sentence_vectors=settings.sentence_vectors, digest=digest,
                limits=IngestLimits.of(settings), work=pool.work,
            ),
            search=SearchService(
                backend, model, lock, fusion=fusion_settings(settings), default_top_k=settings.default_top_k,
                graph=GraphDefaults.of(settings), learned=learned,
            ),
            catalog=DocumentCatalog(backend, digest),
            ingest_pool=pool,
        )
    finally:
        if pool is not None:
            await pool.close()
        await backend.close()


def content_digest(settings: RetrieverSettings) -> ContentDigest:
    """The key of the shown content hashes: the configured secret, else the key file (created once)."""
    if settings.content_digest_key is not None:
        return ContentDigest(settings.content_digest_key.get_secret_value().encode("utf-8"))
    path = settings.content_digest_key_file or str(Path(settings.index_dir) / "content-digest.key")
    return ContentDigest.from_key_file(Path(path))
