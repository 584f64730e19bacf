"""Proper names in a sentence, and what they name: an organisation, a place or (otherwise) a person.

A name is a run of capitalised words, which may hold the particles names are built with ("Leonardo
da Vinci", "Universitatea din București", "Bank of America") and initials ("J. R. R. Tolkien"). A
run's leading stop words and titles are dropped ("The", "Dr."). A single capitalised word at the
start of the sentence is a name only when the gazetteer or the organisation words know it, since
every sentence starts with a capital. German capitalises every noun, so a single German word is a
name only when no determiner precedes it and it has no common-noun ending ("die Regierung" is not).
Month and weekday names are not names; Roman numerals end a run (they are :mod:`.quantities`'s).

Kinds: an organisation word anywhere (:mod:`.name_lexicon`: "Inc.", "GmbH", "Universitatea"), else a
known place (:mod:`.gazetteer`) or a place word at either end ("Lake Tahoe", "Tampa Bay"), else an
acronym is an organisation ("NFL"), as is a place followed by a plural (a team: "Denver Broncos"),
else a person (or a name the rules cannot place: callers asking for a place or an organisation should
accept one).
"""

from __future__ import annotations

import re
from functools import cache

from rag_common.languages.registry import LANGUAGES

from .calendar_words import day_names, month_names
from .folding import fold_key
from .gazetteer import is_place
from .kinds import AnswerKind, ValueSpan
from .name_lexicon import (
    ARTICLES,
    DETERMINERS_DE,
    NAME_PARTICLES,
    NOUN_SUFFIXES_DE,
    ORGANISATION_WORDS,
    PLACE_WORDS,
    TITLE_WORDS,
)
from .question_words import QUESTION_WORDS
from .roman import roman_value

__all__ = ["name_kind", "name_spans"]

_TOKEN = re.compile(r"(?:[^\W\d_]\.){2,}|[^\W\d_][\w'’&-]*\.?")
#: What may stand between two words of one name: spaces, or nothing after a hyphen.
_JOIN = re.compile(r"[ \u00a0]+")
_SENTENCE_BREAK = re.compile(r"[.!?…:;]\s+$|^\s*$")
_ACRONYM = re.compile(r"[A-Z]{2,6}")
#: Lowercase name prefixes joined to a capitalised part: "al-Turabi", "d'Artagnan", "ibn-Sina".
_PREFIXED = re.compile(r"(?:al|el|ad|ar|as|ash|at|az|ibn|bin|d|l|o)['’-][^\W\d_]", re.IGNORECASE)


@cache
def _stop_words(codes: tuple[str, ...]) -> frozenset[str]:
    return frozenset(fold_key(word) for code in codes for word in LANGUAGES[code].stop_words)


def _keeps_period(token: str) -> bool:
    word = token.lower()
    return len(token) == 2 or word in ORGANISATION_WORDS or word in TITLE_WORDS or token.count(".") > 1


def _tokens(sentence: str) -> list[tuple[int, int, str]]:
    tokens = []
    for match in _TOKEN.finditer(sentence):
        start, end, text = match.start(), match.end(), match.group()
        if text.endswith(".") and not _keeps_period(text):
            end, text = end - 1, text[:-1]
        tokens.append((start, end, text))
    return tokens


def _capitalised(token: str) -> bool:
    if roman_value(token) is not None and token.isupper() and token != "I":
        return False
    return token[0].isupper() or _PREFIXED.match(token) is not None


def _runs(sentence: str, tokens: list[tuple[int, int, str]]) -> list[list[int]]:
    """Indices of tokens forming capitalised runs (particles only between capitalised words)."""
    runs: list[list[int]] = []
    current: list[int] = []
    for index, (start, _, text) in enumerate(tokens):
        joined = bool(current) and _JOIN.fullmatch(sentence[tokens[current[-1]][1]:start]) is not None
        if _capitalised(text) and (joined or not current):
            current.append(index)
            continue
        if joined and text.lower() in NAME_PARTICLES and index + 1 < len(tokens) and _capitalised(tokens[index + 1][2]):
            current.append(index)
            continue
        if current:
            runs.append(current)
        current = [index] if _capitalised(text) else []
    if current:
        runs.append(current)
    return runs


