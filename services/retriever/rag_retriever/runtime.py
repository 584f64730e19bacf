"""The retriever assembled from its settings: the one place its parts are built.

``async with open_runtime(settings) as runtime`` loads the embedder, opens the configured backend
(index, template and pipelines in place) and wires the ingestor and the search service around one
read/write lock. The app's lifespan, the eval harness and the benchmarks all open it, so what they
measure is what the service runs.

This is the composition root, the one module above ``backends/`` that names a concrete backend
(``tests/test_import_rules.py`` holds every other to that): ``open_backend`` knows which backend it
opened, so it says which abilities beyond ``SearchBackend`` that backend has (``BackendAbilities``:
the graph signals, learned fusion's candidates, staged writes), and the services get them injected
instead of looking for them on the backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_common.embedders import Embedder
from rag_common.embedders.factory import build_embedder as build_configured_embedder
from rag_common.languages import identifier_of
from rag_common.settings import EmbedderSettings, LanguageSettings
from rag_retriever.backends.base import (
    FusionCandidateSource,
    FusionSettings,
    GraphSearcher,
    HnswParams,
    SearchBackend,
    StagedWriter,
)
from rag_retriever.chunking import Chunker
from rag_retriever.document_access import ContentDigest, DocumentCatalog
from rag_retriever.document_language import DocumentLanguages
from rag_retriever.ingest_limits import IngestLimits
from rag_retriever.ingest_pool import IngestPool, open_ingest_pool
from rag_retriever.ingestion import Ingestor
from rag_retriever.learned_fusion import SHIPPED_MODEL, FusionModel
from rag_retriever.locking import ReadWriteLock
from rag_retriever.query_language import QueryLanguages
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer

if TYPE_CHECKING:
    # Imported where the backend is opened, so the opensearch deployment never loads it.
    from rag_retriever.backends.embedded import EmbeddedBackend


@dataclass(frozen=True, slots=True)
class BackendAbilities:
    """What an opened backend can do beyond ``SearchBackend``; None where it cannot."""

    graph: GraphSearcher | None
    fusion_candidates: FusionCandidateSource | None
    staged: StagedWriter[Any] | None


@dataclass(frozen=True, slots=True)
class OpenedBackend:
    backend: SearchBackend
    abilities: BackendAbilities


@dataclass
class RetrieverRuntime:
    settings: RetrieverSettings
    embedder: Embedder
    backend: SearchBackend
    #: ``backend``'s abilities beyond ``SearchBackend`` (``open_backend`` says which it has).
    abilities: BackendAbilities
    lock: ReadWriteLock
    ingestor: Ingestor
    search: SearchService
    catalog: DocumentCatalog
    #: Where ingestion's CPU work runs and the queue in front of it (``ingest_pool``).
    ingest_pool: IngestPool

    #: How a query's language is named and what it changes (analysis, dense weight).
    languages: QueryLanguages

    def search_with(
        self, fusion: FusionSettings, learned: FusionModel | None = None, *, weigh_by_language: bool = True
    ) -> SearchService:
        """A search service over the same index and lock with another hybrid fusion, or a learned
        fusion model over a min-max first pass (for evaluation). ``weigh_by_language=False``: the dense
        weight of ``fusion`` for every query, whatever its language (an evaluation run naming a weight)."""
        return search_service(
            self.settings, self.backend, self.abilities, self.embedder, self.lock, fusion, learned,
            self.languages if weigh_by_language else self.languages.fixed(fusion.dense_weight),
        )

    async def readiness(self) -> dict[str, str]:
        try:
            await self.backend.count()
        except Exception as exc:  # noqa: BLE001 - any failure means not ready
            return {"embedder": "ok", "index": f"unavailable: {type(exc).__name__}"}
        return {"embedder": "ok", "index": "ok"}


def search_service(
    settings: RetrieverSettings, backend: SearchBackend, abilities: BackendAbilities, embedder: Embedder,
    lock: ReadWriteLock, fusion: FusionSettings, learned: FusionModel | None, languages: QueryLanguages,
) -> SearchService:
    """The search service over ``backend``, its abilities injected, its defaults from ``settings``."""
    return SearchService(
        backend, embedder, lock, fusion=fusion, default_top_k=settings.default_top_k,
        graph=GraphDefaults.of(settings), graph_searcher=abilities.graph,
        candidate_source=abilities.fusion_candidates, learned=learned, languages=languages,
    )


def load_fusion_model(settings: RetrieverSettings) -> FusionModel | None:
    """The learned fusion model when ``hybrid_normalization`` is ``learned`` (``fusion_model``, or the
    shipped one); raises :class:`~rag_retriever.learned_fusion.FusionModelError` for a file it cannot
    serve, so the retriever does not start with it."""
    if settings.hybrid_normalization != "learned":
        return None
    return FusionModel.load(settings.fusion_model or SHIPPED_MODEL)


def embedded_abilities(embedded: EmbeddedBackend) -> BackendAbilities:
    """The embedded backend's abilities (tests that open one themselves take them from here too)."""
    # The structure-and-entity graph serves the graph signals and learned fusion's candidates; its
    # writes can be prepared while searches run.
    return BackendAbilities(graph=embedded, fusion_candidates=embedded, staged=embedded)


