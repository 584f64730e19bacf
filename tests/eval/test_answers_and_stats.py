"""Answer, citation and abstention metrics and the paired bootstrap, against hand-computed values."""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval.answers import (
    abstention_scores,
    citation_scores,
    exact_match,
    fold_text,
    normalize_answer,
    rouge_l,
    token_f1,
)
from rag_eval.stats import paired_bootstrap, paired_delta, percentiles


def test_squad_normalisation() -> None:
    assert normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert normalize_answer("An apple, a pear and THE plum.") == "apple pear and plum"


def test_exact_match_best_over_references() -> None:
    assert exact_match("The Eiffel Tower!", ["eiffel tower"]) == 1.0
    assert exact_match("Eiffel", ["eiffel tower", "tower"]) == 0.0
    assert exact_match("tower", ["eiffel tower", "Tower."]) == 1.0
    assert exact_match("anything", []) is None


def test_token_f1() -> None:
    # "cat sat" vs "cat sat on mat": overlap 2, P = 2/2, R = 2/4 → F1 = 2/3
    assert token_f1("The cat sat.", ["a cat sat on the mat"]) == pytest.approx(2 / 3)
    # Repeated tokens count as often as they occur in both: "a a b" → ["b"] after articles go, so use words.
    # "x x y" vs "x y y": common = {x: 1, y: 1} = 2; P = 2/3, R = 2/3 → 2/3
    assert token_f1("x x y", ["x y y"]) == pytest.approx(2 / 3)
    assert token_f1("nothing shared", ["other words"]) == 0.0
    assert token_f1("x", ["nothing shared", "x y"]) == pytest.approx(2 / 3)  # best reference: P = 1, R = 1/2
    # Only articles/punctuation on both sides: both normalise to empty → a match (SQuAD v2).
    assert token_f1("The.", ["a"]) == 1.0
    assert token_f1("", ["word"]) == 0.0


def test_rouge_l() -> None:
    # the cat sat on the mat / the cat lay on a mat: LCS = the, cat, on, mat = 4 of 6 and 6 → F = 2/3
    assert rouge_l("the cat lay on a mat", ["the cat sat on the mat"]) == pytest.approx(2 / 3)
    # Order matters for an LCS: "mat the" vs "the mat" shares a subsequence of 1 → P = R = 1/2
    assert rouge_l("mat the", ["the mat"]) == pytest.approx(0.5)
    # Precision 3/3, recall 3/6 → F = 2 * 1 * 0.5 / 1.5 = 2/3; best over references
    assert rouge_l("a b c", ["x y z", "a q b r c s"]) == pytest.approx(2 / 3)
    assert rouge_l("x", []) is None


def test_citation_scores() -> None:
    gold = {"p1": 1, "p2": 1, "p3": 0}
    scores = citation_scores(["p1", "p3", "p1", "x"], gold)  # cited {p1, p3, x}: 1 gold of 3
    assert scores.precision == pytest.approx(1 / 3)
    assert scores.recall == pytest.approx(1 / 2)  # p1 of {p1, p2}
    assert citation_scores([], gold).precision is None
    assert citation_scores([], gold).recall == 0.0
    assert citation_scores(["p1"], {}).recall is None
    assert citation_scores(["p1"], ["p1"]).precision == 1.0


def test_abstention_scores() -> None:
    abstained = {"u1": True, "u2": False, "u3": True, "a1": True, "a2": False, "a3": False, "n": True}
    answerable = {"u1": False, "u2": False, "u3": False, "a1": True, "a2": True, "a3": True, "n": None}
    scores = abstention_scores(abstained, answerable)
    # TP = u1, u3; FP = a1; FN = u2; TN = a2, a3; "n" has no label.
    assert (scores.true_positives, scores.false_positives, scores.false_negatives, scores.true_negatives) == (2, 1, 1, 2)
    assert scores.precision == pytest.approx(2 / 3)
    assert scores.recall == pytest.approx(2 / 3)
    assert scores.f1 == pytest.approx(2 / 3)
    assert scores.evaluated == 6
    never = abstention_scores({"u1": False, "a1": False}, {"u1": False, "a1": True})
    assert never.precision is None and never.recall == 0.0 and never.f1 is None


def test_paired_bootstrap_is_seeded_and_paired() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(200)
    better = base + 0.05  # a constant shift: every resample has mean delta exactly 0.05
    ci = paired_bootstrap(better, base)
    assert ci.delta == pytest.approx(0.05)
    assert ci.low == pytest.approx(0.05) and ci.high == pytest.approx(0.05)
    assert not ci.noise
    noisy = rng.normal(0.0, 1.0, 200)
    first = paired_bootstrap(noisy, np.zeros(200), seed=3)
    assert first == paired_bootstrap(noisy, np.zeros(200), seed=3)  # reproducible
    assert first.low < first.delta < first.high
    # The standard error of a mean of 200 N(0, 1) draws is ~0.071: the 95 % interval is ~±0.14 wide.
    assert 0.2 < first.high - first.low < 0.4
    assert paired_bootstrap(np.ones(5), np.ones(5)).noise  # identical systems: CI [0, 0] contains 0
    with pytest.raises(ValueError):
        paired_bootstrap([1.0, 2.0], [1.0])


def test_paired_bootstrap_hand_computed_two_queries() -> None:
    # Deltas (1, 0): a resample's mean is 0, 0.5 or 1 with probabilities 1/4, 1/2, 1/4;
    # so the 2.5th percentile is 0 and the 97.5th is 1.
    ci = paired_bootstrap([1.0, 0.0], [0.0, 0.0], resamples=4000)
    assert ci.delta == 0.5 and ci.low == 0.0 and ci.high == 1.0 and ci.noise


def test_paired_delta_uses_shared_queries() -> None:
    ci = paired_delta({"a": 1.0, "b": 1.0, "c": 0.0}, {"a": 0.0, "b": 0.0, "x": 5.0})
    assert ci.n == 2 and ci.delta == 1.0


def test_percentiles() -> None:
    assert percentiles([1, 2, 3, 4, 5]) == {"p50": 3.0, "p95": pytest.approx(4.8)}
    assert percentiles([]) == {"p50": None, "p95": None}


def test_fold_text_for_quote_matching() -> None:
    assert fold_text("  The \u201cWaggle\u201d\u00a0Dance \u2014 bees\u2019 map\n") == "the \"waggle\" dance - bees' map"
    assert fold_text("\ufb01ne ＡＢＣ") == "fine abc"  # NFKC: ligature and full-width letters
    assert fold_text("Straße") == fold_text("STRASSE") == "strasse"  # casefold, not lower
    assert fold_text(" \t\n") == ""
