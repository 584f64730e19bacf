"""Content words: the lexical signal shared by the generator's claim-support check and extractive
answerer, and by the gateway's answer when the generator is down (``rag_gateway.stage_fallbacks``).

All ask "how many of these words does that text contain?", and all must fold words the same way,
or a claim the answerer built from a sentence could fail the support check on that very sentence.
The folding is deliberately light (case, diacritics, punctuation; in English also the possessive and
plural ``s``): it has to be predictable and cheap, and the embedding cosine next to it catches real
paraphrase. Words are read in a language (the text's ISO 639-1 code; None: English): its stop words
are the kept ``stop-words`` package's list (``rag_common.languages``), never a hand-written one.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from functools import cache

from rag_common.languages import fold_diacritics, language as language_of, normalise_text

__all__ = ["content_words", "coverage", "stop_words"]

_WORD = re.compile(r"\w+(?:['’]\w+)*")
#: Languages whose plural and possessive "s" is folded away (English morphology; see ``_fold_english``).
_S_FOLDING = frozenset({"en"})


def _fold_english(word: str) -> str:
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


def _words(text: str, code: str) -> list[str]:
    """``text`` cut into words and folded: NFKC, case, diacritics ("dacă" = "daca": stop lists and
    writers do not agree on them); English also folds its plural and possessive ``s``, other languages
    cut at an apostrophe instead (French and Italian elision: "l'homme" → "l", "homme")."""
    folded = fold_diacritics(normalise_text(unicodedata.normalize("NFKC", text)).casefold())
    if code in _S_FOLDING:
        return [_fold_english(match.group(0)) for match in _WORD.finditer(folded)]
    return [part for match in _WORD.finditer(folded) for part in re.split(r"['’]", match.group(0)) if part]


@cache
def stop_words(code: str | None) -> frozenset[str]:
    """The words of language ``code`` that never count (None → English's): its list from the kept
    ``stop-words`` package (``rag_common.languages``), folded like the text, minus its negations, so a
    claim and its contradiction never look alike. An entry of several words ("por qué", "intr-o")
    drops each of its words."""
    spoken = language_of(code or "en")
    negations = {word for negation in spoken.negations for word in _words(negation, spoken.code)}
    listed = {word for entry in spoken.stop_words for word in _words(entry, spoken.code)}
    return frozenset(listed - negations)


def content_words(text: str, language: str | None = None) -> list[str]:
    """The folded, non-stop words of ``text`` in order (repeats kept; callers take ``set`` as needed).

    ``language``: the text's ISO 639-1 code (None → English, the default before languages existed).
    Numbers are content words: "1987" against "1988" is exactly the difference a check must see.
    """
    code = language or "en"
    ignored = stop_words(code)
    return [word for word in _words(text, code) if word not in ignored and word.strip("_")]


def coverage(words: Collection[str], text_words: Collection[str]) -> float:
    """Share of the distinct ``words`` present in ``text_words``; 0.0 when ``words`` is empty."""
    wanted = set(words)
    if not wanted:
        return 0.0
    return len(wanted & set(text_words)) / len(wanted)
