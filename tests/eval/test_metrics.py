"""Ranking metrics against values computed by hand (the arithmetic is written out in each test)."""

from __future__ import annotations

from math import log2

import pytest

from rag_eval.metrics import (
    average_precision_at_k,
    coverage_at_k,
    dcg_at_k,
    evaluate,
    f1_at_k,
    f2_at_k,
    f3_at_k,
    fbeta_at_k,
    hit_at_k,
    metric_grid,
    mrr_at_k,
    ndcg_at_k,
    parse_metric,
    precision_at_k,
    recall_at_k,
    score,
)

# Five retrieved documents; d1 and d3 are relevant, and so is d6, which was not retrieved (R = 3).
RANKING = ["d1", "d2", "d3", "d4", "d5"]
BINARY = {"d1": 1, "d3": 1, "d6": 1, "d2": 0}


def test_precision_divides_by_k() -> None:
    assert precision_at_k(RANKING, BINARY, 1) == 1 / 1  # d1
    assert precision_at_k(RANKING, BINARY, 3) == pytest.approx(2 / 3)  # d1, d3
    assert precision_at_k(RANKING, BINARY, 5) == pytest.approx(2 / 5)
    # Only two documents returned, one relevant: still / 10 (trec_eval's convention).
    assert precision_at_k(["d1", "d2"], BINARY, 10) == pytest.approx(1 / 10)


def test_recall_divides_by_all_relevant() -> None:
    assert recall_at_k(RANKING, BINARY, 1) == pytest.approx(1 / 3)
    assert recall_at_k(RANKING, BINARY, 3) == pytest.approx(2 / 3)
    assert recall_at_k(RANKING, BINARY, 5) == pytest.approx(2 / 3)  # d6 never retrieved


def test_hit() -> None:
    assert hit_at_k(RANKING, BINARY, 1) == 1.0
    assert hit_at_k(["d2", "d1"], BINARY, 1) == 0.0  # d2 is judged but not relevant (grade 0)
    assert hit_at_k(["d2", "d1"], BINARY, 2) == 1.0


def test_mrr() -> None:
    assert mrr_at_k(RANKING, BINARY, 10) == 1.0
    assert mrr_at_k(["d2", "d4", "d3"], BINARY, 5) == pytest.approx(1 / 3)  # first relevant at rank 3
    assert mrr_at_k(["d2", "d4", "d3"], BINARY, 2) == 0.0  # not within the cut-off


def test_map_divides_by_all_relevant() -> None:
    # Relevant at ranks 1 and 3: precision@1 = 1, precision@3 = 2/3; R = 3.
    assert average_precision_at_k(RANKING, BINARY, 5) == pytest.approx((1 + 2 / 3) / 3)
    assert average_precision_at_k(RANKING, BINARY, 5) == pytest.approx(0.5555556)
    # Cut at 2: only rank 1 counts.
    assert average_precision_at_k(RANKING, BINARY, 2) == pytest.approx(1 / 3)
    # All relevant at the top: 1.
    assert average_precision_at_k(["d1", "d3", "d6"], BINARY, 3) == pytest.approx(1.0)


def test_ndcg_binary() -> None:
    # DCG = 1/log2(2) + 1/log2(4) (ranks 1 and 3) = 1.5
    # IDCG = 1/log2(2) + 1/log2(3) + 1/log2(4) (three relevant) = 2.1309298
    expected = (1 / log2(2) + 1 / log2(4)) / (1 / log2(2) + 1 / log2(3) + 1 / log2(4))
    assert ndcg_at_k(RANKING, BINARY, 5) == pytest.approx(expected)
    assert ndcg_at_k(RANKING, BINARY, 5) == pytest.approx(0.7039180)
    assert ndcg_at_k(["d1", "d3", "d6"], BINARY, 3) == pytest.approx(1.0)


GRADED = {"a": 3, "b": 2, "c": 0, "d": 1}
GRADED_RANKING = ["d", "b", "c", "a"]


