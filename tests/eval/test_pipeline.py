"""The in-process pipeline with the reranker's real stages (``build_parts``, ``RerankService``) over a
fake retriever, refiner and generator: search sharing between runs, latency accounting, rerank,
refine and generate records. No model is loaded."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rag_common.schemas import (
    Citation,
    GenerateRequest,
    GenerateResponse,
    HistoryTurn,
    Passage,
    RefineRequest,
    RefineResponse,
    SearchRequest,
    SearchResponse,
)
from rag_eval.datasets.types import Query, Turn
from rag_eval.pipeline import Pipeline, StageNotAvailable, history_pairs, open_reranker
from rag_eval.runs import parse_run

DIM = 8


def unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


class FakeSearch:
    """Ten chunks of five documents; chunk i's vector is closer to the query the larger i is, while the
    retriever's order is 0..9 — so gMMR with λ = 1 (cosine relevance only) reverses it."""

    def __init__(self) -> None:
        self.requests: list[SearchRequest] = []
        rng = np.random.default_rng(0)
        self.query = unit(np.ones(DIM))
        noise = rng.normal(size=(10, DIM))
        self.vectors = np.stack([unit(self.query * (i + 1) + 3.0 * unit(noise[i])) for i in range(10)])
        order = np.argsort(self.vectors @ self.query)  # ascending cosine: retriever order = reversed relevance
        self.vectors = self.vectors[order]

    async def search(self, request: SearchRequest) -> SearchResponse:
        self.requests.append(request)
        with_vectors = request.include_embeddings
        passages = [
            Passage(chunk_id=f"c{i}", doc_id=f"d{i // 2}", text=f"chunk {i}", score=1.0 - i / 10,
                    embedding=self.vectors[i].tolist() if with_vectors else None)
            for i in range(min(10, request.top_k))
        ]
        timings = {"search": 1.0, "total": 1.0}
        if request.mode != "bm25" or with_vectors:
            timings["embed"] = 7.0
        return SearchResponse(passages=passages, mode=request.mode, timings_ms=timings,
                              query_embedding=self.query.tolist() if with_vectors else None)


class FakeRetriever:
    def __init__(self) -> None:
        self.service = FakeSearch()
        self.search_services = {"min_max": self.service, "rrf": self.service}


class FakeRefiner:
    def __init__(self) -> None:
        self.requests: list[RefineRequest] = []

    async def refine(self, request: RefineRequest) -> RefineResponse:
        self.requests.append(request)
        return RefineResponse(query=f"standalone {request.message}", rewritten=True, method="llm")


class FakeGenerator:
    def __init__(self) -> None:
        self.requests: list[GenerateRequest] = []

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        self.requests.append(request)
        first = request.passages[0]
        citation = Citation(id=1, source="", title="", chunk_id=first.chunk_id, score=1.0)
        return GenerateResponse(answer="an answer [1]", citations=[citation], abstained=False)