async def open_backend(
    settings: RetrieverSettings, *, dim: int, model_id: str, languages: LanguageSettings | None = None
) -> OpenedBackend:
    """Open the backend ``settings.backend`` names, for vectors of ``dim`` made by ``model_id``, with
    the abilities it has beyond ``SearchBackend``; ``languages``: the ``RAG_*`` language settings
    (None: from the environment)."""
    languages = languages or LanguageSettings()
    if settings.backend == "embedded":
        from rag_retriever.backends.embedded import EmbeddedBackend

        # Opening reads and reconciles files on disk (and re-analyses an index made for other
        # languages, identifying its chunks' languages): off the event loop.
        embedded = await asyncio.to_thread(
            EmbeddedBackend, settings.index_dir, dim, HnswParams.of(settings), model_id=model_id,
            languages=languages.languages, identifier=identifier_of(languages),
            neutral_weight=settings.neutral_field_weight,
        )
        return OpenedBackend(embedded, embedded_abilities(embedded))

    # Imported here so the embedded deployment never needs the OpenSearch client.
    from rag_retriever.backends.opensearch import OpenSearchBackend, create_client
    from rag_retriever.backends.opensearch_requests import IndexConfig

    config = IndexConfig.of(settings, dim=dim, model_id=model_id, languages=languages.languages)
    backend = OpenSearchBackend(create_client(settings), config, fusion=FusionSettings.of(settings))
    try:
        await backend.ensure_index()
    except BaseException:
        await backend.close()
        raise
    # The second hop from fields of the chunk documents (no PageRank: ``opensearch_graph``); no learned
    # fusion (the settings refuse that pairing), no transaction to prepare a write in.
    return OpenedBackend(backend, BackendAbilities(graph=backend, fusion_candidates=None, staged=None))


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
    language_settings = LanguageSettings()
    identifier = identifier_of(language_settings)
    languages = QueryLanguages.of(settings, language_settings, EmbedderSettings(), identifier)
    digest = content_digest(settings)
    model = embedder or build_embedder(settings)
    await asyncio.to_thread(model.warm_up)
    opened = await open_backend(settings, dim=model.dim, model_id=model.model_id, languages=language_settings)
    backend, abilities = opened.backend, opened.abilities
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
            abilities=abilities,
            lock=lock,
            ingestor=Ingestor(
                backend, model, chunker, lock, sentence_vectors=settings.sentence_vectors, digest=digest,
                limits=IngestLimits.of(settings), work=pool.work, staged=abilities.staged,
                languages=DocumentLanguages(identifier, tuple(language_settings.languages)),
            ),
            search=search_service(
                settings, backend, abilities, model, lock, FusionSettings.of(settings), learned, languages
            ),
            languages=languages,
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
