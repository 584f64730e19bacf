"""Content words: the lexical signal shared by the generator's claim-support check and extractive
answerer, and by the gateway's answer when the generator is down (``rag_gateway.stage_fallbacks``).

All ask "how many of these words does that text contain?", and all must fold words the same way,
or a claim the answerer built from a sentence could fail the support check on that very sentence.
The folding is deliberately light (case, punctuation, possessive and plural ``s``): it has to be
predictable and cheap, and the embedding cosine next to it catches real paraphrase.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection

__all__ = ["STOP_WORDS", "content_words", "coverage"]

#: Function words that say nothing about whether a text supports or answers something. Short on
#: purpose: negations ("not", "no", "never") are kept, since dropping them would let a claim and its
#: contradiction look identical.
STOP_WORDS = frozenset(
    """
    a an the and or but if then than so as of at by for from in into on onto to with without within
    about above after again against along among around before behind below between beyond during
    over through under until up upon via per out off down
    is are was were be been being am do does did doing done has have had having
    i me my mine we us our ours you your yours he him his she her hers it its they them their theirs
    this that these those there here where when which who whom whose what why how
    can could may might must shall should will would
    also just only very too more most much many some any each every all both either neither such
    other another same own s t because since while though although whether
    """.split()
)

_WORD = re.compile(r"\w+(?:['’]\w+)*")


def _fold(word: str) -> str:
    word = word.replace("’", "'")
    if word.endswith("'s"):
        word = word[:-2]
    elif "'" in word:
        word = word.replace("'", "")
    # Plural and third-person "s": "stores" ~ "store", "classes" ~ "class", "companies" ~ "company";
    # "class", "status", "analysis" stay.
    if len(word) <= 3 or not word.endswith("s") or word.endswith(("ss", "us", "is")):
        return word
    if word.endswith("sses"):
        return word[:-2]
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    return word[:-1]


def content_words(text: str) -> list[str]:
    """The folded, non-stop words of ``text`` in order (repeats kept; callers take ``set`` as needed).

    Numbers are content words: "1987" against "1988" is exactly the difference a check must see.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = (_fold(match.group(0)) for match in _WORD.finditer(folded))
    return [word for word in words if word and word not in STOP_WORDS and word.strip("_")]


def coverage(words: Collection[str], text_words: Collection[str]) -> float:
    """Share of the distinct ``words`` present in ``text_words``; 0.0 when ``words`` is empty."""
    wanted = set(words)
    if not wanted:
        return 0.0
    return len(wanted & set(text_words)) / len(wanted)