def name_kind(name: str) -> AnswerKind:
    """ORGANISATION, PLACE or PERSON for a name (a capitalised word run)."""
    words = [fold_key(word) for word in name.split()]
    if any(word in ORGANISATION_WORDS or word.rstrip(".") in ORGANISATION_WORDS for word in words):
        return AnswerKind.ORGANISATION
    if is_place(name) or words[-1] in PLACE_WORDS or words[0] in PLACE_WORDS:
        return AnswerKind.PLACE
    if len(words) > 1 and words[-1].endswith("s") and _starts_with_place(name.split()):
        return AnswerKind.ORGANISATION  # a place and a plural: a team ("Denver Broncos", "Los Angeles Rams")
    if _ACRONYM.fullmatch(name):
        return AnswerKind.ORGANISATION
    return AnswerKind.PERSON


def _starts_with_place(words: list[str]) -> bool:
    return any(is_place(" ".join(words[:length])) for length in range(1, len(words)))


def _known(name: str) -> bool:
    folded = fold_key(name)
    return folded in ORGANISATION_WORDS or is_place(name) or _ACRONYM.fullmatch(name) is not None


def name_spans(sentence: str, language: str | None, sentence_start: bool = True) -> list[ValueSpan]:
    """Names in ``sentence``; ``sentence_start=False`` for a fragment (a bare answer), whose first
    word is not capitalised just for starting a sentence."""
    codes = (language,) if language in QUESTION_WORDS else tuple(QUESTION_WORDS)
    stop_words, calendar = _stop_words(codes), set(month_names(codes)) | day_names(codes)
    tokens = _tokens(sentence)
    spans: list[ValueSpan] = []
    for run in _runs(sentence, tokens):
        first_index = run[0]
        at_sentence_start = sentence_start and _SENTENCE_BREAK.search(sentence[: tokens[run[0]][0]]) is not None
        whole = sentence[tokens[run[0]][0]:tokens[run[-1]][1]]
        # Leading words that are not part of the name: a title ("Dr."), an article ("The", "Die") unless it
        # starts a place ("Los Angeles", "The Hague"), and at a sentence's start any stop word ("In Paris")
        # unless the whole run is known ("New York").
        while len(run) > 1 and (
            tokens[run[0]][2].lower() in TITLE_WORDS
            or (fold_key(tokens[run[0]][2]) in ARTICLES and not _known(whole) and not _starts_with_place(whole.split()))
            or (at_sentence_start and run[0] == first_index and fold_key(tokens[run[0]][2]) in stop_words
                and not _known(whole))
        ):
            run = run[1:]
        while run and tokens[run[-1]][2].lower() in NAME_PARTICLES:
            run = run[:-1]
        if not run:
            continue
        start, end = tokens[run[0]][0], tokens[run[-1]][1]
        text = sentence[start:end]
        at_start = sentence_start and run[0] == first_index and _SENTENCE_BREAK.search(sentence[:start]) is not None
        if len(run) == 1:
            folded = fold_key(text)
            if folded in calendar or folded in stop_words or text.lower() in TITLE_WORDS:
                continue
            if at_start and not _known(text):
                continue
            if language == "de" and not _known(text) and (
                folded.endswith(NOUN_SUFFIXES_DE)
                or (run[0] > 0 and fold_key(tokens[run[0] - 1][2]) in DETERMINERS_DE)
            ):
                continue
        spans.append(ValueSpan(_kind_in_context(text, tokens, run[0]), start, end, text, fold_key(text)))
    return spans


def _kind_in_context(name: str, tokens: list[tuple[int, int, str]], first: int) -> AnswerKind:
    """A name's kind, helped by the common noun before it ("orașul Cluj", "la ciudad de Madrid",
    "compania Apple", "strada Konwiktorska")."""
    kind = name_kind(name)
    if kind is not AnswerKind.PERSON:
        return kind
    before = first - 1
    if before >= 0 and tokens[before][2].lower() in NAME_PARTICLES:
        before -= 1
    if before >= 0:
        word = fold_key(tokens[before][2])
        if word in PLACE_WORDS:
            return AnswerKind.PLACE
        if word in ORGANISATION_WORDS:
            return AnswerKind.ORGANISATION
    return kind
