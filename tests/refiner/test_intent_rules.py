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
