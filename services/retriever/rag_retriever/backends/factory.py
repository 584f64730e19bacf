"""Settings → the configured backend, ready to serve (index, template and pipelines in place)."""

from __future__ import annotations

import asyncio

from rag_retriever.backends.base import FusionSettings, SearchBackend
from rag_retriever.settings import RetrieverSettings


def fusion_settings(settings: RetrieverSettings) -> FusionSettings:
    return FusionSettings(method=settings.hybrid_normalization, dense_weight=settings.hybrid_dense_weight)


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
