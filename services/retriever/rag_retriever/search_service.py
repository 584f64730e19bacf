"""One search request → passages, in the requested mode (dense, bm25 or hybrid)."""

from __future__ import annotations

import asyncio
import time

import numpy as np

from rag_common.embedders import Embedder
from rag_common.schemas import SearchRequest, SearchResponse
from rag_common.service import ServiceError
from rag_retriever.backends.base import FILTER_FIELDS, SearchBackend
from rag_retriever.fusion import FusionMode, candidates_per_list, fuse
from rag_retriever.locking import ReadWriteLock
from rag_retriever.records import ScoredChunk


def _elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


def validate_filters(filters: dict[str, str | list[str]]) -> dict[str, list[str]]:
    unknown = sorted(set(filters) - set(FILTER_FIELDS))
    if unknown:
        raise ServiceError(
            400, f"unknown filter field(s) {', '.join(unknown)}; allowed: {', '.join(FILTER_FIELDS)}"
        )
    normalised = {field: [value] if isinstance(value, str) else list(value) for field, value in filters.items()}
    empty = sorted(field for field, values in normalised.items() if not values)
    if empty:
        raise ServiceError(400, f"filter field(s) {', '.join(empty)} given an empty list of values")
    return normalised


class SearchService:
    def __init__(
        self,
        backend: SearchBackend,
        embedder: Embedder,
        lock: ReadWriteLock,
        *,
        fusion: FusionMode = "min_max",
        dense_weight: float = 0.5,
        default_top_k: int = 10,
    ) -> None:
        self._backend = backend
        self._embedder = embedder
        self._lock = lock
        self._fusion = fusion
        self._dense_weight = dense_weight
        self._default_top_k = default_top_k

    async def search(self, request: SearchRequest) -> SearchResponse:
        started = time.perf_counter()
        filters = validate_filters(request.filters)
        top_k = request.top_k if "top_k" in request.model_fields_set else self._default_top_k
        timings: dict[str, float] = {}

        vector = None
        if request.mode in ("dense", "hybrid"):
            step = time.perf_counter()
            vector = (await asyncio.to_thread(self._embedder.encode_queries, [request.query]))[0]
            timings["embed"] = _elapsed_ms(step)

        step = time.perf_counter()
        async with self._lock.read():
            if request.mode == "dense":
                hits = await asyncio.to_thread(self._backend.search_dense, vector, top_k, filters)
            elif request.mode == "bm25":
                hits = await asyncio.to_thread(self._backend.search_bm25, request.query, top_k, filters)
            else:
                dense, bm25 = await self._both(request.query, vector, candidates_per_list(top_k), filters)
        timings["search"] = _elapsed_ms(step)

        if request.mode == "hybrid":
            step = time.perf_counter()
            hits = fuse(self._fusion, dense, bm25, top_k, self._dense_weight)
            timings["fuse"] = _elapsed_ms(step)

        timings["total"] = _elapsed_ms(started)
        return SearchResponse(passages=[hit.to_passage() for hit in hits], mode=request.mode, timings_ms=timings)

    async def _both(
        self, query: str, vector: np.ndarray, k: int, filters: dict[str, list[str]]
    ) -> tuple[list[ScoredChunk], list[ScoredChunk]]:
        return await asyncio.gather(
            asyncio.to_thread(self._backend.search_dense, vector, k, filters),
            asyncio.to_thread(self._backend.search_bm25, query, k, filters),
        )
