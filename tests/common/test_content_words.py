from __future__ import annotations

from rag_common.content_words import content_words, coverage


def test_content_words_fold_case_punctuation_possessives_and_plurals() -> None:
    assert content_words("The Company's founders stored the Classes, in 1987!") == ["company", "founder", "stored", "class", "1987"]
    assert content_words("companies") == content_words("company") == ["company"]
    # Words that merely end in s are left alone.
    assert content_words("status analysis class") == ["status", "analysis", "class"]


def test_stop_words_go_but_negations_stay() -> None:
    assert content_words("it is not in the list") == ["not", "list"]
    assert content_words("What is it?") == []


def test_coverage_is_share_of_distinct_words_found() -> None:
    assert coverage(["redis", "key", "redis"], ["redis", "list"]) == 0.5
    assert coverage([], ["anything"]) == 0.0
