"""One search request → passages, in the requested mode (dense, bm25 or hybrid).

Hybrid fusion is the backend's job: OpenSearch fuses server-side in a search pipeline, the embedded
backend with ``fusion.py``; so ``timings_ms["search"]`` includes the fusion.
"""

from __future__ import annotations

import asyncio
import time

from rag_common.embedders import Embedder
from rag_common.schemas import SearchRequest, SearchResponse
from rag_common.service import ServiceError
from rag_retriever.backends.base import FILTER_FIELDS, FusionSettings, Searcher
from rag_retriever.locking import ReadWriteLock


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
        backend: Searcher,
        embedder: Embedder,
        lock: ReadWriteLock,
        *,
        fusion: FusionSettings = FusionSettings(),
        default_top_k: int = 10,
    ) -> None:
        self._backend = backend
        self._embedder = embedder
        self._lock = lock
        self._fusion = fusion
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
                hits = await self._backend.search_dense(vector, top_k, filters)
            elif request.mode == "bm25":
                hits = await self._backend.search_bm25(request.query, top_k, filters)
            else:
                hits = await self._backend.search_hybrid(request.query, vector, top_k, filters, self._fusion)
        timings["search"] = _elapsed_ms(step)

        timings["total"] = _elapsed_ms(started)
        return SearchResponse(passages=[hit.to_passage() for hit in hits], mode=request.mode, timings_ms=timings)
