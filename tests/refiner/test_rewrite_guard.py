"""The guard on crafted rewrites: pure function, no model."""

from __future__ import annotations

import pytest

from rag_common.schemas import HistoryTurn
from rag_refiner.rewrite_guard import check_rewrite, content_words, needs_context
from rag_refiner.settings import RefinerSettings

#: The longest rewrite the guard accepts by default (``REFINER_MAX_QUERY_CHARS``, the one source).
MAX_QUERY_CHARS = RefinerSettings().max_query_chars

ACME = [
    HistoryTurn(
        question="Tell me about the Acme Robotics company history",
        answer="Acme Robotics started in a garage in Ohio and grew into a major manufacturer.",
    )
]
FOLLOW_UP = "What year was it founded?"


def test_accepts_a_rewrite_that_swaps_the_pronoun_for_the_subject() -> None:
    verdict = check_rewrite("What year was Acme Robotics founded?", FOLLOW_UP, ACME, max_query_chars=MAX_QUERY_CHARS)
    assert verdict.accepted, verdict.detail
    assert verdict.failed_check == ""


def test_accepts_a_standalone_message_returned_unchanged() -> None:
    message = "How do I request parental leave from my manager at Acme Robotics?"
    assert check_rewrite(message, message, ACME, max_query_chars=MAX_QUERY_CHARS).accepted


def test_rejects_an_invented_constraint() -> None:
    verdict = check_rewrite("What year was Acme Robotics founded in Germany?", FOLLOW_UP, ACME, max_query_chars=MAX_QUERY_CHARS)
    assert not verdict.accepted
    assert verdict.failed_check == "invented_words"
    assert "germany" in verdict.detail


def test_rejects_a_rewrite_that_drops_the_users_words() -> None:
    verdict = check_rewrite("Tell me about the Acme Robotics company history", FOLLOW_UP, ACME, max_query_chars=MAX_QUERY_CHARS)
    assert not verdict.accepted
    assert verdict.failed_check == "dropped_user_words"


def test_context_dependent_message_must_gain_context_from_history() -> None:
    verdict = check_rewrite("What year was it founded?", FOLLOW_UP, ACME, max_query_chars=MAX_QUERY_CHARS)
    assert not verdict.accepted
    assert verdict.failed_check == "no_added_context"


def test_short_message_counts_as_context_dependent() -> None:
    assert needs_context("What about Django 4.2?")
    history = [HistoryTurn(question="Which Python versions does Django 5.0 support?", answer="3.10 to 3.12.")]
    assert check_rewrite("Which Python versions does Django 4.2 support?", "What about Django 4.2?", history, max_query_chars=MAX_QUERY_CHARS).accepted
    assert check_rewrite("What about Django 4.2?", "What about Django 4.2?", history, max_query_chars=MAX_QUERY_CHARS).failed_check == "no_added_context"


def test_existential_there_is_not_a_reference() -> None:
    assert not needs_context("Are there other municipalities on the verge of collapse in Alabama?")
    assert needs_context("How long does the train ride there take from Oslo?")


@pytest.mark.parametrize(
    ("rewrite", "check"),
    [("", "empty"), ("   ", "empty"), ("What year was Acme Robotics founded? " * 20, "too_long")],
)
def test_rejects_empty_and_overlong_rewrites(rewrite: str, check: str) -> None:
    verdict = check_rewrite(rewrite, FOLLOW_UP, ACME, max_query_chars=400)
    assert (verdict.accepted, verdict.failed_check) == (False, check)


def test_word_forms_and_possessives_compare_equal() -> None:
    assert content_words("Acme's printers founded") == content_words("acme printer founding")
    assert content_words("sports programing") == content_words("sport programming")


STORAGE = [
    HistoryTurn(
        question="Unde sunt stocate conversațiile?",
        answer="Conversațiile sunt stocate în baza de date PostgreSQL a serviciului.",
    )
]
KEPT_FOR = "Și cât timp sunt păstrate?"


@pytest.mark.parametrize(
    "rewrite",
    [
        "Cât timp sunt păstrate conversațiile?",
        "Cat timp sunt pastrate conversatiile?",  # the same words without diacritics
        # Another form of the user's verb and new Romanian function words ("se", "în", "de").
        "Cât timp se păstrează conversațiile în baza de date?",
    ],
)
def test_accepts_a_good_romanian_rewrite(rewrite: str) -> None:
    verdict = check_rewrite(rewrite, KEPT_FOR, STORAGE, max_query_chars=MAX_QUERY_CHARS, language="ro")
    assert verdict.accepted, verdict.detail


def test_without_the_language_romanian_inflection_reads_as_dropped_words() -> None:
    # What the guard did before it knew the message's language: the English suffix strip cannot
    # see that "păstrează" is "păstrate".
    rewrite = "Cât timp se păstrează conversațiile în baza de date?"
    assert check_rewrite(rewrite, KEPT_FOR, STORAGE, max_query_chars=MAX_QUERY_CHARS).failed_check == "dropped_user_words"


@pytest.mark.parametrize(
    ("rewrite", "check", "word"),
    [
        ("Cât timp sunt păstrate conversațiile pe Windows?", "invented_words", "windo"),
        ("Cât timp sunt păstrate conversațiile în 2020?", "invented_words", "2020"),
        # A negation is a content word: adding it changes the question.
        ("Cât timp nu sunt păstrate conversațiile?", "invented_words", "nu"),
        ("Unde sunt stocate conversațiile?", "dropped_user_words", "timp"),
        ("Cât timp sunt păstrate?", "no_added_context", ""),
    ],
)
def test_rejects_a_bad_romanian_rewrite(rewrite: str, check: str, word: str) -> None:
    verdict = check_rewrite(rewrite, KEPT_FOR, STORAGE, max_query_chars=MAX_QUERY_CHARS, language="ro")
    assert (verdict.accepted, verdict.failed_check) == (False, check)
    assert word in verdict.detail


def test_romanian_words_compare_by_prefix_and_without_stop_words_or_diacritics() -> None:
    assert content_words("Cum s-a schimbat taxa într-o lună?", "ro") == {"schim", "taxa", "luna"}
    assert content_words("conversațiile", "ro") == content_words("conversatii", "ro")
    assert content_words("nu", "ro") == {"nu"}
    # Numbers are compared whole.
    assert content_words("anul 201234", "ro") != content_words("anul 201299", "ro")


def test_romanian_pronouns_make_a_message_lean_on_the_conversation() -> None:
    long_message = "Cât costă în total cazarea acolo pentru un student din anul întâi?"
    assert needs_context(long_message, "ro")
    assert not needs_context("Cât costă în total cazarea la cămin pentru un student din anul întâi?", "ro")
    # "sau" (or) is not the possessive "său" once diacritics are folded away.
    assert not needs_context("Pot depune cererea online sau trebuie să merg la secretariat cu actele?", "ro")