@pytest.fixture
async def reranker(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv("RERANKER_CROSS_ENCODER_MODEL", raising=False)
    handle = await open_reranker(embedder=None)
    yield handle
    await handle.aclose()


QUERY = Query(id="q", text="what?", history=(Turn("user", "first question"), Turn("agent", "first answer")))


async def test_runs_share_searches_and_account_latency(reranker: Any) -> None:
    retriever = FakeRetriever()
    pipeline = Pipeline(retriever, reranker.service)
    gmmr = await pipeline.run(parse_run("bm25+gmmr:1", top_k=6), QUERY)
    plain = await pipeline.run(parse_run("bm25", top_k=6), QUERY)
    # One search (with vectors) served both runs.
    assert len(retriever.service.requests) == 1 and retriever.service.requests[0].include_embeddings
    # The plain bm25 run does not pay the query embedding it did not need.
    assert "retrieve.embed" not in plain["latency_ms"]
    assert gmmr["latency_ms"]["retrieve.embed"] == 7.0
    assert plain["ranking"] == ["d0", "d1", "d2"]  # chunks c0..c5 → documents in first-seen order
    # λ = 1: relevance (cosine) only, which reverses the retriever's order here.
    assert gmmr["ranking"] == ["d4", "d3", "d2"]
    assert gmmr["stages"] == {"gmmr": "ran", "gmmr_lambda": 1.0, "gmmr_relevance": "cosine"}
    assert set(gmmr["latency_ms"]) >= {"retrieve", "rerank", "rerank.gmmr", "total"}
    assert gmmr["latency_ms"]["total"] == pytest.approx(gmmr["latency_ms"]["retrieve"] + gmmr["latency_ms"]["rerank"])
    # A run without vectors first, then one that needs them: a second search.
    pipeline.clear_cache()
    await pipeline.run(parse_run("dense", top_k=6), QUERY)
    await pipeline.run(parse_run("dense+diffusion", top_k=6), QUERY)
    assert [r.include_embeddings for r in retriever.service.requests[1:]] == [False, True]


class SpyReranker:
    """The real service, keeping every request it was given."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.requests: list[Any] = []

    async def rerank(self, request: Any) -> Any:
        self.requests.append(request)
        return await self.service.rerank(request)


async def test_gmmr_relevance_reaches_the_reranker(reranker: Any) -> None:
    spy = SpyReranker(reranker.service)
    pipeline = Pipeline(FakeRetriever(), spy)
    by_spec = {spec: await pipeline.run(parse_run(spec, top_k=6), QUERY)
               for spec in ("bm25+gmmr:1", "bm25+gmmr:1:scores", "bm25+gmmr:1:cosine", "bm25+diffusion+gmmr:0.5:scores")}
    sent = [[(stage.name, getattr(stage, "mmr_lambda", None), getattr(stage, "relevance", None)) for stage in r.stages]
            for r in spy.requests]
    assert sent == [
        [("gmmr", 1.0, "cosine")],
        [("gmmr", 1.0, "scores")],
        [("gmmr", 1.0, "cosine")],
        [("diffusion", None, None), ("gmmr", 0.5, "scores")],
    ]
    # λ = 1 is relevance only. With cosine relevance it reverses the retriever's order (the fake's
    # vectors are built that way); with the retriever's scores (1.0, 0.9, …) it keeps that order.
    assert by_spec["bm25+gmmr:1"]["ranking"] == by_spec["bm25+gmmr:1:cosine"]["ranking"] == ["d4", "d3", "d2"]
    assert by_spec["bm25+gmmr:1:scores"]["ranking"] == ["d0", "d1", "d2"]
    assert by_spec["bm25+gmmr:1:scores"]["stages"]["gmmr_relevance"] == "scores"
    assert by_spec["bm25+gmmr:1"]["stages"]["gmmr_relevance"] == "cosine"  # a bare gmmr is the published cosine form


async def test_refiner_and_generator_records(reranker: Any) -> None:
    retriever, refiner, generator = FakeRetriever(), FakeRefiner(), FakeGenerator()
    pipeline = Pipeline(retriever, reranker.service, refiner=refiner, generator=generator)
    record = await pipeline.run(parse_run("hybrid+diffusion+refiner+llm", top_k=4), QUERY)
    assert record["search_query"] == "standalone what?"
    assert retriever.service.requests[0].query == "standalone what?"
    assert refiner.requests[0].history == [HistoryTurn(question="first question", answer="first answer")]
    assert record["refine"] == {"method": "llm", "rewritten": True}
    assert record["stages"]["diffusion"] == "ran"
    (request,) = generator.requests
    assert len(request.passages) == 4 and all(p.embedding is None for p in request.passages)
    assert record["answer"] == "an answer [1]" and record["abstained"] is False
    assert record["cited_doc_ids"] == [request.passages[0].doc_id]
    assert record["contexts"] == [p.text for p in request.passages]  # kept for the LLM judge
    assert {"refine", "retrieve", "rerank", "generate", "total"} <= set(record["latency_ms"])


async def test_missing_parts_are_reported() -> None:
    pipeline = Pipeline(FakeRetriever())
    with pytest.raises(StageNotAvailable, match="reranker"):
        await pipeline.run(parse_run("dense+diffusion"), QUERY)
    with pytest.raises(StageNotAvailable, match="refiner"):
        await pipeline.run(parse_run("dense+refiner+llm"), QUERY)


def test_history_pairs() -> None:
    turns = (Turn("user", "a"), Turn("agent", "b"), Turn("user", "c"), Turn("user", "d"), Turn("agent", "e"))
    assert history_pairs(turns) == [
        HistoryTurn(question="a", answer="b"),
        HistoryTurn(question="c", answer=""),
        HistoryTurn(question="d", answer="e"),
    ]
