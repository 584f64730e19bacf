from __future__ import annotations

import numpy as np
import pytest

from rag_common.schemas import Passage, RerankRequest
from rag_reranker.rerank_service import RerankService
from rag_reranker.scorers.bi_encoder import BiEncoderScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer

TEXTS = [
    "The Great Barrier Reef is the world's largest coral reef system, off Queensland, Australia.",
    "Mount Everest is Earth's highest mountain above sea level, in the Himalayas.",
    "The mitochondrion produces most of the cell's supply of ATP, its source of chemical energy.",
    "Bread rises because yeast ferments sugars and releases carbon dioxide gas.",
    "The French Revolution began in 1789 with the storming of the Bastille.",
    "Solar panels convert sunlight into electricity using photovoltaic cells.",
    "A haiku is a Japanese poem of three lines with five, seven and five syllables.",
]


def _passages(texts: list[str]) -> list[Passage]:
    return [
        Passage(
            chunk_id=f"doc{i}#0",
            doc_id=f"doc{i}",
            text=text,
            title=f"Title {i}",
            source=f"docs/file{i}.md",
            page=i + 1,
            section_path=["Part", f"Section {i}"],
            score=100.0 - i,  # the retriever's score, to be replaced
            metadata={"lang": "en", "position": i},
        )
        for i, text in enumerate(texts)
    ]


@pytest.fixture(scope="module")
def bi_encoder_service(minilm_scorer: BiEncoderScorer) -> RerankService:
    return RerankService(minilm_scorer)


async def test_top_k_best_passages_in_descending_score_order(bi_encoder_service: RerankService) -> None:
    request = RerankRequest(query="What makes bread dough rise?", passages=_passages(TEXTS), top_k=3)
    response = await bi_encoder_service.rerank(request)

    assert len(response.passages) == 3
    assert response.passages[0].chunk_id == "doc3#0"
    scores = [p.score for p in response.passages]
    assert scores == sorted(scores, reverse=True)
    assert response.stages == ["bi_encoder"]
    assert set(response.timings_ms) == {"bi_encoder"} and response.timings_ms["bi_encoder"] > 0


async def test_scores_are_the_scorers_scores(bi_encoder_service: RerankService, minilm_scorer: BiEncoderScorer) -> None:
    query = "highest peak in the world"
    response = await bi_encoder_service.rerank(RerankRequest(query=query, passages=_passages(TEXTS), top_k=len(TEXTS)))
    expected = minilm_scorer.score(query, TEXTS)
    by_id = {p.chunk_id: p.score for p in response.passages}
    for i, score in enumerate(expected):
        assert by_id[f"doc{i}#0"] == pytest.approx(float(score), abs=1e-5)


async def test_top_k_larger_than_candidates_returns_all(bi_encoder_service: RerankService) -> None:
    response = await bi_encoder_service.rerank(RerankRequest(query="poetry", passages=_passages(TEXTS[:2]), top_k=10))
    assert len(response.passages) == 2


async def test_passages_keep_every_field_but_score(bi_encoder_service: RerankService) -> None:
    originals = {p.chunk_id: p for p in _passages(TEXTS)}
    response = await bi_encoder_service.rerank(
        RerankRequest(query="renewable energy", passages=list(originals.values()), top_k=len(TEXTS))
    )
    assert {p.chunk_id for p in response.passages} == set(originals)
    for passage in response.passages:
        original = originals[passage.chunk_id]
        assert passage.model_dump(exclude={"score"}) == original.model_dump(exclude={"score"})
        assert passage.score != original.score


async def test_equal_scores_keep_input_order(bi_encoder_service: RerankService) -> None:
    same = "Volcanoes erupt when magma rises through the crust."
    passages = _passages([same, TEXTS[6], same, same])
    response = await bi_encoder_service.rerank(RerankRequest(query="volcano eruption", passages=passages, top_k=4))
    duplicates = [p.chunk_id for p in response.passages if p.text == same]
    assert duplicates == ["doc0#0", "doc2#0", "doc3#0"]
    assert response.passages[-1].chunk_id == "doc1#0"


async def test_empty_passages_give_empty_result_without_scoring() -> None:
    class MustNotBeCalled:
        name = "must_not_be_called"

        def warm_up(self) -> None: ...

        def score(self, query: str, passages: list[str]) -> np.ndarray:
            raise AssertionError("an empty request must not reach the model")

    response = await RerankService(MustNotBeCalled()).rerank(RerankRequest(query="anything", passages=[], top_k=5))
    assert response.passages == [] and response.stages == [] and response.timings_ms == {}


async def test_cross_encoder_order_follows_its_scores(tiny_cross_encoder: CrossEncoderScorer) -> None:
    query = "coral reefs"
    response = await RerankService(tiny_cross_encoder).rerank(
        RerankRequest(query=query, passages=_passages(TEXTS), top_k=len(TEXTS))
    )
    scores = tiny_cross_encoder.score(query, TEXTS)
    expected_ids = [f"doc{i}#0" for i in np.argsort(-scores, kind="stable")]
    assert [p.chunk_id for p in response.passages] == expected_ids
    assert all(0.0 < p.score < 1.0 for p in response.passages)
    assert response.stages == ["cross_encoder"]