def test_ndcg_graded_linear_gain() -> None:
    # Grades in rank order: 1, 2, 0, 3. Ideal order: 3, 2, 1, 0.
    dcg = 1 / log2(2) + 2 / log2(3) + 0 / log2(4) + 3 / log2(5)  # = 1 + 1.2618595 + 0 + 1.2920297 = 3.5538892
    idcg = 3 / log2(2) + 2 / log2(3) + 1 / log2(4) + 0 / log2(5)  # = 3 + 1.2618595 + 0.5 + 0 = 4.7618595
    assert dcg_at_k([1, 2, 0, 3], 4) == pytest.approx(dcg)
    assert ndcg_at_k(GRADED_RANKING, GRADED, 4) == pytest.approx(dcg / idcg)
    assert ndcg_at_k(GRADED_RANKING, GRADED, 4) == pytest.approx(0.7463238)
    # At 2: (1 + 2/log2 3) / (3 + 2/log2 3) = 2.2618595 / 4.2618595
    assert ndcg_at_k(GRADED_RANKING, GRADED, 2) == pytest.approx((1 + 2 / log2(3)) / (3 + 2 / log2(3)))
    assert ndcg_at_k(GRADED_RANKING, GRADED, 2) == pytest.approx(0.5307212)


def test_ndcg_graded_exponential_gain() -> None:
    # Gains 2^g - 1 in rank order: 1, 3, 0, 7. Ideal: 7, 3, 1, 0.
    dcg = 1 / log2(2) + 3 / log2(3) + 0 + 7 / log2(5)  # = 1 + 1.8927893 + 0 + 3.0147360 = 5.9075253
    idcg = 7 / log2(2) + 3 / log2(3) + 1 / log2(4)  # = 7 + 1.8927893 + 0.5 = 9.3927893
    assert ndcg_at_k(GRADED_RANKING, GRADED, 4, gain="exponential") == pytest.approx(dcg / idcg)
    assert ndcg_at_k(GRADED_RANKING, GRADED, 4, gain="exponential") == pytest.approx(0.6289426)


def test_graded_relevance_counts_any_positive_grade_once() -> None:
    # Recall and precision ignore grade height: a, b, d are relevant (c has grade 0).
    assert recall_at_k(GRADED_RANKING, GRADED, 2) == pytest.approx(2 / 3)  # d, b
    assert precision_at_k(GRADED_RANKING, GRADED, 4) == pytest.approx(3 / 4)


def test_set_coverage_needs_every_relevant_document() -> None:
    gold = {"p1": 1, "p2": 1}
    assert coverage_at_k(["p1", "x", "p2"], gold, 3) == 1.0
    assert coverage_at_k(["p1", "x", "p2"], gold, 2) == 0.0  # p2 is at rank 3
    assert coverage_at_k(RANKING, BINARY, 5) == 0.0  # d6 missing
    # Recall@2 is 1/2 where coverage@2 is 0: coverage is the stricter all-or-nothing measure.
    assert recall_at_k(["p1", "x", "p2"], gold, 2) == pytest.approx(1 / 2)


def test_duplicates_count_once_at_their_best_rank() -> None:
    judgements = {"d1": 1, "d2": 1}
    assert precision_at_k(["d1", "d1", "d1"], judgements, 3) == pytest.approx(1 / 3)
    assert recall_at_k(["d1", "d1", "d1"], judgements, 3) == pytest.approx(1 / 2)
    # Duplicates do not take a rank: d2 is the 2nd distinct document, so 1/log2(3) for it.
    assert ndcg_at_k(["d1", "d1", "d2"], judgements, 2) == pytest.approx(1.0)


@pytest.mark.parametrize("judgements", [{}, {"d1": 0}, {"d1": -1}])
def test_no_relevant_documents(judgements: dict[str, int]) -> None:
    """Documented behaviour: metrics that divide by R (or IDCG) are undefined → None; the others 0."""
    assert recall_at_k(RANKING, judgements, 5) is None
    assert ndcg_at_k(RANKING, judgements, 5) is None
    assert average_precision_at_k(RANKING, judgements, 5) is None
    assert coverage_at_k(RANKING, judgements, 5) is None
    assert precision_at_k(RANKING, judgements, 5) == 0.0
    assert hit_at_k(RANKING, judgements, 5) == 0.0
    assert mrr_at_k(RANKING, judgements, 5) == 0.0


def test_empty_ranking_scores_zero() -> None:
    assert recall_at_k([], BINARY, 10) == 0.0
    assert ndcg_at_k([], BINARY, 10) == 0.0
    assert average_precision_at_k([], BINARY, 10) == 0.0
    assert coverage_at_k([], BINARY, 10) == 0.0
    assert mrr_at_k([], BINARY, 10) == 0.0


