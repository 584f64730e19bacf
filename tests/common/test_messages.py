"""The message catalog: every shipped language complete, the English fallback, placeholders, and the
language rule the gateway and the generator share (the real py3langid model)."""

from __future__ import annotations

import string

import pytest

from rag_common.messages import FALLBACK_LANGUAGE, SHIPPED, LanguagePolicy, message
from rag_common.messages import en, ro
from rag_common.settings import LanguageSettings


def placeholders(text: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(text) if name}


@pytest.mark.parametrize("code", sorted(set(SHIPPED) - {FALLBACK_LANGUAGE}))
def test_every_shipped_language_has_every_english_key_with_the_same_placeholders(code: str) -> None:
    texts = SHIPPED[code]
    assert set(texts) == set(en.MESSAGES), f"{code}: missing {set(en.MESSAGES) - set(texts)}, extra {set(texts) - set(en.MESSAGES)}"
    for key, text in texts.items():
        assert text.strip() and text != en.MESSAGES[key], f"{code}:{key} is blank or left in English"
        assert placeholders(text) == placeholders(en.MESSAGES[key]), key


def test_romanian_is_written_with_comma_below_letters_never_cedillas() -> None:
    written = "".join(ro.MESSAGES.values())
    assert not set(written) & set("şţŞŢ")
    assert message("abstain", "ro") == "Nu am găsit informația în documente."


def test_a_language_without_texts_and_an_unknown_one_read_english() -> None:
    assert message("abstain", "de") == message("abstain", None) == "I could not find this in the documents."
    assert message("abstain", "en") == en.MESSAGES["abstain"]


def test_placeholders_are_filled_and_an_unwritten_key_is_an_error() -> None:
    assert message("meta_questions", "ro", questions="1. Unde?") == "Până acum, în această conversație, ați întrebat:\n1. Unde?"
    with pytest.raises(KeyError):
        message("no_such_text", "en")


@pytest.fixture(scope="module")
def policy() -> LanguagePolicy:
    return LanguagePolicy.of(LanguageSettings(languages=["en", "ro", "de"], default_language="en"))


def test_the_question_names_its_language_and_an_unsure_one_takes_the_conversations(policy: LanguagePolicy) -> None:
    assert policy.of_question("Unde sunt stocate conversațiile?") == "ro"
    assert policy.of_question("Where are the conversations stored?") == "en"
    assert policy.of_question("ok") is None
    assert policy.of_question("ok", history="ro") == "ro"
    # A confident question keeps its own language whatever the conversation was in.
    assert policy.of_question("Where are the conversations stored?", history="ro") == "en"


def test_texts_take_the_question_language_else_the_default(policy: LanguagePolicy) -> None:
    assert (policy.of_texts("ro"), policy.of_texts(None)) == ("ro", "en")
    assert LanguagePolicy.of(LanguageSettings(default_language="ro")).of_texts(None) == "ro"
