"""Stage 1 (anchored rules) and the classifier's training data: pure functions, no model."""

from __future__ import annotations

import pytest

from rag_refiner.intent_classifier import INTENTS, IntentClassifier, load_examples
from rag_refiner.intent_rules import match_intent_rules, normalize


@pytest.mark.parametrize(
    ("message", "intent"),
    [
        ("hi", "chitchat"),
        ("Hello there!", "chitchat"),
        ("good morning, team 👋", "chitchat"),
        ("Thanks a lot!!", "chitchat"),
        ("ok thank you so much", "chitchat"),
        ("goodbye!", "chitchat"),
        ("see you tomorrow", "chitchat"),
        ("That’s all for now", "chitchat"),
        ("got it", "chitchat"),
        ("What did I ask before?", "meta"),
        ("what did i ask you earlier", "meta"),
        ("What was my previous question?", "meta"),
        ("go back to my first question please", "meta"),
        ("Summarize our conversation", "meta"),
        ("can you recap the chat so far?", "meta"),
        ("what have we talked about?", "meta"),
    ],
)
def test_whole_message_rules(message: str, intent: str | None) -> None:
    assert match_intent_rules(message) == intent


@pytest.mark.parametrize(
    "message",
    [
        # A greeting or thanks followed by a real question is a question.
        "Hi, what is the return policy for opened items?",
        "Thanks! And how do I cancel it?",
        "ok, what about the second option?",
        # About a conversation, but not this one; about a question, but not the user's previous one.
        "What did I ask my manager to sign in the leave form?",
        "Summarize our conversation policy for support calls",
        "What was the previous question on the exam?",
        "hello world program in the SDK",
    ],
)
def test_rules_do_not_fire_on_messages_with_more_in_them(message: str) -> None:
    assert match_intent_rules(message) is None


@pytest.mark.parametrize(
    ("message", "intent"),
    [
        # Greetings, thanks, farewells, how-are-you and acknowledgements, typed with and without diacritics.
        ("bună", "chitchat"),
        ("Buna ziua!", "chitchat"),
        ("bună ziua", "chitchat"),
        ("Salut!", "chitchat"),
        ("servus", "chitchat"),
        ("neața", "chitchat"),
        ("neata", "chitchat"),
        ("Bună seara tuturor", "chitchat"),
        ("Mulțumesc!", "chitchat"),
        ("Mulţumesc", "chitchat"),  # cedilla ţ, as older keyboards type it
        ("multumesc", "chitchat"),
        ("mersi", "chitchat"),
        ("Mulțumesc frumos!", "chitchat"),
        ("vă mulțumesc", "chitchat"),
        ("Va multumesc pentru ajutor", "chitchat"),
        ("ok, mersi", "chitchat"),
        ("La revedere!", "chitchat"),
        ("pa", "chitchat"),
        ("o zi bună", "chitchat"),
        ("Ce faci?", "chitchat"),
        ("ce mai faci?", "chitchat"),
        ("ok", "chitchat"),
        ("am înțeles", "chitchat"),
        ("am inteles", "chitchat"),
        ("Perfect!", "chitchat"),
        ("bine", "chitchat"),
        # Questions about this conversation.
        ("Ce te-am întrebat?", "meta"),
        ("ce te-am intrebat?", "meta"),
        ("Ce am întrebat înainte?", "meta"),
        ("care a fost întrebarea mea anterioară?", "meta"),
        ("Repetă prima mea întrebare, te rog", "meta"),
        ("rezumă conversația noastră", "meta"),
        ("Despre ce am vorbit până acum?", "meta"),
        # German, Spanish and French basics.
        ("Guten Morgen!", "chitchat"),
        ("danke schön", "chitchat"),
        ("Wie geht's?", "chitchat"),
        ("¡Hola!", "chitchat"),
        ("muchas gracias", "chitchat"),
        ("¿Qué tal?", "chitchat"),
        ("Merci beaucoup !", "chitchat"),
        ("au revoir", "chitchat"),
        ("Was habe ich vorhin gefragt?", "meta"),
        ("¿Cuál fue mi última pregunta?", "meta"),
        ("Résume notre conversation", "meta"),
    ],
)
def test_whole_message_rules_in_other_languages(message: str, intent: str) -> None:
    assert match_intent_rules(message) == intent


@pytest.mark.parametrize(
    "message",
    [
        "Unde sunt stocate conversațiile?",
        "Bună, unde sunt stocate conversațiile?",
        "Mulțumesc! Și cât timp sunt păstrate?",
        "ok, și pentru studenții de la master?",
        "Ce am întrebat-o pe doamna de la secretariat despre bursă?",
        "Care a fost întrebarea de la examenul de anul trecut?",
        "Rezumă regulamentul de cazare",
        "bine ați venit la facultatea de drept: ce acte trebuie?",
    ],
)
def test_romanian_rules_do_not_fire_on_messages_with_more_in_them(message: str) -> None:
    assert match_intent_rules(message) is None
    assert match_intent_rules(message, "ro") is None


def test_a_known_language_uses_its_table_and_the_english_one() -> None:
    # English chat words are typed in every language, and a short message is named by its conversation.
    assert match_intent_rules("thanks!", "ro") == "chitchat"
    assert match_intent_rules("mersi!", "ro") == "chitchat"
    assert match_intent_rules("what did I ask before?", "ro") == "meta"
    # Another language's table is not tried when the language is known ...
    assert match_intent_rules("danke schön", "ro") is None
    assert match_intent_rules("mulțumesc", "en") is None
    # ... and every table is when it is not, or when the language has no table of its own.
    assert match_intent_rules("danke schön") == "chitchat"
    assert match_intent_rules("mulțumesc", "it") == "chitchat"


def test_normalize_folds_diacritics() -> None:
    assert normalize("Mulțumesc, Ștefan! Ţine-o tot aşa") == "multumesc, stefan! tine-o tot asa"


def test_normalize_expands_contractions_and_drops_possessives() -> None:
    assert normalize("What’s   today's   score? Don't") == "what is today score? do not"


def test_shipped_examples_cover_every_intent_with_rag_the_largest() -> None:
    examples = load_examples()
    counts = {intent: sum(1 for label, _ in examples if label == intent) for intent in INTENTS}
    assert min(counts.values()) >= 30, counts
    assert counts["rag"] == max(counts.values()), counts


def test_malformed_example_lines_are_rejected() -> None:
    with pytest.raises(ValueError, match="line 2"):
        load_examples(["# comment", "greeting hello"])
    with pytest.raises(ValueError, match="line 1"):
        load_examples(["smalltalk\thello"])
    with pytest.raises(ValueError, match="missing"):
        IntentClassifier([("rag", "what is x"), ("chitchat", "hi")])


def test_classifier_probabilities_form_a_distribution_over_the_four_intents() -> None:
    scores = IntentClassifier().predict("How do I reset my password?")
    assert set(scores.probabilities) == set(INTENTS)
    assert sum(scores.probabilities.values()) == pytest.approx(1.0)
    assert scores.intent == "rag"
    assert scores.confidence == max(scores.probabilities.values())