@pytest.mark.parametrize("k", [0, -1])
def test_k_must_be_positive(k: int) -> None:
    with pytest.raises(ValueError, match="k must be a positive integer"):
        recall_at_k(RANKING, BINARY, k)


def test_metric_names() -> None:
    assert parse_metric("nDCG@10") == ("ndcg", 10)
    assert score("recall@3", RANKING, BINARY) == pytest.approx(2 / 3)
    for bad in ("ndcg", "ndcg@0", "foo@3", "recall@x"):
        with pytest.raises(ValueError, match="bad metric"):
            parse_metric(bad)


def test_evaluate_averages_over_queries_with_relevant_documents() -> None:
    run = {
        "q1": ["d1", "d2", "d3"],  # recall@3 = 2/3, mrr = 1
        "q3": ["d1"],  # no relevant documents: skipped
        "q4": ["x", "y"],  # not in qrels at all: skipped
    }
    qrels = {
        "q1": BINARY,
        "q2": {"d9": 1},  # relevant document but no ranking: counts as an empty ranking (0)
        "q3": {"d1": 0},
    }
    result = evaluate(run, qrels, ["recall@3", "mrr@10", "precision@1"])
    assert result.evaluated == 2
    assert sorted(result.skipped) == ["q3", "q4"]
    assert result.means["recall@3"] == pytest.approx((2 / 3 + 0) / 2)
    assert result.means["mrr@10"] == pytest.approx((1 + 0) / 2)
    assert result.means["precision@1"] == pytest.approx((1 + 0) / 2)
    assert result.per_query["q2"] == {"recall@3": 0.0, "mrr@10": 0.0, "precision@1": 0.0}
    assert result.to_dict()["skipped"] == 2


def test_evaluate_with_nothing_to_evaluate() -> None:
    result = evaluate({"q": ["d"]}, {}, ["ndcg@10"])
    assert result.evaluated == 0
    assert result.means == {"ndcg@10": 0.0}


def test_f_beta_at_k() -> None:
    # k = 5: P = 2/5, R = 2/3.
    # F1 = 2 P R / (P + R) = (8/15) / (16/15) = 1/2
    assert f1_at_k(RANKING, BINARY, 5) == pytest.approx(0.5)
    # F2 = 5 P R / (4 P + R) = (4/3) / (8/5 + 2/3) = (4/3) / (34/15) = 10/17
    assert f2_at_k(RANKING, BINARY, 5) == pytest.approx(10 / 17)
    # F3 = 10 P R / (9 P + R) = (8/3) / (18/5 + 2/3) = (8/3) / (64/15) = 5/8
    assert f3_at_k(RANKING, BINARY, 5) == pytest.approx(5 / 8)
    # k = 1: P = 1, R = 1/3: F1 = (2/3) / (4/3) = 1/2, F2 = (5/3) / (13/3) = 5/13
    assert f1_at_k(RANKING, BINARY, 1) == pytest.approx(0.5)
    assert f2_at_k(RANKING, BINARY, 1) == pytest.approx(5 / 13)
    # k = 3: P = R = 2/3, so every F-beta is 2/3.
    for beta in (1, 2, 3, 0.5):
        assert fbeta_at_k(RANKING, BINARY, 3, beta) == pytest.approx(2 / 3)
    # Nothing relevant retrieved: 0; nothing relevant at all: undefined.
    assert f1_at_k(["d2", "d4"], BINARY, 2) == 0.0
    assert f2_at_k(RANKING, {}, 5) is None
    assert score("f3@5", RANKING, BINARY) == pytest.approx(5 / 8)
    with pytest.raises(ValueError, match="beta"):
        fbeta_at_k(RANKING, BINARY, 3, 0)


def test_metric_grid() -> None:
    assert metric_grid(["ndcg", "f2"], [10, 1]) == ["ndcg@1", "ndcg@10", "f2@1", "f2@10"]
    assert len(metric_grid()) == 10 * 5  # every metric at the default cut-offs 1, 3, 5, 10, 20
    with pytest.raises(ValueError, match="unknown metric"):
        metric_grid(["bleu"], [1])
