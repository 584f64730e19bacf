"""The in-process pipeline with the reranker's real stages (its runtime, ``rag_reranker.runtime.open_runtime``,
as the evaluation opens it) over a fake retriever, refiner and generator: search sharing between runs,
latency accounting, rerank, refine and generate records, and the conversation cut as the gateway cuts
it. No model is loaded (the reranker gets an embedder that must not be called: every candidate comes
with its vector).
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest

from rag_common.history import HistoryWindow
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
from rag_eval.pipeline import Pipeline, StageNotAvailable, history_pairs
from rag_eval.runs import parse_run
from rag_retriever.backends.base import AccessFilter
from rag_gateway.settings import GatewaySettings
from rag_generator.settings import GeneratorSettings
from rag_reranker.rerank_service import RerankService
from rag_reranker.runtime import open_runtime

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

    async def search(self, request: SearchRequest, access: AccessFilter) -> SearchResponse:
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
        self.weights: list[float | None] = []

    def search_service(self, fusion: str, dense_weight: float | None = None) -> FakeSearch:
        self.weights.append(dense_weight)
        return self.search_services[fusion]


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


class UnusedEmbedder:
    """The reranker's embedder for candidates without vectors: these tests always send vectors."""

    dim = DIM
    max_seq_length = 256
    model_id = "unused"

    def warm_up(self) -> None:
        pass

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("the reranker re-embedded a query the retriever had embedded")

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        raise AssertionError("the reranker re-embedded candidates the retriever sent with vectors")

    def count_tokens(self, text: str) -> int:
        return len(text.split())


@pytest.fixture
async def reranker(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RerankService]:
    monkeypatch.delenv("RERANKER_CROSS_ENCODER_MODEL", raising=False)
    async with open_runtime(use_llm=False, embedder=UnusedEmbedder(), default_chain=[]) as runtime:
        assert runtime.cross_encoder is None and runtime.rerank.default_chain == []
        yield runtime.rerank


QUERY = Query(id="q", text="what?", history=(Turn("user", "first question"), Turn("agent", "first answer")))


async def test_each_run_searches_itself_and_sweeps_share(reranker: RerankService) -> None:
    retriever = FakeRetriever()
    pipeline = Pipeline(retriever, reranker)
    gmmr = await pipeline.run(parse_run("bm25+gmmr:1", top_k=6), QUERY)
    plain = await pipeline.run(parse_run("bm25", top_k=6), QUERY)
    # Each run made its own search (timed on its own); only the gMMR one asked for vectors.
    assert [r.include_embeddings for r in retriever.service.requests] == [True, False]
    assert "search_reused" not in gmmr and "search_reused" not in plain
    assert "retrieve.embed" not in plain["latency_ms"]
    assert gmmr["latency_ms"]["retrieve.embed"] == 7.0
    assert plain["ranking"] == ["d0", "d1", "d2"]  # chunks c0..c5 → documents in first-seen order
    # λ = 1: relevance (cosine) only, which reverses the retriever's order here.
    assert gmmr["ranking"] == ["d4", "d3", "d2"]
    assert gmmr["stages"] == {"gmmr": "ran", "gmmr_lambda": 1.0, "gmmr_relevance": "cosine"}
    assert set(gmmr["latency_ms"]) >= {"retrieve", "rerank", "rerank.gmmr", "total"}
    assert gmmr["latency_ms"]["total"] == pytest.approx(gmmr["latency_ms"]["retrieve"] + gmmr["latency_ms"]["rerank"])
    # A run that may share (the λ sweep) takes the cached search with vectors, and says so.
    shared = await pipeline.run(dataclasses.replace(parse_run("bm25+gmmr:0.5", top_k=6), share_search=True), QUERY)
    assert len(retriever.service.requests) == 2 and shared["search_reused"] is True
    assert set(shared["latency_ms"]) == {"rerank", "rerank.gmmr"}
    # Nothing cached with vectors for dense: a sharing run needing them searches itself.
    pipeline.clear_cache()
    await pipeline.run(parse_run("dense", top_k=6), QUERY)
    alone = await pipeline.run(dataclasses.replace(parse_run("dense+diffusion", top_k=6), share_search=True), QUERY)
    assert [r.include_embeddings for r in retriever.service.requests[2:]] == [False, True]
    assert "search_reused" not in alone


