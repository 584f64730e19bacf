"""RerankService: the chain of stages over real models (MiniLM, the tiny cross-encoder through a
MicroBatcher). Expected orders are recomputed independently from the NumPy algorithms."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import numpy as np
import pytest
from prometheus_client import REGISTRY

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import Passage, RerankRequest
from rag_common.errors import InvalidInput
from rag_common.service import status_for
from rag_reranker.batching import MicroBatcher, UnbatchedScorer
from rag_reranker.rerank_service import RerankService
from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.settings import RerankerSettings
from rag_reranker.stages.candidate_embeddings import CandidateEmbeddings
from rag_reranker.stages.cross_encoder_stage import NO_MODEL_REASON, CrossEncoderStage
from rag_reranker.stages.diffusion_stage import DiffusionStage
from rag_reranker.stages.gmmr import GeometricMMR
from rag_reranker.stages.gmmr_stage import GmmrStage
from rag_reranker.stages.graph_diffusion import GraphDiffusionReranker

TEXTS = [
    "The Great Barrier Reef is the world's largest coral reef system, off Queensland, Australia.",
    "Mount Everest is Earth's highest mountain above sea level, in the Himalayas.",
    "The mitochondrion produces most of the cell's supply of ATP, its source of chemical energy.",
    "Bread rises because yeast ferments sugars and releases carbon dioxide gas.",
    "The French Revolution began in 1789 with the storming of the Bastille.",
    "Solar panels convert sunlight into electricity using photovoltaic cells.",
    "A haiku is a Japanese poem of three lines with five, seven and five syllables.",
]


def _passages(texts: list[str], embeddings: np.ndarray | None = None) -> list[Passage]:
    return [
        Passage(
            chunk_id=f"doc{i}#0",
            doc_id=f"doc{i}",
            text=text,
            title=f"Title {i}",
            source=f"docs/file{i}.md",
            page=i + 1,
            section_path=["Part", f"Section {i}"],
            score=100.0 - i,  # the retriever's score: descending, so retriever order = input order
            metadata={"lang": "en", "position": i},
            embedding=None if embeddings is None else [float(x) for x in embeddings[i]],
        )
        for i, text in enumerate(texts)
    ]


def _request(query: str, passages: list[Passage], chain: list[dict[str, Any]] | None, top_k: int, **extra: Any) -> RerankRequest:
    return RerankRequest.model_validate(
        {"query": query, "passages": passages, "top_k": top_k, "stages": chain, **extra}
    )


def _ids(response) -> list[str]:  # noqa: ANN001
    return [p.chunk_id for p in response.ranking]


def _report(response, name: str):  # noqa: ANN001, ANN202
    (report,) = [r for r in response.reports if r.name == name]
    return report


def _stages(queue: Any | None, model_id: str = "tiny-cross-encoder") -> dict[str, Any]:
    return {
        "cross_encoder": CrossEncoderStage(queue, model_id=model_id if queue is not None else ""),
        "diffusion": DiffusionStage.of(RerankerSettings()),
        # the published form (cosine); scores is tested explicitly
        "gmmr": GmmrStage.of(RerankerSettings(mmr_lambda=0.7, mmr_relevance="cosine"), adaptive=None),
    }


class BrokenCrossEncoder:
    """A real PairScorer whose model call raises, like a cross-encoder that ran out of memory."""

    model_id = "broken"

    def warm_up(self) -> None:
        pass

    def score_pairs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        raise RuntimeError("model on fire")


class NaNCrossEncoder:
    model_id = "nan"

    def warm_up(self) -> None:
        pass

    def score_pairs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        return np.full(len(pairs), np.nan)


@pytest.fixture
async def ce_queue(tiny_cross_encoder: CrossEncoderScorer) -> AsyncIterator[MicroBatcher]:
    batcher = MicroBatcher(tiny_cross_encoder.score_pairs, max_pairs=64, max_wait_s=0.002)
    batcher.start()
    yield batcher
    await batcher.aclose()


@pytest.fixture
async def broken_queue() -> AsyncIterator[MicroBatcher]:
    assert isinstance(BrokenCrossEncoder(), PairScorer)
    batcher = MicroBatcher(BrokenCrossEncoder().score_pairs, max_pairs=RerankerSettings().batch_max_pairs, max_wait_s=0.0)
    batcher.start()
    yield batcher
    await batcher.aclose()


@pytest.fixture
def service(ce_queue: MicroBatcher, minilm: SentenceTransformerEmbedder) -> RerankService:
    return RerankService(_stages(ce_queue), default_chain=["cross_encoder"], embedder=minilm)


def _ce_scores(scorer: CrossEncoderScorer, query: str, texts: list[str]) -> np.ndarray:
    return scorer.score_pairs([(query, t) for t in texts]).astype(np.float64)


# --------------------------------------------------------------------------- default chain


async def test_default_chain_runs_when_the_request_names_no_stages(
    ce_queue: MicroBatcher, minilm: SentenceTransformerEmbedder
) -> None:
    service = RerankService(_stages(ce_queue), default_chain=["diffusion", "gmmr"], embedder=minilm)
    assert service.default_chain == ["diffusion", "gmmr"]
    query = "What makes bread dough rise?"
    implicit = await service.rerank(_request(query, _passages(TEXTS), None, top_k=3))
    explicit = await service.rerank(_request(query, _passages(TEXTS), [{"name": "diffusion"}, {"name": "gmmr"}], top_k=3))
    assert [r.name for r in implicit.reports] == ["diffusion", "gmmr"]
    assert all(r.status == "ran" for r in implicit.reports)
    assert implicit.stages == ["diffusion", "gmmr"]
    assert _ids(implicit) == _ids(explicit)
    assert len(implicit.ranking) == 3


async def test_default_cross_encoder_chain(service: RerankService, tiny_cross_encoder: CrossEncoderScorer) -> None:
    response = await service.rerank(_request("coral reefs", _passages(TEXTS), None, top_k=len(TEXTS)))
    assert response.stages == ["cross_encoder"]
    scores = _ce_scores(tiny_cross_encoder, "coral reefs", TEXTS)
    assert _ids(response) == [f"doc{i}#0" for i in np.argsort(-scores, kind="stable")]


def test_default_chain_must_name_known_stages(minilm: SentenceTransformerEmbedder) -> None:
    with pytest.raises(ValueError, match="cross_encoder"):
        RerankService({"diffusion": DiffusionStage.of(RerankerSettings())}, default_chain=["cross_encoder"], embedder=minilm)


async def test_explicit_empty_chain_keeps_the_retriever_order(service: RerankService) -> None:
    response = await service.rerank(_request("anything", _passages(TEXTS), [], top_k=4))
    assert _ids(response) == [f"doc{i}#0" for i in range(4)]
    assert [p.score for p in response.ranking] == [100.0, 99.0, 98.0, 97.0]
    assert response.stages == [] and response.reports == [] and not response.degraded


# --------------------------------------------------------------------------- each stage alone


async def test_cross_encoder_alone_orders_by_its_scores(service: RerankService, tiny_cross_encoder: CrossEncoderScorer) -> None:
    query = "highest peak in the world"
    response = await service.rerank(_request(query, _passages(TEXTS), [{"name": "cross_encoder"}], top_k=4))
    expected = _ce_scores(tiny_cross_encoder, query, TEXTS)
    order = np.argsort(-expected, kind="stable")[:4]
    assert _ids(response) == [f"doc{i}#0" for i in order]
    np.testing.assert_allclose([p.score for p in response.ranking], expected[order], atol=1e-5)
    assert all(0.0 < p.score < 1.0 for p in response.ranking)
    report = _report(response, "cross_encoder")
    assert report.status == "ran" and report.detail == {"model": "tiny-cross-encoder"}
    assert response.stages == ["cross_encoder"]
    assert set(response.timings_ms) == {"cross_encoder"} and response.timings_ms["cross_encoder"] > 0
    assert not response.degraded


async def test_cross_encoder_equal_scores_keep_input_order(service: RerankService) -> None:
    same = "Volcanoes erupt when magma rises through the crust."
    passages = _passages([same, TEXTS[6], same, same])
    response = await service.rerank(_request("volcano eruption", passages, [{"name": "cross_encoder"}], top_k=4))
    duplicates = [p.chunk_id for p in response.ranked_passages(passages) if p.text == same]
    assert duplicates == ["doc0#0", "doc2#0", "doc3#0"]


async def test_diffusion_alone_is_personalised_pagerank_of_the_retriever_scores(
    service: RerankService, minilm: SentenceTransformerEmbedder
) -> None:
    passages = _passages(TEXTS)
    response = await service.rerank(_request("energy", passages, [{"name": "diffusion"}], top_k=len(TEXTS)))
    expected = GraphDiffusionReranker(alpha=0.85).rerank(
        np.array([p.score for p in passages]), minilm.encode_documents(TEXTS)
    )
    assert _ids(response) == [f"doc{i}#0" for i in expected.order]
    np.testing.assert_allclose([p.score for p in response.ranking], expected.pagerank[expected.order], atol=1e-6)
    assert sum(p.score for p in response.ranking) == pytest.approx(1.0)
    report = _report(response, "diffusion")
    assert report.status == "ran"
    assert report.detail["alpha"] == 0.85 and report.detail["top_k_edges"] is None
    assert report.detail["iterations"] == expected.iterations > 0


async def test_diffusion_spec_overrides_the_service_defaults(service: RerankService) -> None:
    chain = [{"name": "diffusion", "alpha": 0.0, "top_k_edges": 2}]
    response = await service.rerank(_request("energy", _passages(TEXTS), chain, top_k=len(TEXTS)))
    # alpha = 0: no graph walk, PageRank is the personalisation vector, so the retriever order stays.
    assert _ids(response) == [f"doc{i}#0" for i in range(len(TEXTS))]
    assert _report(response, "diffusion").detail == {"alpha": 0.0, "top_k_edges": 2, "iterations": 0}


@pytest.mark.parametrize("lam", [0.0, 0.3, 0.7, 1.0])
async def test_gmmr_alone_selects_like_geometric_mmr(
    service: RerankService, minilm: SentenceTransformerEmbedder, lam: float
) -> None:
    query = "natural wonders of the world"
    passages = _passages(TEXTS)
    response = await service.rerank(_request(query, passages, [{"name": "gmmr", "mmr_lambda": lam}], top_k=4))
    selected = GeometricMMR(lam).select(minilm.encode_queries([query])[0], minilm.encode_documents(TEXTS), 4)
    assert _ids(response) == [f"doc{i}#0" for i in selected]
    # gMMR selects, it does not rescore: the scores are those it was given.
    assert [p.score for p in response.ranking] == [passages[i].score for i in selected]
    assert _report(response, "gmmr").detail == {"lambda": lam, "relevance": "cosine"}


async def test_gmmr_uses_the_stage_default_lambda(service: RerankService, minilm: SentenceTransformerEmbedder) -> None:
    query = "history"
    response = await service.rerank(_request(query, _passages(TEXTS), [{"name": "gmmr"}], top_k=3))
    assert _report(response, "gmmr").detail == {"lambda": 0.7, "relevance": "cosine"}
    selected = GeometricMMR(0.7).select(minilm.encode_queries([query])[0], minilm.encode_documents(TEXTS), 3)
    assert _ids(response) == [f"doc{i}#0" for i in selected]


@pytest.mark.parametrize("top_k", [1, 3, 5])
async def test_gmmr_returns_exactly_top_k_distinct_passages(service: RerankService, top_k: int) -> None:
    same = "Mount Everest is the highest mountain on Earth."
    texts = [same, same, TEXTS[1], same, TEXTS[0], TEXTS[4], same]
    response = await service.rerank(_request("tallest mountain", _passages(texts), [{"name": "gmmr", "mmr_lambda": 0.5}], top_k))
    ids = _ids(response)
    assert len(ids) == top_k and len(set(ids)) == top_k


async def test_top_k_larger_than_candidates_returns_all(service: RerankService) -> None:
    chain = [{"name": "cross_encoder"}, {"name": "diffusion"}, {"name": "gmmr"}]
    response = await service.rerank(_request("poetry", _passages(TEXTS[:2]), chain, top_k=10))
    assert sorted(_ids(response)) == ["doc0#0", "doc1#0"]


# --------------------------------------------------------------------------- chains


async def test_cross_encoder_then_diffusion_then_gmmr(
    service: RerankService, tiny_cross_encoder: CrossEncoderScorer, minilm: SentenceTransformerEmbedder
) -> None:
    query = "renewable energy sources"
    chain = [{"name": "cross_encoder"}, {"name": "diffusion", "alpha": 0.5}, {"name": "gmmr", "mmr_lambda": 0.6}]
    response = await service.rerank(_request(query, _passages(TEXTS), chain, top_k=3))

    # The same chain by hand, from the algorithms themselves.
    ce = _ce_scores(tiny_cross_encoder, query, TEXTS)
    vectors = minilm.encode_documents(TEXTS)
    after_ce = np.argsort(-ce, kind="stable")
    diffusion = GraphDiffusionReranker(alpha=0.5).rerank(ce[after_ce], vectors[after_ce])
    after_diffusion = after_ce[diffusion.order]
    scores = ce.copy()
    scores[after_ce] = diffusion.pagerank
    picked = GeometricMMR(0.6).select(minilm.encode_queries([query])[0], vectors[after_diffusion], 3)
    final = after_diffusion[picked]

    assert _ids(response) == [f"doc{i}#0" for i in final]
    np.testing.assert_allclose([p.score for p in response.ranking], scores[final], atol=1e-5)
    assert response.stages == ["cross_encoder", "diffusion", "gmmr"]
    assert [(r.name, r.status) for r in response.reports] == [
        ("cross_encoder", "ran"), ("diffusion", "ran"), ("gmmr", "ran")
    ]
    assert set(response.timings_ms) == {"cross_encoder", "diffusion", "gmmr"}
    assert not response.degraded


async def test_a_stage_after_gmmr_reorders_only_the_selected_passages(
    service: RerankService, tiny_cross_encoder: CrossEncoderScorer, minilm: SentenceTransformerEmbedder
) -> None:
    query = "science facts"
    chain = [{"name": "gmmr", "mmr_lambda": 0.5}, {"name": "cross_encoder"}]
    response = await service.rerank(_request(query, _passages(TEXTS), chain, top_k=3))
    picked = GeometricMMR(0.5).select(minilm.encode_queries([query])[0], minilm.encode_documents(TEXTS), 3)
    ce = _ce_scores(tiny_cross_encoder, query, TEXTS)
    expected = sorted(picked, key=lambda i: -ce[i])
    assert _ids(response) == [f"doc{i}#0" for i in expected]


# --------------------------------------------------------------------------- skipped and failed stages


async def test_cross_encoder_without_a_model_is_skipped_with_the_reason(minilm: SentenceTransformerEmbedder) -> None:
    service = RerankService(_stages(None), default_chain=["cross_encoder"], embedder=minilm)
    passages = _passages(TEXTS)
    response = await service.rerank(_request("coral", passages, None, top_k=4))
    report = _report(response, "cross_encoder")
    assert report.status == "skipped" and report.reason == NO_MODEL_REASON
    assert "RERANKER_CROSS_ENCODER_MODEL" in report.reason
    assert _ids(response) == [f"doc{i}#0" for i in range(4)]  # the retriever's order
    assert [p.score for p in response.ranking] == [p.score for p in passages[:4]]  # and its scores
    assert response.stages == [] and response.timings_ms == {} and not response.degraded


async def test_a_skipped_cross_encoder_does_not_stop_the_rest_of_the_chain(
    minilm: SentenceTransformerEmbedder,
) -> None:
    service = RerankService(_stages(None), default_chain=["cross_encoder"], embedder=minilm)
    chain = [{"name": "cross_encoder"}, {"name": "diffusion"}]
    response = await service.rerank(_request("coral", _passages(TEXTS), chain, top_k=3))
    assert [(r.name, r.status) for r in response.reports] == [("cross_encoder", "skipped"), ("diffusion", "ran")]
    assert response.stages == ["diffusion"]


async def test_a_stage_the_service_lacks_is_skipped(minilm: SentenceTransformerEmbedder) -> None:
    service = RerankService({"diffusion": DiffusionStage.of(RerankerSettings())}, default_chain=["diffusion"], embedder=minilm)
    response = await service.rerank(_request("q", _passages(TEXTS), [{"name": "cross_encoder"}], top_k=2))
    report = _report(response, "cross_encoder")
    assert report.status == "skipped" and "not available" in report.reason
    assert _ids(response) == ["doc0#0", "doc1#0"]


async def test_a_failing_stage_keeps_the_order_from_before_and_the_chain_goes_on(
    broken_queue: MicroBatcher, minilm: SentenceTransformerEmbedder
) -> None:
    broken = RerankService(_stages(broken_queue, "broken"), default_chain=["cross_encoder"], embedder=minilm)
    working = RerankService(_stages(None), default_chain=["diffusion"], embedder=minilm)
    query = "cells and energy"
    chain = [{"name": "diffusion"}, {"name": "cross_encoder"}, {"name": "gmmr", "mmr_lambda": 0.8}]
    response = await broken.rerank(_request(query, _passages(TEXTS), chain, top_k=4))
    without = await working.rerank(
        _request(query, _passages(TEXTS), [{"name": "diffusion"}, {"name": "gmmr", "mmr_lambda": 0.8}], top_k=4)
    )

    assert [(r.name, r.status) for r in response.reports] == [
        ("diffusion", "ran"), ("cross_encoder", "failed"), ("gmmr", "ran")
    ]
    failed = _report(response, "cross_encoder")
    assert "RuntimeError" in failed.reason and "model on fire" in failed.reason
    assert response.degraded is True
    assert response.stages == ["diffusion", "gmmr"] and set(response.timings_ms) == {"diffusion", "gmmr"}
    # As if the broken stage had not been asked for.
    assert _ids(response) == _ids(without)
    assert [p.score for p in response.ranking] == pytest.approx([p.score for p in without.ranking])


async def test_a_failing_only_stage_returns_the_retriever_order(broken_queue: MicroBatcher) -> None:
    service = RerankService(_stages(broken_queue, "broken"), default_chain=["cross_encoder"], embedder=None)
    passages = _passages(TEXTS)
    response = await service.rerank(_request("q", passages, None, top_k=3))
    assert _report(response, "cross_encoder").status == "failed" and response.degraded
    assert _ids(response) == ["doc0#0", "doc1#0", "doc2#0"]
    assert [p.score for p in response.ranking] == [100.0, 99.0, 98.0]


async def test_non_finite_model_scores_fail_the_stage() -> None:
    queue = UnbatchedScorer(NaNCrossEncoder().score_pairs)
    service = RerankService(_stages(queue, "nan"), default_chain=["cross_encoder"], embedder=None)
    response = await service.rerank(_request("q", _passages(TEXTS), None, top_k=3))
    report = _report(response, "cross_encoder")
    assert report.status == "failed" and "non-finite" in report.reason
    assert response.degraded and _ids(response) == ["doc0#0", "doc1#0", "doc2#0"]
    assert all(np.isfinite(p.score) for p in response.ranking)


# --------------------------------------------------------------------------- passages and embeddings


async def test_the_answer_is_ids_and_scores_and_applied_keeps_every_field_but_score(
    service: RerankService, minilm: SentenceTransformerEmbedder
) -> None:
    originals = _passages(TEXTS, minilm.encode_documents(TEXTS))
    query_vector = [float(x) for x in minilm.encode_queries(["renewable energy"])[0]]
    request = _request(
        "renewable energy",
        originals,
        [{"name": "cross_encoder"}, {"name": "diffusion"}, {"name": "gmmr"}],
        top_k=len(TEXTS),
        query_embedding=query_vector,
    )
    response = await service.rerank(request)
    by_id = {p.chunk_id: p for p in originals}
    assert {p.chunk_id for p in response.ranking} == set(by_id)
    # Nothing but the decision travels back: no text, no embedding (the caller holds them).
    assert all(set(item) == {"chunk_id", "score"} for item in response.model_dump()["ranking"])
    assert '"embedding"' not in response.model_dump_json() and '"text"' not in response.model_dump_json()
    ranked = response.ranked_passages(request.passages)
    assert [p.chunk_id for p in ranked] == [item.chunk_id for item in response.ranking]
    for passage, item in zip(ranked, response.ranking):
        original = by_id[passage.chunk_id]
        assert passage.score == item.score
        assert passage.model_dump(exclude={"score"}) == original.model_dump(exclude={"score"})
        assert passage.score != original.score
    # The request's own passages are untouched.
    assert all(p.embedding is not None for p in request.passages)


async def test_embeddings_from_the_request_are_used_without_an_embedder() -> None:
    # Hand-made 3-d vectors: only they decide, the texts (and any model) would not.
    vectors = np.array([[0, 1, 0], [0.9, 0.1, 0], [0.8, 0, 0.2], [0, 0, 1], [1, 0, 0]], dtype=np.float64)
    texts = ["unrelated text " + str(i) for i in range(len(vectors))]
    service = RerankService(_stages(None), default_chain=["gmmr"], embedder=None)

    response = await service.rerank(
        _request("q", _passages(texts, vectors), [{"name": "gmmr", "mmr_lambda": 1.0}], top_k=3, query_embedding=[1.0, 0.0, 0.0])
    )
    assert _ids(response) == ["doc4#0", "doc1#0", "doc2#0"]

    scores = np.array([100.0 - i for i in range(len(vectors))])
    expected = GraphDiffusionReranker(alpha=0.85).rerank(scores, vectors)
    response = await service.rerank(_request("q", _passages(texts, vectors), [{"name": "diffusion"}], top_k=5))
    assert _ids(response) == [f"doc{i}#0" for i in expected.order]


async def test_without_embeddings_or_an_embedder_the_embedding_stages_fail() -> None:
    service = RerankService(_stages(None), default_chain=["gmmr"], embedder=None)
    response = await service.rerank(_request("q", _passages(TEXTS), [{"name": "diffusion"}, {"name": "gmmr"}], top_k=3))
    assert [r.status for r in response.reports] == ["failed", "failed"]
    assert "no embedder" in response.reports[0].reason
    assert response.degraded and _ids(response) == ["doc0#0", "doc1#0", "doc2#0"]


async def test_missing_embeddings_are_computed_with_minilm_and_given_ones_kept(
    service: RerankService, minilm: SentenceTransformerEmbedder
) -> None:
    query = "volcanic eruptions"
    volcano = minilm.encode_documents(["Volcanoes erupt when magma and gas rise through the Earth's crust."])[0]
    passages = _passages(TEXTS)
    # Passage 5 (solar panels) arrives with a volcano vector: if the service re-embedded its text,
    # it would not come first for a volcano query.
    passages[5] = passages[5].model_copy(update={"embedding": [float(x) for x in volcano]})
    response = await service.rerank(_request(query, passages, [{"name": "gmmr", "mmr_lambda": 1.0}], top_k=len(TEXTS)))

    matrix = minilm.encode_documents(TEXTS)
    matrix[5] = volcano
    relevance = matrix @ minilm.encode_queries([query])[0]
    assert response.ranking[0].chunk_id == "doc5#0"
    assert _ids(response) == [f"doc{i}#0" for i in np.argsort(-relevance, kind="stable")]


async def test_candidate_embeddings_compute_only_what_is_missing(minilm: SentenceTransformerEmbedder) -> None:
    given = np.zeros((len(TEXTS), minilm.dim), dtype=np.float32)
    given[0, 0] = given[3, 1] = 1.0
    passages = _passages(TEXTS)
    for i in (0, 3):
        passages[i] = passages[i].model_copy(update={"embedding": [float(x) for x in given[i]]})
    embeddings = CandidateEmbeddings("a query", None, passages, minilm)
    matrix = await embeddings.matrix()
    assert matrix.shape == (len(TEXTS), minilm.dim)
    assert embeddings.computed == len(TEXTS) - 2
    np.testing.assert_array_equal(matrix[[0, 3]], given[[0, 3]])
    missing = [i for i in range(len(TEXTS)) if i not in (0, 3)]
    np.testing.assert_allclose(matrix[missing], minilm.encode_documents([TEXTS[i] for i in missing]), atol=1e-6)
    assert await embeddings.matrix() is matrix  # computed once per request
    np.testing.assert_allclose(await embeddings.query_vector(), minilm.encode_queries(["a query"])[0], atol=1e-6)
    assert embeddings.computed == len(TEXTS) - 1


async def test_embedding_of_the_wrong_dimension_is_a_422(service: RerankService) -> None:
    passages = _passages(TEXTS[:3], np.eye(3))
    with pytest.raises(InvalidInput) as excinfo:
        await service.rerank(_request("q", passages, [{"name": "diffusion"}], top_k=2))
    assert status_for(excinfo.value) == 422
    assert "384" in excinfo.value.message and "[3]" in excinfo.value.message


async def test_mixed_embedding_dimensions_are_a_422_even_without_an_embedder() -> None:
    service = RerankService(_stages(None), default_chain=["diffusion"], embedder=None)
    passages = _passages(TEXTS[:2], np.eye(3))
    passages[1] = passages[1].model_copy(update={"embedding": [0.0, 0.0, 0.0, 1.0]})
    with pytest.raises(InvalidInput) as excinfo:
        await service.rerank(_request("q", passages, None, top_k=2))
    assert status_for(excinfo.value) == 422 and "mixed" in excinfo.value.message

    with pytest.raises(InvalidInput) as excinfo:
        await service.rerank(
            _request("q", _passages(TEXTS[:2], np.eye(3)), None, top_k=2, query_embedding=[1.0, 0.0, 0.0, 0.0])
        )
    assert status_for(excinfo.value) == 422


async def test_empty_passages_run_no_stage(broken_queue: MicroBatcher) -> None:
    service = RerankService(_stages(broken_queue, "broken"), default_chain=["cross_encoder", "diffusion", "gmmr"], embedder=None)
    response = await service.rerank(_request("anything", [], None, top_k=5))
    assert response.ranking == [] and response.stages == [] and response.timings_ms == {}
    assert [(r.name, r.status, r.reason) for r in response.reports] == [
        ("cross_encoder", "skipped", "no passages"), ("diffusion", "skipped", "no passages"), ("gmmr", "skipped", "no passages")
    ]
    assert not response.degraded  # the broken model was never called


# --------------------------------------------------------------------------- metrics


async def test_request_and_stage_metrics(service: RerankService) -> None:
    def sample(name: str, labels: dict[str, str] | None = None) -> float:
        return REGISTRY.get_sample_value(name, labels or {}) or 0.0

    inflight = sample("rag_reranker_inflight_requests")
    requests = sample("rag_reranker_request_seconds_count")
    diffusion_runs = sample("rag_reranker_stage_seconds_count", {"stage": "diffusion"})
    await service.rerank(_request("q", _passages(TEXTS), [{"name": "diffusion"}], top_k=2))
    assert sample("rag_reranker_inflight_requests") == inflight
    assert sample("rag_reranker_request_seconds_count") == requests + 1
    assert sample("rag_reranker_stage_seconds_count", {"stage": "diffusion"}) == diffusion_runs + 1


async def test_gmmr_with_score_relevance_keeps_the_upstream_judgement(
    service: RerankService, minilm: SentenceTransformerEmbedder
) -> None:
    """relevance="scores": at λ = 1 the selection is the incoming order, whatever the cosines say."""
    query = "natural wonders of the world"
    passages = _passages(TEXTS)
    # Reverse the retriever's scores so they disagree with the embedding similarity order.
    passages = [p.model_copy(update={"score": float(i)}) for i, p in enumerate(passages)]
    chain = [{"name": "gmmr", "mmr_lambda": 1.0, "relevance": "scores"}]
    response = await service.rerank(_request(query, passages, chain, top_k=3))
    assert _ids(response) == [f"doc{i}#0" for i in (6, 5, 4)]
    assert _report(response, "gmmr").detail == {"lambda": 1.0, "relevance": "scores"}

    # With diversity in play the first pick is still the most relevant by the scores, then gMMR
    # over the scaled scores exactly as GeometricMMR computes it.
    chain = [{"name": "gmmr", "mmr_lambda": 0.3, "relevance": "scores"}]
    response = await service.rerank(_request(query, passages, chain, top_k=4))
    scaled = np.arange(len(TEXTS), dtype=np.float64) / (len(TEXTS) - 1)
    expected = GeometricMMR(0.3).select(
        minilm.encode_queries([query])[0], minilm.encode_documents(TEXTS), 4, relevance=scaled
    )
    assert expected[0] == 6
    assert _ids(response) == [f"doc{i}#0" for i in expected]
