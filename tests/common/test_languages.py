"""rag_common.languages: the registry, the normalisation, the confidence rule and the real identifier."""

from __future__ import annotations

import pytest
import tantivy
from pydantic import ValidationError

from rag_common.languages import (
    LANGUAGES,
    UnsupportedLanguageError,
    fold_diacritics,
    identifier_of,
    identify_document,
    identify_query,
    language,
    languages,
    normalise_text,
)
from rag_common.languages.identifier import guess_from_ranking
from rag_common.settings import ALL_LANGUAGES, LanguageSettings

IDENTIFIER = identifier_of(LanguageSettings())
ALL = tuple(LANGUAGES)


def test_every_supported_language_has_a_tantivy_stemmer_and_a_stop_list():
    assert sorted(LANGUAGES) == sorted(ALL_LANGUAGES)
    for entry in LANGUAGES.values():
        tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple()).filter(tantivy.Filter.stemmer(entry.name)).build()
        assert len(entry.stop_words) >= 50, entry.code
        assert entry.negations, entry.code


def test_the_romanian_stop_list_has_function_words_and_no_content_words():
    words = language("ro").stop_words
    # The package writes Romanian without diacritics: users of the list compare folded words.
    assert {"si", "sau", "de", "la", "care"} <= words
    assert "universitate" not in words


def test_an_unknown_code_names_the_supported_ones():
    with pytest.raises(UnsupportedLanguageError, match="supported: ar, da, de"):
        language("pl")
    assert [entry.code for entry in languages(["ro", "en", "ro"])] == ["ro", "en"]


def test_settings_refuse_an_unsupported_language(monkeypatch):
    monkeypatch.setenv("RAG_LANGUAGES", '["ro", "xx"]')
    with pytest.raises(ValidationError, match="unsupported language 'xx'"):
        LanguageSettings()
    monkeypatch.setenv("RAG_LANGUAGES", '["ro", "en"]')
    assert LanguageSettings().languages == ["ro", "en"]


def test_cedilla_and_comma_below_are_one_letter_and_text_is_nfc():
    assert normalise_text("conversaţiile ştiinţifice") == "conversațiile științifice"
    decomposed = "conversa\u0163iile".replace("\u0163", "t\u0327")  # t + combining cedilla
    assert normalise_text(decomposed) == "conversațiile"
    assert fold_diacritics("Științifică, Größe") == "Stiintifica, Große"


def test_the_rule_renormalises_over_the_configured_languages():
    ranking = [("it", 0.5), ("ro", 0.4), ("es", 0.1)]
    guess = guess_from_ranking(ranking, ["ro", "es"], min_confidence=0.7, other_confidence=0.6)
    assert (guess.code, round(guess.confidence, 2), guess.reason) == ("ro", 0.8, "confident")
    # The unsupported top label is confident enough to be "other": neutral, not forced into Romanian.
    other = guess_from_ranking(ranking, ["ro", "es"], min_confidence=0.7, other_confidence=0.5)
    assert (other.code, other.reason) == (None, "other")
    unsure = guess_from_ranking([("ro", 0.5), ("it", 0.4)], ["ro", "it"], min_confidence=0.7, other_confidence=0.5)
    assert (unsure.code, unsure.reason) == (None, "unsure")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Unde sunt stocate conversațiile?", "ro"),
        ("Unde sunt stocate conversatiile?", "ro"),
        ("Where are the conversations stored?", "en"),
        ("Wo werden die Gespräche gespeichert?", "de"),
        ("¿Dónde se guardan las conversaciones?", "es"),
        ("Où les conversations sont-elles enregistrées ?", "fr"),
    ],
)
def test_questions_are_identified(text, expected):
    guess = IDENTIFIER.identify(text, ALL)
    assert guess.code == expected and guess.confidence >= 0.7


def test_short_or_foreign_text_is_not_forced_into_a_language():
    assert IDENTIFIER.identify("ok", ALL).code is None
    assert IDENTIFIER.identify("   ", ALL).reason == "empty"
    assert IDENTIFIER.identify("这个问题的答案是什么", ALL).reason == "other"


def test_a_query_falls_back_to_its_conversation_and_a_document_to_its_declaration():
    assert identify_query(IDENTIFIER, "ok", ALL, history="ro").code == "ro"
    assert identify_query(IDENTIFIER, "ok", ALL, history="ro").reason == "history"
    # A confident answer wins over the history.
    assert identify_query(IDENTIFIER, "Where are the conversations stored?", ALL, history="ro").code == "en"
    assert identify_document(IDENTIFIER, "The quick brown fox.", ALL, declared="ro").code == "ro"
    assert identify_document(IDENTIFIER, "Regulamentul studiilor universitare de licență.", ALL).code == "ro"
