"""The rerank answer's contract on the caller's side: ``RerankResponse.ranked_passages`` puts the
caller's own passages in the reranker's order with the reranker's scores, and refuses a ranking that
names a passage not sent, or one twice."""

from __future__ import annotations

import pytest

from rag_common.schemas import Passage, RankedPassage, RerankResponse


def _passages() -> list[Passage]:
    return [
        Passage(chunk_id=f"c{i}", doc_id=f"d{i}", text=f"text {i}", title=f"T{i}", score=1.0 - i / 10, embedding=[1.0, float(i)])
        for i in range(4)
    ]


def _response(*ranking: tuple[str, float]) -> RerankResponse:
    return RerankResponse(ranking=[RankedPassage(chunk_id=c, score=s) for c, s in ranking], stages=["fake"])


def test_the_callers_passages_in_the_ranked_order_with_the_new_scores() -> None:
    sent = _passages()
    ranked = _response(("c2", 0.9), ("c0", 0.5)).ranked_passages(sent)
    assert [(p.chunk_id, p.score) for p in ranked] == [("c2", 0.9), ("c0", 0.5)]
    # Every other field is the caller's own, vectors included; the caller's list is left as it was.
    assert ranked[0].model_dump(exclude={"score"}) == sent[2].model_dump(exclude={"score"})
    assert [p.score for p in sent] == [1.0, 0.9, 0.8, 0.7]


def test_an_empty_ranking_is_no_passages() -> None:
    assert _response().ranked_passages(_passages()) == []
    assert _response().ranked_passages([]) == []


def test_a_chunk_that_was_not_sent_is_refused() -> None:
    with pytest.raises(ValueError, match=r"names chunk 'c9', which was not sent"):
        _response(("c1", 0.9), ("c9", 0.5)).ranked_passages(_passages())


def test_a_chunk_named_twice_is_refused() -> None:
    with pytest.raises(ValueError, match=r"names chunk 'c1' twice"):
        _response(("c1", 0.9), ("c0", 0.5), ("c1", 0.4)).ranked_passages(_passages())


def test_the_wire_form_is_ids_and_scores_only() -> None:
    body = _response(("c1", 0.25)).model_dump(mode="json")
    assert body["ranking"] == [{"chunk_id": "c1", "score": 0.25}]
    assert set(body) == {"ranking", "stages", "timings_ms", "reports", "degraded"}
