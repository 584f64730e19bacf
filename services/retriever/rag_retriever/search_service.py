"""One search request → passages, in the requested mode (dense, bm25 or hybrid).

Hybrid fusion is the backend's job: OpenSearch fuses server-side in a search pipeline, the embedded
backend with ``fusion.py``; so ``timings_ms["search"]`` includes the fusion.

Graph signals (``graph`` / ``second_hop``, defaults ``RETRIEVER_GRAPH_PPR`` / ``_SECOND_HOP``) run
after the first pass on backends that have the structure-and-entity graph (the embedded one,
``rag_retriever.graph_retrieval``; OpenSearch, ``backends/opensearch_graph.py``); ``timings_ms["graph"]``
is their time. The graph signals are an ability some backends have (``backends.base.GraphSearcher``),
handed in by the composition root (``runtime``), never looked for on the backend: without one the
service ignores the flags and reports ``timings_ms["graph_unavailable"] = 1``; OpenSearch runs the
second hop but not personalised PageRank, and a request for PageRank there reports
``timings_ms["graph_ppr_unavailable"] = 1``.

Learned fusion (``learned``, a :class:`~rag_retriever.learned_fusion.FusionModel`; hybrid mode only):
the candidates are the first-pass min-max hybrid list plus the second hop's and (when the model reads
it) PageRank's additions (``rag_retriever.fusion_candidates``), each scored by the model from its
features (``rag_retriever.fusion_features``) and ranked by that score. The graph signals are then the
model's inputs, so the request's ``graph`` / ``second_hop`` flags do not apply; ``timings_ms["search"]``
includes the graph signals, the features and the scoring.
The candidates come from a ``backends.base.FusionCandidateSource``, handed in like the graph: backends
without one (OpenSearch) cannot serve learned fusion; the settings refuse that pairing.

The request's filters are normalised here, once (``backends.base.normalise_filters``); the backends
take them as they are.

With ``include_embeddings`` the response also carries the query's embedding and each passage's
stored embedding (for the reranker), read by the backend together with the hits. With
``include_sentence_vectors`` each passage carries its chunk's stored sentence vectors, where the
chunk has them (for the generator: ``rag_common.sentence_vectors``).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import numpy as np

from rag_common.embedders import Embedder
from rag_common.schemas import SearchRequest, SearchResponse
from rag_retriever.backends.base import (
    AccessFilter,
    Filters,
    FusionCandidates,
    FusionCandidateSource,
    FusionSettings,
    GraphOptions,
    GraphSearcher,
    Searcher,
    normalise_filters,
)
from rag_retriever.fusion_features import feature_matrix
from rag_retriever.learned_fusion import FusionModel
from rag_retriever.records import ScoredChunk
from rag_retriever.locking import ReadWriteLock
from rag_retriever.query_language import QueryLanguages
from rag_retriever.settings import RetrieverSettings


def _elapsed_ms(start: float) -> float:
    return round((time.perf_counter() - start) * 1000.0, 3)


@dataclass(frozen=True, slots=True)
class GraphDefaults:
    """Whether a request that does not say runs the graph signals, and their parameters; no defaults
    of its own: ``of(settings)`` (``graph_ppr``, ``graph_second_hop``, ``graph_*``)."""

    ppr: bool
    second_hop: bool
    options: GraphOptions

    @classmethod
    def of(cls, settings: RetrieverSettings) -> GraphDefaults:
        return cls(settings.graph_ppr, settings.graph_second_hop, GraphOptions.of(settings))


class SearchService:
    def __init__(
        self,
        backend: Searcher,
        embedder: Embedder,
        lock: ReadWriteLock,
        *,
        fusion: FusionSettings,
        default_top_k: int,
        graph: GraphDefaults,
        graph_searcher: GraphSearcher | None = None,
        candidate_source: FusionCandidateSource | None = None,
        learned: FusionModel | None = None,
        languages: QueryLanguages | None = None,
    ) -> None:
        """``graph_searcher`` and ``candidate_source``: the backend's abilities beyond ``Searcher``, as
        the composition root knows them (None: the backend has not got it). ``languages``: how a query's
        language is named and weighs the dense list (the runtime always hands it in; None, for tools and
        tests: every query is searched as "unsure" with ``fusion`` as given)."""
        self._graph = graph
        self._graph_searcher = graph_searcher
        self._candidate_source = candidate_source
        self._learned = learned
        self._backend = backend
        self._embedder = embedder
        self._lock = lock
        self._fusion = fusion
        self._default_top_k = default_top_k
        self._languages = languages

    async def search(self, request: SearchRequest, access: AccessFilter) -> SearchResponse:
        """Passages for ``request`` in its mode, among the chunks ``access`` may read (the backend
        applies it inside the search, with the request's filters).

        The query is embedded for ``dense`` and ``hybrid``. With ``include_embeddings`` each passage's
        ``embedding`` is its stored unit-length vector (float32 values as Python floats, not rounded)
        and ``query_embedding`` is the query's vector, the one the search used; in ``bm25`` mode the
        query is embedded anyway (``timings_ms["embed"]`` then appears too), so the reranker always
        gets a query embedding. Without the flag both stay None.
        """
        started = time.perf_counter()
        filters = normalise_filters(request.filters)
        top_k = request.top_k if "top_k" in request.model_fields_set else self._default_top_k
        with_vectors = request.include_embeddings
        sentences = request.include_sentence_vectors
        # Named only when asked for: a Searcher written before sentence vectors still serves the rest.
        extra = {"with_sentence_vectors": True} if sentences else {}
        timings: dict[str, float] = {}
        language, fusion = self._language_and_fusion(request.query, request.language)

        vector = None
        if request.mode in ("dense", "hybrid") or with_vectors:
            step = time.perf_counter()
            vector = (await asyncio.to_thread(self._embedder.encode_queries, [request.query]))[0]
            timings["embed"] = _elapsed_ms(step)

        step = time.perf_counter()
        async with self._lock.read():
            if request.mode == "dense":
                hits = await self._backend.search_dense(
                    vector, top_k, filters, access=access, with_vectors=with_vectors, **extra
                )
            elif request.mode == "bm25":
                hits = await self._backend.search_bm25(
                    request.query, top_k, filters, access=access, with_vectors=with_vectors, language=language, **extra
                )
            elif self._learned is not None:
                found, matrix = await self._candidates(request.query, vector, top_k, filters, access, with_vectors,
                                                       ppr=self._learned.uses_ppr, language=language, fusion=fusion)
                hits = _ranked_by(found.hits, self._learned.score(matrix), top_k)
            else:
                hits = await self._backend.search_hybrid(
                    request.query, vector, top_k, filters, fusion, access=access, with_vectors=with_vectors,
                    language=language, **extra,
                )
            timings["search"] = _elapsed_ms(step)
            ppr = self._graph.ppr if request.graph is None else request.graph
            hop = self._graph.second_hop if request.second_hop is None else request.second_hop
            if self._learned is not None and request.mode == "hybrid":
                ppr = hop = False  # the model has read both signals already
            if ppr or hop:
                step = time.perf_counter()
                if self._graph_searcher is None:
                    timings["graph_unavailable"] = 1.0
                else:
                    hits, info = await self._graph_searcher.graph_search(
                        request.query, hits, top_k, filters, access,
                        with_vectors=with_vectors, ppr=ppr, hop=hop, options=self._graph.options,
                    )
                    timings["graph"] = _elapsed_ms(step)
                    if info.get("ppr_unavailable"):
                        timings["graph_ppr_unavailable"] = 1.0

        query_embedding = None
        if with_vectors:
            missing = [hit.chunk.chunk_id for hit in hits if hit.vector is None]
            if missing:
                raise RuntimeError(f"the backend returned hits without their vectors: {missing[:5]}")
            query_embedding = np.asarray(vector, dtype=np.float32).reshape(-1).tolist()

        timings["total"] = _elapsed_ms(started)
        return SearchResponse(
            passages=[hit.to_passage(with_sentence_vectors=sentences) for hit in hits],
            mode=request.mode,
            timings_ms=timings,
            query_embedding=query_embedding,
            language=language,
        )

    async def fusion_candidates(
        self, query: str, top_k: int, access: AccessFilter, *, ppr: bool = True
    ) -> tuple[FusionCandidates, np.ndarray]:
        """Learned fusion's candidates for ``query`` (hybrid first pass of ``top_k`` plus the graph's
        additions) and their feature matrix, columns in ``FEATURE_NAMES`` order: what the model scores
        at a search, and what ``ragctl train-fusion`` learns from."""
        vector = (await asyncio.to_thread(self._embedder.encode_queries, [query]))[0]
        language, fusion = self._language_and_fusion(query, None)
        async with self._lock.read():
            return await self._candidates(query, vector, top_k, {}, access, False, ppr=ppr, language=language,
                                          fusion=fusion)

    def _language_and_fusion(self, query: str, declared: str | None) -> tuple[str | None, FusionSettings]:
        if self._languages is None:
            return declared, self._fusion
        language = self._languages.language_of(query, declared)
        return language, self._languages.fusion_for(self._fusion, language)

    async def _candidates(
        self, query: str, vector: np.ndarray, top_k: int, filters: Filters, access: AccessFilter,
        with_vectors: bool, *, ppr: bool, language: str | None, fusion: FusionSettings,
    ) -> tuple[FusionCandidates, np.ndarray]:
        if self._candidate_source is None:
            raise RuntimeError("learned fusion needs the embedded backend (its structure-and-entity graph)")
        found = await self._candidate_source.fusion_candidates(
            query, vector, top_k, filters, access, with_vectors=with_vectors, ppr=ppr,
            options=self._graph.options, dense_weight=fusion.dense_weight, language=language,
        )
        blind = self._languages is not None and not self._languages.knows(language)
        return found, feature_matrix(found.signals, dense_blind=blind)


def _ranked_by(hits: list[ScoredChunk], scores: np.ndarray, top_k: int) -> list[ScoredChunk]:
    """``hits`` re-scored and sorted by ``scores`` (ties: the incoming order, which is first-pass order)."""
    order = sorted(range(len(hits)), key=lambda i: (-scores[i], i))[:top_k]
    return [ScoredChunk(hits[i].chunk, float(scores[i]), hits[i].vector) for i in order]
