"""Stage 1 of intent routing: anchored patterns for the unmistakable cases.

Every pattern must match the *whole* normalised message, so "thanks" is chit-chat but "Thanks, and
how do I cancel it?" is not: a message that carries anything beyond the greeting, the thanks or
the question about the conversation falls through to the classifier. That keeps the rules
precise; coverage is the classifier's job.

The patterns are per language (``intent_patterns.TABLES``). A message of a known language is matched
against its language's table and the English one (people write "ok", "thanks", "bye" in every
language, and a short message's language is mostly the conversation's, not its own); a message of
unknown language, or of one without a table, against every table: anchored whole-message patterns
of greetings and thanks do not collide across languages.
"""

from __future__ import annotations

import re

from rag_common.languages import fold_diacritics
from rag_common.schemas import Intent
from rag_refiner.intent_patterns import TABLES

_END = r"[\W_]*"  # punctuation, spaces, emoji
# Spanish opens a question or an exclamation with ¿ or ¡.
_START = r"[¿¡]*"

# Every table compiled: (intent, pattern) in the table's order, chitchat first.
_RULES: dict[str, tuple[tuple[Intent, re.Pattern[str]], ...]] = {
    code: tuple(
        (intent, re.compile(rf"^{_START}(?:{pattern})(?:[ ,]+(?:{table.polite}))*{_END}$"))
        for intent, patterns in (("chitchat", table.chitchat), ("meta", table.meta))
        for pattern in patterns
    )
    for code, table in TABLES.items()
}


def normalize(message: str) -> str:
    """Lower-cased, diacritics folded, curly quotes straightened, contractions expanded, spaces collapsed.

    Shared with the classifier, so "what's" and "what is" are one feature and a possessive "'s"
    does not look like anything ("today's" -> "today"), and "mulțumesc" typed without its
    diacritics ("multumesc") is the same word.
    """
    text = fold_diacritics(message.lower()).replace("\u2019", "'").replace("\u2018", "'")
    text = re.sub(r"\b(what|that|it|there|who|how|where|here|let|he|she)'s\b", r"\1 is", text)
    text = re.sub(r"\bcan't\b", "can not", text)
    text = re.sub(r"\bwon't\b", "will not", text)
    text = re.sub(r"n't\b", " not", text)
    text = re.sub(r"'re\b", " are", text)
    text = re.sub(r"'m\b", " am", text)
    text = re.sub(r"'ll\b", " will", text)
    text = re.sub(r"'ve\b", " have", text)
    text = re.sub(r"'d\b", " would", text)
    text = re.sub(r"'s\b", "", text)
    return " ".join(text.split())


def match_intent_rules(message: str, language: str | None = None) -> Intent | None:
    """The intent if the whole message is a greeting, thanks, farewell or a question about the chat.

    ``language``: the message's ISO 639-1 code when the caller knows it, else None (see the module doc).
    """
    text = normalize(message)
    for code in _tables_for(language):
        for intent, pattern in _RULES[code]:
            if pattern.match(text):
                return intent
    return None


def _tables_for(language: str | None) -> tuple[str, ...]:
    if language in _RULES:
        return tuple(dict.fromkeys((language, "en")))
    return tuple(_RULES)
