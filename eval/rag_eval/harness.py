"""Drive the real retriever (its Ingestor, SearchService and backend) over a dataset.

Everything the benchmarks call on the retriever goes through here, so a change of the retriever's
internal API is absorbed in one place:

- :func:`call` awaits a backend method's result only when it is awaitable, so the same code works
  with a synchronous ``SearchBackend`` and with the async one;
- :class:`BackendAdapter` gives the benchmarks async ``search_dense`` / ``search_bm25`` /
  ``search_hybrid`` / ``upsert`` whatever the backend provides (a backend without
  ``search_hybrid`` is fused here with ``rag_retriever.fusion``, as the service did before);
- :func:`fusion_config` builds what ``SearchService`` and ``search_hybrid`` take for a fusion mode
  (a ``FusionSettings`` when the retriever has it, else the mode name).

Importing this module imports the retriever (and so torch).
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.schemas import DocumentIn, IngestResponse, SearchRequest
from rag_eval.datasets.types import Corpus, Dataset, Document
from rag_retriever import fusion as fusion_module
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import Ingestor
from rag_retriever.locking import ReadWriteLock
from rag_retriever.records import ChunkRecord, ScoredChunk
from rag_retriever.search_service import SearchService
from rag_retriever.settings import RetrieverSettings
from rag_retriever.tokens import EmbedderTokenizer

try:  # the async backend protocol carries its fusion settings as a dataclass
    from rag_retriever.backends.base import FusionSettings
except ImportError:  # pragma: no cover - the older, synchronous retriever
    FusionSettings = None  # type: ignore[assignment,misc]

#: The fusion modes the benchmarks compare.
FUSIONS = ("min_max", "rrf")
#: The ``SearchRequest.top_k`` ceiling of the wire schema.
MAX_TOP_K = 200


async def call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``method(*args, **kwargs)``, awaited if it returned an awaitable (sync and async backends)."""
    result = method(*args, **kwargs)
    if inspect.isawaitable(result):
        result = await result
    return result


def fusion_config(method: str = "min_max", dense_weight: float = 0.5) -> Any:
    """What the retriever takes as a fusion choice: ``FusionSettings`` if it has it, else the name."""
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; use one of {', '.join(FUSIONS)}")
    if FusionSettings is not None:
        return FusionSettings(method=method, dense_weight=dense_weight)
    return method


def make_search_service(backend: Any, embedder: Any, lock: ReadWriteLock, fusion: str, dense_weight: float) -> SearchService:
    parameters = inspect.signature(SearchService).parameters
    if "dense_weight" in parameters:  # the older service fused itself
        return SearchService(backend, embedder, lock, fusion=fusion, dense_weight=dense_weight)
    return SearchService(backend, embedder, lock, fusion=fusion_config(fusion, dense_weight))


class BackendAdapter:
    """Async access to a backend whose methods may be sync or async."""

    def __init__(self, backend: Any) -> None:
        self.backend = backend

    @property
    def hybrid_path(self) -> str:
        """``"backend"`` when the backend fuses itself (``search_hybrid``), else ``"adapter"``."""
        return "backend" if hasattr(self.backend, "search_hybrid") else "adapter"

    async def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        await call(self.backend.upsert, chunks, vectors)

    async def count(self) -> int:
        return int(await call(self.backend.count))

    async def close(self) -> None:
        await call(self.backend.close)

    async def search_dense(self, vector: np.ndarray, k: int, filters: Any = None) -> list[ScoredChunk]:
        return await call(self.backend.search_dense, vector, k, filters)

    async def search_bm25(self, query: str, k: int, filters: Any = None) -> list[ScoredChunk]:
        return await call(self.backend.search_bm25, query, k, filters)

    async def search_hybrid(
        self, query: str, vector: np.ndarray, k: int, filters: Any = None, fusion: str = "min_max", dense_weight: float = 0.5
    ) -> list[ScoredChunk]:
        if self.hybrid_path == "backend":
            return await call(self.backend.search_hybrid, query, vector, k, filters, fusion_config(fusion, dense_weight))
        candidates = fusion_module.candidates_per_list(k)
        dense = await self.search_dense(vector, candidates, filters)
        bm25 = await self.search_bm25(query, candidates, filters)
        if fusion == "rrf":
            return fusion_module.rrf_fusion(dense, bm25, k)
        return fusion_module.min_max_fusion(dense, bm25, k, dense_weight)


def open_embedded_backend(index_dir: str | Path, dim: int, settings: RetrieverSettings, model_id: str = "") -> Any:
    return EmbeddedBackend(
        index_dir, dim, settings.hnsw_m, settings.hnsw_ef_construction, settings.hnsw_ef_search, model_id=model_id
    )


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
    """The retriever's own pieces over one index directory: the ``Ingestor`` to build it and one
    ``SearchService`` per fusion mode to query it. The embedder is passed in (loaded once)."""

    def __init__(self, index_dir: str | Path, embedder: Any, settings: RetrieverSettings | None = None) -> None:
        self.settings = settings or RetrieverSettings()
        self.embedder = embedder
        embedder.warm_up()
        self.backend = open_embedded_backend(index_dir, embedder.dim, self.settings, model_id=embedder.model_id)
        self.adapter = BackendAdapter(self.backend)
        self.lock = ReadWriteLock()
        self.chunker = Chunker(EmbedderTokenizer(embedder), self.settings.chunk_tokens, self.settings.chunk_overlap_tokens)
        self.ingestor = Ingestor(self.backend, embedder, self.chunker, self.lock)
        dense_weight = getattr(self.settings, "hybrid_dense_weight", 0.5)
        self.search_services = {
            fusion: make_search_service(self.backend, embedder, self.lock, fusion, dense_weight) for fusion in FUSIONS
        }

    async def ingest(self, documents: Sequence[DocumentIn], request_size: int = 1000) -> IngestStats:
        """Ingest in requests of ``request_size`` documents (the API's limit is 1000 per request)."""
        started = time.perf_counter()
        written = chunks = failed = 0
        for start in range(0, len(documents), request_size):
            response: IngestResponse = await self.ingestor.ingest(list(documents[start : start + request_size]))
            written += response.documents
            chunks += response.chunks
            failed += len(response.failed)
        return IngestStats(written, chunks, failed, time.perf_counter() - started)

    async def ingest_corpus(self, corpus: Corpus, source: str, request_size: int = 1000) -> IngestStats:
        return await self.ingest(to_documents(corpus.values(), source), request_size)

    async def search(self, query: str, mode: str, top_k: int, fusion: str = "min_max") -> list[str]:
        """Doc ids of one search, best first (chunks of one document deduplicated)."""
        if not 1 <= top_k <= MAX_TOP_K:
            raise ValueError(f"top_k must be in [1, {MAX_TOP_K}], got {top_k}")
        request = SearchRequest(query=query, top_k=top_k, mode=mode)
        response = await self.search_services[fusion].search(request)
        return dedupe_doc_ids(passage.doc_id for passage in response.passages)

    async def run(self, dataset: Dataset, mode: str, top_k: int, fusion: str = "min_max") -> dict[str, list[str]]:
        """One ranking per query of ``dataset`` (the query's own text; history is not used)."""
        return {query.id: await self.search(query.text, mode, top_k, fusion) for query in dataset.queries}

    async def close(self) -> None:
        await self.adapter.close()
