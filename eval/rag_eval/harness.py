"""Drive the real retriever over a dataset: the retriever's own runtime, over an embedded index.

Nothing is assembled here. :func:`open_index` opens ``rag_retriever.runtime.open_runtime`` with the
embedded backend in a given folder and a shared, already loaded embedder; the backend, the
``Ingestor`` and the ``SearchService`` are the runtime's, built as the service builds them. A
:class:`Retriever` adds what the benchmarks need on top: ingestion of a dataset's documents in
API-sized requests, and one search service per fusion mode they compare
(``RetrieverRuntime.search_with``), answering with document ids.

Importing this module imports the retriever (and so torch).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from rag_common.embedders import Embedder
from rag_common.schemas import MAX_SEARCH_TOP_K, DocumentIn, IngestResponse, SearchMode, SearchRequest
from rag_eval.datasets.types import Corpus, Dataset, Document
from rag_retriever.backends.base import AccessFilter, FusionSettings, SearchBackend
from rag_retriever.records import DEFAULT_TENANT
from rag_retriever.runtime import RetrieverRuntime, open_runtime
from rag_retriever.search_service import SearchService
from rag_retriever.settings import RetrieverSettings

#: Who the benchmarks search as: they ingest into the default tenant without ACLs, and read all of it.
EVAL_ACCESS = AccessFilter(DEFAULT_TENANT, ("*",))

Fusion = Literal["min_max", "rrf"]
#: The fusion modes the benchmarks compare (the embedded backend's; z_score needs OpenSearch).
FUSIONS: tuple[Fusion, ...] = ("min_max", "rrf")


def embedded_settings(index_dir: str | Path, settings: RetrieverSettings | None = None) -> RetrieverSettings:
    """``settings`` (default: the ``RETRIEVER_*`` environment) with the embedded backend in ``index_dir``."""
    if settings is None:
        return RetrieverSettings(backend="embedded", index_dir=str(index_dir))
    return settings.model_copy(update={"backend": "embedded", "index_dir": str(index_dir)})


def to_documents(documents: Iterable[Document], source: str) -> list[DocumentIn]:
    """Dataset documents as the retriever's ingest input (document id kept, so qrels still apply)."""
    return [
        DocumentIn(id=document.id, text=document.text, title=document.title, source=source, metadata=dict(document.metadata))
        for document in documents
    ]


def dedupe_doc_ids(doc_ids: Iterable[str]) -> list[str]:
    """Document ids in first-seen order: several chunks of one document count once, at its best rank."""
    return list(dict.fromkeys(doc_ids))


@dataclass(slots=True)
class IngestStats:
    documents: int
    chunks: int
    failed: int
    seconds: float


class Retriever:
    """An open retriever runtime as the benchmarks use it: its ``Ingestor`` builds the index, and one
    ``SearchService`` per fusion mode (same index, same lock, the settings' dense weight) queries it."""

    def __init__(self, runtime: RetrieverRuntime) -> None:
        self.runtime = runtime
        weight = runtime.settings.hybrid_dense_weight
        self.search_services: dict[str, SearchService] = {
            fusion: runtime.search_with(FusionSettings(method=fusion, dense_weight=weight)) for fusion in FUSIONS
        }
        if runtime.settings.hybrid_normalization == "learned":
            # The served learned fusion (its model loaded by the runtime), for the ``default`` run.
            self.search_services["learned"] = runtime.search
        self._weighted: dict[float, SearchService] = {}

    def search_service(self, fusion: str, dense_weight: float | None = None) -> SearchService:
        """The search service of ``fusion``; with a ``dense_weight`` (min_max only), one with that weight
        instead of the settings' (built once per weight, same index and lock)."""
        if dense_weight is None or fusion != "min_max":
            return self.search_services[fusion]
        if dense_weight not in self._weighted:
            self._weighted[dense_weight] = self.runtime.search_with(
                FusionSettings(method="min_max", dense_weight=dense_weight), weigh_by_language=False
            )
        return self._weighted[dense_weight]

    @property
    def settings(self) -> RetrieverSettings:
        return self.runtime.settings

    @property
    def embedder(self) -> Embedder:
        return self.runtime.embedder

    @property
    def backend(self) -> SearchBackend:
        return self.runtime.backend

    async def ingest(self, documents: Sequence[DocumentIn], request_size: int = 1000) -> IngestStats:
        """Ingest in requests of ``request_size`` documents (the API's limit is 1000 per request)."""
        started = time.perf_counter()
        written = chunks = failed = 0
        for start in range(0, len(documents), request_size):
            response: IngestResponse = await self.runtime.ingestor.ingest(list(documents[start : start + request_size]))
            written += response.documents
            chunks += response.chunks
            failed += len(response.failed)
        return IngestStats(written, chunks, failed, time.perf_counter() - started)

    async def ingest_corpus(self, corpus: Corpus, source: str, request_size: int = 1000) -> IngestStats:
        return await self.ingest(to_documents(corpus.values(), source), request_size)

    async def search(self, query: str, mode: SearchMode, top_k: int, fusion: str = "min_max") -> list[str]:
        """Doc ids of one search, best first (chunks of one document deduplicated)."""
        if not 1 <= top_k <= MAX_SEARCH_TOP_K:
            raise ValueError(f"top_k must be in [1, {MAX_SEARCH_TOP_K}], got {top_k}")
        request = SearchRequest(query=query, top_k=top_k, mode=mode)
        response = await self.search_services[fusion].search(request, EVAL_ACCESS)
        return dedupe_doc_ids(passage.doc_id for passage in response.passages)

    async def run(self, dataset: Dataset, mode: SearchMode, top_k: int, fusion: str = "min_max") -> dict[str, list[str]]:
        """One ranking per query of ``dataset`` (the query's own text; history is not used)."""
        return {query.id: await self.search(query.text, mode, top_k, fusion) for query in dataset.queries}


@asynccontextmanager
async def open_index(
    index_dir: str | Path, embedder: Embedder, settings: RetrieverSettings | None = None
) -> AsyncIterator[Retriever]:
    """The retriever's runtime over the embedded index in ``index_dir`` (created if absent), with
    ``embedder`` shared; ``settings`` (default: ``RETRIEVER_*``) give chunking, HNSW and fusion weight.
    The backend is closed on exit."""
    async with open_runtime(embedded_settings(index_dir, settings), embedder=embedder) as runtime:
        yield Retriever(runtime)
