"""The RAG pipeline in-process: the retriever's ``SearchService``, the reranker's ``RerankService``,
optionally the refiner's ``QueryRefiner`` and the generator's ``AnswerGenerator`` — the services' own
classes, called as plain Python (no HTTP), so an evaluation measures the code that runs in production.

- :func:`open_retriever` builds (or reuses) an embedded index of a dataset's corpus under a cache
  folder; the folder name carries a fingerprint of the corpus, the embedder and the chunking
  settings, so a changed corpus or setting gets a fresh index and an unchanged one is not ingested
  again (a run that is resumed does not pay the ingestion twice).
- :class:`Pipeline` answers one query for one :class:`~rag_eval.runs.RunConfig` and returns a
  JSON-able record: the ranking (document ids), per-stage latency, what each rerank stage did, and
  with ``llm`` the answer, its cited documents and whether it abstained. Searches are cached per
  query, so the many pipelines of an ablation share one search per retrieval mode (their latency is
  the one measured search).

Importing this module imports the retriever and the reranker (and so torch).
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.schemas import (
    GenerateRequest,
    HistoryTurn,
    Passage,
    RefineRequest,
    RerankRequest,
    SearchRequest,
    SearchResponse,
)
from rag_eval.datasets.types import Dataset, Query, Turn
from rag_eval.harness import Retriever, dedupe_doc_ids, to_documents
from rag_eval.runs import RunConfig

logger = logging.getLogger(__name__)

#: Documents per ingest request (the API allows 1000; smaller gives a finer progress bar).
INGEST_REQUEST_SIZE = 200


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)


# --------------------------------------------------------------------------------------- index


def corpus_fingerprint(dataset: Dataset, embedder: Any, settings: Any) -> str:
    digest = hashlib.sha256()
    digest.update(
        json.dumps(
            [
                getattr(embedder, "model_id", ""),
                getattr(settings, "chunk_tokens", None),
                getattr(settings, "chunk_overlap_tokens", None),
            ]
        ).encode()
    )
    for document in dataset.corpus.values():
        digest.update(b"\x00".join([document.id.encode(), document.title.encode(), document.text.encode()]))
        digest.update(b"\x01")
    return digest.hexdigest()


async def open_retriever(
    dataset: Dataset, cache_dir: Path, embedder: Any, *, settings: Any = None, progress: bool = True
) -> tuple[Retriever, dict[str, Any]]:
    """A :class:`Retriever` over ``dataset``'s corpus, ingesting it only when no complete index with
    the same fingerprint is cached. Returns it with facts about the index (for the report)."""
    from rag_retriever.settings import RetrieverSettings

    settings = settings or RetrieverSettings()
    fingerprint = corpus_fingerprint(dataset, embedder, settings)
    safe_name = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in dataset.name)
    index_dir = Path(cache_dir) / f"{safe_name}-{fingerprint[:16]}"
    marker = index_dir / "ingested.json"
    if marker.exists():
        info = json.loads(marker.read_text())
        info["reused"] = True
        return Retriever(index_dir / "index", embedder, settings), info
    if index_dir.exists():  # an interrupted ingestion: start over
        shutil.rmtree(index_dir)
    index_dir.mkdir(parents=True)
    retriever = Retriever(index_dir / "index", embedder, settings)
    documents = to_documents(dataset.corpus.values(), source=dataset.name)
    written = chunks = failed = 0
    started = time.perf_counter()
    bar = _bar(total=len(documents), desc=f"{dataset.name}: ingest", unit="doc", disable=not progress)
    try:
        for start in range(0, len(documents), INGEST_REQUEST_SIZE):
            batch = documents[start : start + INGEST_REQUEST_SIZE]
            stats = await retriever.ingest(batch, request_size=INGEST_REQUEST_SIZE)
            written, chunks, failed = written + stats.documents, chunks + stats.chunks, failed + stats.failed
            bar.update(len(batch))
    except BaseException:
        await retriever.close()
        raise
    finally:
        bar.close()
    info = {
        "fingerprint": fingerprint,
        "documents": written,
        "chunks": chunks,
        "failed": failed,
        "ingest_seconds": round(time.perf_counter() - started, 1),
        "embedder": getattr(embedder, "model_id", ""),
    }
    marker.write_text(json.dumps(info, indent=2))
    info["reused"] = False
    return retriever, info


def _bar(**kwargs: Any) -> Any:
    from tqdm.auto import tqdm

    return tqdm(**kwargs)


# --------------------------------------------------------------------------------------- parts


@dataclass
class RerankerHandle:
    """The reranker's service and what has to be closed at the end (its micro-batcher)."""

    service: Any
    parts: Any
    cross_encoder_model: str

    async def aclose(self) -> None:
        if self.parts is not None and self.parts.pair_queue is not None:
            await self.parts.pair_queue.aclose()


