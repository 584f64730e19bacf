"""Stage 1 of intent routing: anchored patterns for the unmistakable cases.

Every pattern must match the *whole* normalised message, so "thanks" is chit-chat but "Thanks, and
how do I cancel it?" is not: a message that carries anything beyond the greeting, the thanks or
the question about the conversation falls through to the classifier. That keeps the rules
precise; coverage is the classifier's job.
"""

from __future__ import annotations

import re

from rag_common.schemas import Intent

# Optional lead-ins and tails that do not change what the message asks for.
_LEAD = r"(?:(?:ok(?:ay)?|great|cool|perfect|awesome|nice|alright|right|well|oh|so|hey|hi|hello)[ ,.!]+)?"
_POLITE = r"(?:[ ,]+(?:please|pls|again|now))*"
_END = r"[\W_]*"  # punctuation, spaces, emoji

_CHITCHAT = (
    # Greetings, optionally addressed: "hi", "hello there", "good morning everyone".
    r"(?:hi+|hello+|hey+|hiya|howdy|yo|greetings|hallo|(?:good )?(?:morning|afternoon|evening)|good day)"
    r"(?:[ ,]+(?:there|all|everyone|everybody|folks|team|friend|mate|assistant|bot))?",
    # Thanks, with or without a lead-in: "thanks a lot", "ok thank you so much", "cheers".
    _LEAD + r"(?:thanks|thank you|thank u|thx|ty|cheers|many thanks|much appreciated|appreciate it)(?:[ ,]+mate)?"
    r"(?: (?:a lot|a bunch|so much|very much|again|anyway|for (?:the|your) (?:help|answer|answers|info|information)))*",
    # Farewells: "bye", "see you later", "good night", "that's all for now".
    _LEAD + r"(?:bye(?: bye)?|goodbye|good bye|see you(?: later| soon| tomorrow)?|see ya|cya|good night|goodnight"
    r"|take care|that is all|that will be all|that is it|i am done)(?: for (?:now|today))?",
    # How are you.
    _LEAD + r"how are you(?: doing)?(?: today)?|how is it going|what is up|how do you do",
    # Bare acknowledgements and compliments: "ok", "got it", "sounds good", "you are the best".
    _LEAD + r"(?:ok(?:ay)?|k|alright|all right|got it|i see|understood|sounds good|makes sense|that makes sense"
    r"|cool|great|perfect|awesome|nice|wow|lol|haha|good to know|no worries|no problem|never mind|nevermind"
    r"|i appreciate (?:it|that|your help)|you are (?:the best|great|awesome|amazing|very helpful|so helpful))",
)

_META = (
    # "What did I ask (you) before?", "what have I asked so far?"
    r"(?:what|which questions?) (?:did|have) i (?:just )?ask(?:ed)?(?: you)?"
    r"(?: (?:before|earlier|previously|so far|first|last|at the (?:start|beginning)|in this (?:chat|conversation)))?",
    # "What was my previous question?", "repeat my last question", "go back to my first question".
    r"(?:(?:what|which) (?:was|were)|repeat|show(?: me)?|remind me(?: of| what)?|go back to|back to) my "
    r"(?:previous|last|earlier|first|original|prior) questions?(?: was)?",
    # "Summarize our conversation", "can you recap the chat so far".
    r"(?:(?:can|could|would) you |please )?(?:summari[sz]e|recap|sum up) (?:our|this|the) (?:conversation|chat|discussion)"
    r"(?: (?:so far|until now|up to now))?",
    # "What have we talked about (so far)?"
    r"what (?:have|did) we (?:talk(?:ed)?|discuss(?:ed)?|cover(?:ed)?)(?: about)?(?: (?:so far|until now|earlier|before))?",
)

_RULES: tuple[tuple[Intent, re.Pattern[str]], ...] = tuple(
    (intent, re.compile(rf"^(?:{pattern}){_POLITE}{_END}$"))
    for intent, patterns in (("chitchat", _CHITCHAT), ("meta", _META))
    for pattern in patterns
)


def normalize(message: str) -> str:
    """Lower-cased, curly quotes straightened, contractions expanded, spaces collapsed.

    Shared with the classifier, so "what's" and "what is" are one feature and a possessive "'s"
    does not look like anything ("today's" -> "today").
    """
    text = message.lower().replace("\u2019", "'").replace("\u2018", "'")
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


def match_intent_rules(message: str) -> Intent | None:
    """The intent if the whole message is a greeting, thanks, farewell or a question about the chat."""
    text = normalize(message)
    for intent, pattern in _RULES:
        if pattern.match(text):
            return intent
    return None