async def test_dense_weight_and_depth_reach_the_search_and_do_not_share_across(reranker: RerankService) -> None:
    retriever = FakeRetriever()
    pipeline = Pipeline(retriever, reranker)
    grid = [dataclasses.replace(parse_run(spec, candidates=20, top_k=20), share_search=True)
            for spec in ("hybrid:0.3", "hybrid:0.3+gmmr:0.9:scores", "hybrid:0.7", "hybrid:0.3+depth:10")]
    records = [await pipeline.run(config, QUERY) for config in grid]
    # One search per (weight, depth); the same weight and depth share it.
    assert retriever.weights == [0.3, 0.3, 0.7, 0.3]
    assert [r.top_k for r in retriever.service.requests] == [20, 20, 20, 10]
    assert [bool(r.get("search_reused")) for r in records] == [False, False, False, False]
    again = await pipeline.run(grid[1], QUERY)
    assert again["search_reused"] is True and len(retriever.service.requests) == 4


class SpyReranker:
    """The real service, keeping every request it was given."""

    def __init__(self, service: Any) -> None:
        self.service = service
        self.requests: list[Any] = []

    async def rerank(self, request: Any) -> Any:
        self.requests.append(request)
        return await self.service.rerank(request)


async def test_gmmr_relevance_reaches_the_reranker(reranker: RerankService) -> None:
    spy = SpyReranker(reranker)
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


async def test_refiner_and_generator_records(reranker: RerankService) -> None:
    retriever, refiner, generator = FakeRetriever(), FakeRefiner(), FakeGenerator()
    pipeline = Pipeline(retriever, reranker, refiner=refiner, generator=generator)
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


LONG_QUERY = Query(
    id="long",
    text="and then?",
    history=(
        Turn("user", "first question"), Turn("agent", "first answer"),
        Turn("user", "second question"), Turn("agent", "second answer"),
    ),
)


async def test_history_is_cut_as_the_gateway_cuts_it(reranker: RerankService) -> None:
    refiner, generator = FakeRefiner(), FakeGenerator()
    window = HistoryWindow(turns=1, token_budget=1000, question_chars=6, answer_chars=4)
    pipeline = Pipeline(FakeRetriever(), reranker, refiner=refiner, generator=generator, history_window=window)
    await pipeline.run(parse_run("hybrid+refiner+llm", top_k=4), LONG_QUERY)
    cut = [HistoryTurn(question="second", answer="seco")]  # the last turn, each side cut to its bound
    assert refiner.requests[0].history == cut
    assert generator.requests[0].history == cut


async def test_default_history_window_is_the_gateways(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GATEWAY_HISTORY_TURNS", "1")
    refiner = FakeRefiner()
    pipeline = Pipeline(FakeRetriever(), refiner=refiner)
    assert pipeline.history_window == GatewaySettings().history_window()
    await pipeline.run(parse_run("dense+refiner"), LONG_QUERY)
    assert refiner.requests[0].history == [HistoryTurn(question="second question", answer="second answer")]


async def test_contexts_are_what_the_generator_shows() -> None:
    generator = FakeGenerator()
    pipeline = Pipeline(FakeRetriever(), generator=generator, generator_settings=GeneratorSettings(max_passages=2))
    record = await pipeline.run(parse_run("dense+llm", top_k=5), QUERY)
    (request,) = generator.requests
    assert len(request.passages) == 5  # the generator gets every passage and shows the model its first two
    assert record["contexts"] == [p.text for p in request.passages[:2]]


async def test_a_generation_failure_is_recorded() -> None:
    class DeadGenerator:
        async def generate(self, request: GenerateRequest) -> GenerateResponse:
            raise TimeoutError("the LLM did not answer")

    record = await Pipeline(FakeRetriever(), generator=DeadGenerator()).run(parse_run("dense+llm", top_k=3), QUERY)
    assert record["generation_error"] == "TimeoutError: the LLM did not answer"
    assert "answer" not in record and "generate" in record["latency_ms"]