async def open_reranker(embedder: Any, llm_settings: Any = None, settings: Any = None) -> RerankerHandle:
    """The reranker's stages as the service builds them (``rag_reranker.parts.build_parts``, settings
    from ``RERANKER_*``), with the retriever's embedder shared. With ``llm_settings``, gMMR's adaptive λ
    asks that endpoint; without, ``gmmr:adaptive`` is not available. A configured cross-encoder
    (``RERANKER_CROSS_ENCODER_MODEL``) is loaded here."""
    import asyncio

    from rag_reranker.parts import build_parts
    from rag_reranker.rerank_service import RerankService
    from rag_reranker.settings import RerankerSettings

    settings = settings or RerankerSettings()
    parts = build_parts(settings, llm_settings)
    if parts.cross_encoder is not None:
        await asyncio.to_thread(parts.cross_encoder.warm_up)
    if parts.pair_queue is not None:
        parts.pair_queue.start()
    service = RerankService(parts.stages, default_chain=[], embedder=embedder)
    return RerankerHandle(service, parts, settings.cross_encoder_model)


def open_refiner(llm_settings: Any) -> Any:
    from rag_common.llm import build_chat_model
    from rag_refiner.query_refiner import QueryRefiner
    from rag_refiner.rewrite_prompt import REWRITE_MAX_TOKENS
    from rag_refiner.settings import RefinerSettings

    settings = RefinerSettings()
    model = build_chat_model(llm_settings, max_tokens=REWRITE_MAX_TOKENS)
    if hasattr(QueryRefiner, "from_settings"):  # as the refiner's app builds it
        return QueryRefiner.from_settings(model, settings)
    return QueryRefiner(
        model,
        history_turns=settings.history_turns,
        history_answer_chars=settings.history_answer_chars,
        max_query_chars=settings.max_query_chars,
        llm_timeout_s=settings.llm_timeout_s,
    )


def open_generator(llm_settings: Any) -> Any:
    from rag_generator.app import build_answer_generator
    from rag_generator.settings import GeneratorSettings

    return build_answer_generator(llm_settings, GeneratorSettings())


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


class StageNotAvailable(RuntimeError):
    """A run needs a part that was not built (reranker, refiner, generator)."""


