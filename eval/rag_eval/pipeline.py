"""The RAG pipeline in-process: the retriever's ``SearchService``, the reranker's ``RerankService``,
optionally the refiner's ``QueryRefiner`` and the generator's ``AnswerGenerator`` — the services' own
objects, taken from their runtimes (``rag_<service>.runtime.open_runtime``) and called as plain Python
(no HTTP), so an evaluation measures the code that runs in production. Nothing is assembled here:
whoever opens the runtimes keeps them open (an ``AsyncExitStack``, see ``rag_eval.evaluation``) and
hands their parts to :class:`Pipeline`.

- :func:`open_retriever` opens the retriever's runtime over an embedded index of a dataset's corpus
  under a cache folder, building it only when needed; the folder name carries a fingerprint of the
  corpus, the embedder (and its backend, if not torch), the chunking settings and the embedding template, so a changed corpus or setting gets a fresh index
  and an unchanged one is not ingested again (a run that is resumed does not pay the ingestion twice).
- :class:`Pipeline` answers one query for one :class:`~rag_eval.runs.RunConfig` and returns a
  JSON-able record: the ranking (document ids), per-stage latency, what each rerank stage did, and
  with ``llm`` the answer, its cited documents and whether it abstained. Every run makes and times
  its own search, so each run's latency is its own; only a run marked ``share_search`` (the λ sweep
  of an ablation) may take the search another run of the same query made, and then its record says
  ``search_reused`` and carries no ``retrieve`` and no ``total`` latency (its rerank time is its
  own). A dataset conversation reaches the refiner and the generator cut as the
  gateway cuts it (``rag_common.history.cut_history`` with ``GatewaySettings().history_window()``).

Importing this module imports the services (the retriever and the reranker, and so torch).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from rag_common.embedders import Embedder
from rag_common.history import HistoryWindow, cut_history
from rag_common.schemas import (
    MAX_TOP_K,
    GenerateRequest,
    HistoryTurn,
    Passage,
    RefineRequest,
    RerankRequest,
    SearchRequest,
    SearchResponse,
)
from rag_eval.datasets.types import Dataset, Query, Turn
from rag_eval.harness import EVAL_ACCESS, Retriever, dedupe_doc_ids, open_index, to_documents
from rag_eval.runs import RunConfig
from rag_gateway.settings import GatewaySettings
from rag_generator.answer_generator import AnswerGenerator
from rag_generator.settings import GeneratorSettings
from rag_refiner.query_refiner import QueryRefiner
from rag_reranker.rerank_service import RerankService
from rag_retriever.search_service import SearchService
from rag_retriever.settings import RetrieverSettings

logger = logging.getLogger(__name__)

#: A JSON-able record: the index facts of a report, one query's log line, a stage summary.
Record = dict[str, Any]

#: Documents per ingest request (the API allows 1000; smaller gives a finer progress bar).
INGEST_REQUEST_SIZE = 200


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


# --------------------------------------------------------------------------------------- index


def corpus_fingerprint(dataset: Dataset, embedder: Embedder, settings: RetrieverSettings) -> str:
    digest = hashlib.sha256()
    parts: list[object] = [embedder.model_id, settings.chunk_tokens, settings.chunk_overlap_tokens]
    if settings.embed_template != "{text}":  # text-only keeps the fingerprints (cached indexes) from before
        parts.append(settings.embed_template)
    if settings.sentence_vectors != "off":  # stored with the chunks: an index holds one kind (or none)
        parts.append(f"sentence_vectors={settings.sentence_vectors}")
    backend = getattr(embedder, "backend", "torch")
    if backend != "torch":  # torch keeps the fingerprints from before; another backend gets its own index
        parts.append(f"embedder_backend={backend}")
    digest.update(json.dumps(parts).encode())
    for document in dataset.corpus.values():
        digest.update(b"\x00".join([document.id.encode(), document.title.encode(), document.text.encode()]))
        digest.update(b"\x01")
    return digest.hexdigest()


@asynccontextmanager
async def open_retriever(
    dataset: Dataset,
    cache_dir: Path,
    embedder: Embedder,
    *,
    settings: RetrieverSettings | None = None,
    progress: bool = True,
) -> AsyncIterator[tuple[Retriever, Record]]:
    """The retriever's runtime over ``dataset``'s corpus (``rag_eval.harness.open_index``), ingesting
    it only when no complete index with the same fingerprint is cached. Yields it with facts about the
    index (for the report); the runtime is closed on exit."""
    settings = settings or RetrieverSettings()
    fingerprint = corpus_fingerprint(dataset, embedder, settings)
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in dataset.name)
    index_dir = Path(cache_dir) / f"{safe_name}-{fingerprint[:16]}"
    marker = index_dir / "ingested.json"
    reused = marker.exists()
    if not reused:
        if index_dir.exists():  # an interrupted ingestion: start over
            shutil.rmtree(index_dir)
        index_dir.mkdir(parents=True)
    async with open_index(index_dir / "index", embedder, settings) as retriever:
        if reused:
            info = json.loads(marker.read_text())
        else:
            info = await _ingest(retriever, dataset, fingerprint, progress)
            marker.write_text(json.dumps(info, indent=2))
        info["reused"] = reused
        yield retriever, info


async def _ingest(retriever: Retriever, dataset: Dataset, fingerprint: str, progress: bool) -> Record:
    documents = to_documents(dataset.corpus.values(), source=dataset.name)
    written = chunks = failed = 0
    started = time.perf_counter()
    with tqdm(total=len(documents), desc=f"{dataset.name}: ingest", unit="doc", disable=not progress) as bar:
        for start in range(0, len(documents), INGEST_REQUEST_SIZE):
            batch = documents[start : start + INGEST_REQUEST_SIZE]
            stats = await retriever.ingest(batch, request_size=INGEST_REQUEST_SIZE)
            written, chunks, failed = written + stats.documents, chunks + stats.chunks, failed + stats.failed
            bar.update(len(batch))
    return {
        "fingerprint": fingerprint,
        "documents": written,
        "chunks": chunks,
        "failed": failed,
        "ingest_seconds": round(time.perf_counter() - started, 1),
        "embedder": retriever.embedder.model_id,
        "embedder_backend": getattr(retriever.embedder, "backend", "torch"),
    }


def history_pairs(history: Sequence[Turn]) -> list[HistoryTurn]:
    """Dataset turns (speaker, text) → the services' question/answer pairs. A user turn without an
    agent reply gets an empty answer; consecutive user turns are kept as separate questions."""
    pairs: list[HistoryTurn] = []
    question: str | None = None
    for turn in history:
        if turn.speaker == "user":
            if question is not None:
                pairs.append(HistoryTurn(question=question, answer=""))
            question = turn.text
        else:
            pairs.append(HistoryTurn(question=question or "", answer=turn.text))
            question = None
    if question is not None:
        pairs.append(HistoryTurn(question=question, answer=""))
    return pairs


# --------------------------------------------------------------------------------------- pipeline


@dataclass
class _Search:
    passages: list[Passage]  # without embeddings
    vectors: np.ndarray | None  # (n, dim) float32, aligned to passages, when asked for
    query_vector: list[float] | None
    ms: float
    embed_ms: float
    #: The retriever's graph signals inside ``ms`` (0 when the run has none).
    graph_ms: float = 0.0


class StageNotAvailable(RuntimeError):
    """A run needs a part that was not built (reranker, refiner, generator)."""


class Pipeline:
    """One query through a run's stages. ``retriever`` is required; ``reranker`` (the reranker
    runtime's ``rerank``), ``refiner`` and ``generator`` (the refiner's and generator's runtimes'
    objects) only for the runs that use them. ``generator_settings`` are the ones the generator was
    built with (how many passages it shows the model), default ``GENERATOR_*``; ``history_window``
    is how much of a conversation the LLM stages see, default the gateway's (``GATEWAY_HISTORY_*``)."""

    def __init__(
        self,
        retriever: Retriever,
        reranker: RerankService | None = None,
        *,
        refiner: QueryRefiner | None = None,
        generator: AnswerGenerator | None = None,
        generator_settings: GeneratorSettings | None = None,
        history_window: HistoryWindow | None = None,
    ) -> None:
        self.retriever = retriever
        self.reranker = reranker
        self.refiner = refiner
        self.generator = generator
        self.generator_settings = generator_settings or GeneratorSettings()
        self.history_window = history_window or GatewaySettings().history_window()
        self._cache: dict[tuple[Any, ...], _Search] = {}
        #: Search text → the search service whose learned fusion model never saw that question (set by
        #: the evaluation before a cross-fitted ``hybrid:learned`` run, ``rag_eval.fusion_training``).
        self.held_out_search: dict[str, SearchService] = {}
        self._refined: dict[str, tuple[str, dict[str, str | bool], float]] = {}

    def history(self, query: Query) -> list[HistoryTurn]:
        """The query's conversation as the gateway would send it to the refiner and the generator."""
        return cut_history(history_pairs(query.history), self.history_window)

    def clear_cache(self) -> None:
        """Forget cached searches and rewrites (call between queries to bound memory)."""
        self._cache.clear()
        self._refined.clear()

    async def _search(self, config: RunConfig, text: str) -> tuple[_Search, bool]:
        """The search for ``config``; ``True`` when it is another run's search, reused (only for a run
        that allows it, ``config.share_search``). Any other run searches, and is timed, itself."""
        with_vectors = config.needs_embeddings
        key = (config.mode, config.fusion, config.dense_weight, text, config.candidates, config.graph, config.hop)
        if config.share_search:
            cached = self._cache.get((*key, True)) or (None if with_vectors else self._cache.get((*key, False)))
            if cached is not None:
                return cached, True
        # The graph switches are explicit (a run names them or not), never the retriever's defaults.
        request = SearchRequest(query=text, top_k=config.candidates, mode=config.mode, include_embeddings=with_vectors,
                                graph=config.graph, second_hop=config.hop)
        started = time.perf_counter()
        if config.cross_fitted:
            if text not in self.held_out_search:
                raise StageNotAvailable(f"no cross-fitted fusion model for the question {text[:60]!r}")
            service = self.held_out_search[text]
        elif config.fusion not in self.retriever.search_services:
            raise StageNotAvailable(f"fusion {config.fusion} is not served here (RETRIEVER_HYBRID_NORMALIZATION)")
        else:
            service = self.retriever.search_service(config.fusion, config.dense_weight)
        response: SearchResponse = await service.search(request, EVAL_ACCESS)
        ms = _ms(started)
        vectors = None
        passages = response.passages
        if with_vectors:
            vectors = np.asarray([p.embedding for p in passages], dtype=np.float32).reshape(len(passages), -1)
            passages = [p.model_copy(update={"embedding": None}) for p in passages]
        found = _Search(passages, vectors, response.query_embedding, ms, float(response.timings_ms.get("embed", 0.0)),
                        float(response.timings_ms.get("graph", 0.0)))
        self._cache[(*key, with_vectors)] = found
        return found, False

    async def _refine(self, query: Query) -> tuple[str, dict[str, str | bool], float]:
        if query.id in self._refined:
            return self._refined[query.id]
        if self.refiner is None:
            raise StageNotAvailable("this run needs the refiner (run with the LLM)")
        started = time.perf_counter()
        response = await self.refiner.refine(RefineRequest(message=query.text, history=self.history(query)))
        info: dict[str, str | bool] = {"method": response.method, "rewritten": response.rewritten}
        if response.intent != "rag":
            info["intent"] = response.intent
        result = (response.query, info, _ms(started))
        self._refined[query.id] = result
        return result

    async def run(self, config: RunConfig, query: Query) -> Record:
        """One query through ``config``'s pipeline: a JSON-able record (see the module docstring)."""
        latency: dict[str, float] = {}
        record: Record = {"query_id": query.id}
        text = query.text
        if config.refiner:
            text, refine_info, refine_ms = await self._refine(query)
            latency["refine"] = refine_ms
            record["refine"] = refine_info
        record["search_query"] = text

        search, reused = await self._search(config, text)
        if reused:
            # Another run's search: its time is that run's, not this one's (left out of this latency).
            record["search_reused"] = True
        else:
            latency["retrieve"] = search.ms
            if search.embed_ms:
                latency["retrieve.embed"] = search.embed_ms
            if search.graph_ms:
                latency["retrieve.graph"] = search.graph_ms

        if config.reranks:
            final, stage_info, rerank_latency = await self._rerank(config, text, search)
            latency.update(rerank_latency)
            record["stages"] = stage_info
        else:
            final = search.passages[: config.top_k]
        record["ranking"] = dedupe_doc_ids(p.doc_id for p in final)

        if config.llm:
            record.update(await self._generate(text, final, query, latency))
        if not reused:  # a total without the search would not be this pipeline's time
            latency["total"] = round(sum(v for k, v in latency.items() if "." not in k), 3)
        record["latency_ms"] = latency
        return record

    async def _rerank(
        self, config: RunConfig, text: str, search: _Search
    ) -> tuple[list[Passage], Record, dict[str, float]]:
        if self.reranker is None:
            raise StageNotAvailable("this run reranks but the pipeline has no reranker")
        if not search.passages:
            return [], {stage.name: "skipped: no candidates" for stage in config.stages}, {"rerank": 0.0}
        passages = search.passages
        if search.vectors is not None and config.needs_embeddings:
            passages = [p.model_copy(update={"embedding": v.tolist()}) for p, v in zip(passages, search.vectors)]
        request = RerankRequest.model_construct(
            query=text,
            passages=passages,
            top_k=config.top_k,
            stages=[stage.wire() for stage in config.stages],
            query_embedding=search.query_vector if config.needs_embeddings else None,
        )
        started = time.perf_counter()
        response = await self.reranker.rerank(request)
        latency = {"rerank": _ms(started)}
        info: Record = {}
        for report in response.reports:
            info[report.name] = report.status if report.status == "ran" else f"{report.status}: {report.reason}"
            if report.status == "ran":
                latency[f"rerank.{report.name}"] = report.ms
            if report.name == "gmmr" and "lambda" in report.detail:
                info["gmmr_lambda"] = report.detail["lambda"]
                if "relevance" in report.detail:  # what the stage used (the request's, or the service default)
                    info["gmmr_relevance"] = report.detail["relevance"]
                if report.detail.get("fallback"):
                    info["gmmr_fallback"] = str(report.detail["fallback"])[:200]
        # The reranker names the kept passages by id: these are the ones it was sent, in its order.
        return response.ranked_passages(passages), info, latency

    async def _generate(
        self, text: str, final: list[Passage], query: Query, latency: dict[str, float]
    ) -> Record:
        if self.generator is None:
            raise StageNotAvailable("this run generates but the pipeline has no generator (LLM)")
        passages = [p.model_copy(update={"embedding": None}) for p in final[:MAX_TOP_K]]
        by_chunk = {p.chunk_id: p.doc_id for p in passages}
        started = time.perf_counter()
        try:
            response = await self.generator.generate(
                GenerateRequest(query=text, passages=passages, history=self.history(query))
            )
        except Exception as exc:  # a dead or slow LLM (DependencyFailed) or a bad reply: record it, keep going
            latency["generate"] = _ms(started)
            return {"generation_error": f"{type(exc).__name__}: {exc}"[:300]}
        latency["generate"] = _ms(started)
        shown = passages[: self.generator_settings.max_passages]
        return {
            "contexts": [p.text[:1200] for p in shown],  # what the generator read (for the LLM judge)
            "answer": response.answer,
            "abstained": response.abstained,
            "abstain_reason": response.abstain_reason,
            "cited_doc_ids": list(dict.fromkeys(by_chunk.get(c.chunk_id, c.chunk_id) for c in response.citations)),
        }
