"""Content words per language: each language's kept stop list, folded like the text, negations kept."""

from __future__ import annotations

import pytest

from rag_common.content_words import content_words, coverage, stop_words
from rag_common.languages import LANGUAGES, language


def test_romanian_drops_its_function_words_with_or_without_diacritics_but_keeps_nu() -> None:
    words = content_words("Dacă studenții nu vin și sau daca profesorii întârzie, ședința se amână.", "ro")
    assert {"daca", "si", "sau", "se"}.isdisjoint(words)
    assert "nu" in words
    # Diacritics and cedillas fold: the same word whichever way it was typed.
    assert content_words("ședința", "ro") == content_words("şedinţa", "ro") == content_words("sedinta", "ro") == ["sedinta"]


def test_romanian_overlap_needs_the_romanian_list() -> None:
    question = "Unde sunt stocate conversațiile?"
    sentence = "Conversațiile sunt stocate în Redis, nu în Postgres."
    assert coverage(content_words(question, "ro"), content_words(sentence, "ro")) == 1.0
    # Read as English, "unde" counts as a content word the sentence lacks.
    assert coverage(content_words(question), content_words(sentence)) < 1.0


def test_english_is_the_default_and_keeps_its_plural_folding() -> None:
    assert content_words("The companies' founders stored classes", None) == content_words(
        "The companies' founders stored classes", "en"
    )
    assert content_words("companies stored", "en") == ["company", "stored"]
    # Other languages fold nothing but case and diacritics: a Romanian plural "s" is part of the word.
    assert content_words("autobuzele ales", "ro") == ["autobuzele", "ales"]


def test_elision_is_cut_at_the_apostrophe_outside_english() -> None:
    assert content_words("L'université d'hiver", "fr") == ["universite", "hiver"]
    assert content_words("dell'anno", "it") == ["anno"]


@pytest.mark.parametrize("code", sorted(LANGUAGES))
def test_every_language_keeps_its_negations_and_numbers(code: str) -> None:
    spoken = language(code)
    ignored = stop_words(code)
    assert ignored, code
    for negation in spoken.negations:
        assert all(word not in ignored for word in content_words(negation, code)), (code, negation)
    assert content_words("1987 2024", code) == ["1987", "2024"]


def test_a_multi_word_stop_entry_drops_each_of_its_words() -> None:
    # "intr-o" is one entry of the Romanian list; the text's "într-o" is two words, both dropped.
    assert content_words("într-o sală", "ro") == ["sala"]