class Pipeline:
    def __init__(
        self,
        retriever: Retriever,
        reranker: Any = None,
        *,
        refiner: Any = None,
        generator: Any = None,
    ) -> None:
        self.retriever = retriever
        self.reranker = reranker
        self.refiner = refiner
        self.generator = generator
        self._cache: dict[tuple[Any, ...], _Search] = {}
        self._refined: dict[str, tuple[str, dict[str, Any], float]] = {}

    def clear_cache(self) -> None:
        """Forget cached searches and rewrites (call between queries to bound memory)."""
        self._cache.clear()
        self._refined.clear()

    async def _search(self, config: RunConfig, text: str) -> tuple[_Search, bool]:
        """The search for ``config``; ``True`` when it is served from the cache."""
        with_vectors = config.needs_embeddings
        key = (config.mode, config.fusion, text, config.candidates)
        cached = self._cache.get(key + (True,)) or (None if with_vectors else self._cache.get(key + (False,)))
        if cached is not None:
            return cached, True
        request = SearchRequest(query=text, top_k=config.candidates, mode=config.mode, include_embeddings=with_vectors)
        started = time.perf_counter()
        response: SearchResponse = await self.retriever.search_services[config.fusion].search(request)
        ms = _ms(started)
        vectors = None
        passages = response.passages
        if with_vectors:
            vectors = np.asarray([p.embedding for p in passages], dtype=np.float32).reshape(len(passages), -1)
            passages = [p.model_copy(update={"embedding": None}) for p in passages]
        found = _Search(passages, vectors, response.query_embedding, ms, float(response.timings_ms.get("embed", 0.0)))
        self._cache[key + (with_vectors,)] = found
        return found, False

    async def _refine(self, query: Query) -> tuple[str, dict[str, Any], float]:
        if query.id in self._refined:
            return self._refined[query.id]
        if self.refiner is None:
            raise StageNotAvailable("this run needs the refiner (run with the LLM)")
        started = time.perf_counter()
        response = await self.refiner.refine(RefineRequest(message=query.text, history=history_pairs(query.history)))
        info = {"method": response.method, "rewritten": response.rewritten}
        if getattr(response, "intent", "rag") != "rag":
            info["intent"] = response.intent
        result = (response.query, info, _ms(started))
        self._refined[query.id] = result
        return result

    async def run(self, config: RunConfig, query: Query) -> dict[str, Any]:
        """One query through ``config``'s pipeline: a JSON-able record (see the module docstring)."""
        latency: dict[str, float] = {}
        record: dict[str, Any] = {"query_id": query.id}
        text = query.text
        if config.refiner:
            text, refine_info, refine_ms = await self._refine(query)
            latency["refine"] = refine_ms
            record["refine"] = refine_info
        record["search_query"] = text

        search, cached = await self._search(config, text)
        retrieve_ms, embed_ms = search.ms, search.embed_ms
        if cached and config.mode == "bm25" and not config.needs_embeddings and search.vectors is not None:
            # That search embedded the query only to hand its vector to the reranker: not this run's cost.
            retrieve_ms, embed_ms = max(0.0, retrieve_ms - embed_ms), 0.0
        latency["retrieve"] = retrieve_ms
        if embed_ms:
            latency["retrieve.embed"] = embed_ms

        if config.reranks:
            final, stage_info, rerank_latency = await self._rerank(config, text, search)
            latency.update(rerank_latency)
            record["stages"] = stage_info
        else:
            final = search.passages[: config.top_k]
        record["ranking"] = dedupe_doc_ids(p.doc_id for p in final)

        if config.llm:
            record.update(await self._generate(text, final, query, latency))
        latency["total"] = round(sum(v for k, v in latency.items() if "." not in k), 3)
        record["latency_ms"] = latency
        return record

    async def _rerank(
        self, config: RunConfig, text: str, search: _Search
    ) -> tuple[list[Passage], dict[str, Any], dict[str, float]]:
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
        info: dict[str, Any] = {}
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
        return response.passages, info, latency

    async def _generate(
        self, text: str, final: list[Passage], query: Query, latency: dict[str, float]
    ) -> dict[str, Any]:
        if self.generator is None:
            raise StageNotAvailable("this run generates but the pipeline has no generator (LLM)")
        passages = [p.model_copy(update={"embedding": None}) for p in final[:50]]
        by_chunk = {p.chunk_id: p.doc_id for p in passages}
        started = time.perf_counter()
        try:
            response = await self.generator.generate(
                GenerateRequest(query=text, passages=passages, history=history_pairs(query.history))
            )
        except Exception as exc:  # a dead or slow LLM: record it, keep the run going
            latency["generate"] = _ms(started)
            return {"generation_error": f"{type(exc).__name__}: {exc}"[:300]}
        latency["generate"] = _ms(started)
        shown = passages[: getattr(self.generator, "_max_passages", 6)]
        return {
            "contexts": [p.text[:1200] for p in shown],  # what the generator read (for the LLM judge)
            "answer": response.answer,
            "abstained": response.abstained,
            "abstain_reason": response.abstain_reason,
            "cited_doc_ids": list(dict.fromkeys(by_chunk.get(c.chunk_id, c.chunk_id) for c in response.citations)),
        }
