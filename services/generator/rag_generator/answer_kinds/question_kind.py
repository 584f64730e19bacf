"""What kind of answer a question wants, from its interrogatives (:mod:`.question_words`).

Every rule of the question's language is matched on the folded question (case and diacritics do
not matter); the match that starts first wins, then the longest, so "In what year did who..." wants
a date and "how many" beats "how". A yes/no auxiliary counts only as the question's first word.
"Which/what X" takes the kind of the first lexicon noun within five words of the determiner ("which
team did the city..." wants an organisation, not a place). With no language every language's rules
are tried together; a language outside the table has none, so its questions are ``UNKNOWN``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

from .folding import folded_same_length
from .kinds import AnswerKind
from .question_words import QUESTION_WORDS

__all__ = ["wanted_kind"]

#: Opening punctuation that may precede a question's first word ("¿Es...?", "«Qui...»").
_LEADING = re.compile(r"^[\s¿¡\"'“„«(\[-]+")
#: Words allowed between a "which" determiner and its noun ("which of the following teams").
_WORDS_BETWEEN = 5
#: Ties at the same start and length: the more specific kind first.
_PRIORITY = {kind: rank for rank, kind in enumerate(AnswerKind)}


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str]
    kind: AnswerKind | None  # None: the kind is the name of the noun group that matched


def _fold(fragment: str) -> str:
    return folded_same_length(fragment)


def _nouns(spec: str) -> str:
    return "|".join(re.escape(_fold(noun[:-1])) + r"\w*" if noun.endswith("*") else re.escape(_fold(noun))
                     for noun in spec.split())


@cache
def _rules(code: str) -> tuple[_Rule, ...]:
    table = QUESTION_WORDS[code]
    rules = [
        _Rule(re.compile(rf"(?<!\w)(?:{_fold(fragment)})(?!\w)"), kind) for fragment, kind in table["phrases"].items()
    ]
    nouns = "|".join(f"(?P<{kind.name}>{_nouns(spec)})" for kind, spec in table["nouns"].items())
    which = _fold(table["which"])
    between = rf"(?:[\w'’-]+\s+){{0,{_WORDS_BETWEEN}}}?"  # lazy: the first noun after the determiner
    rules.append(_Rule(re.compile(rf"(?<!\w)(?:{which})\s+{between}(?:{nouns})(?!\w)"), None))
    rules.append(_Rule(re.compile(rf"^(?:{_fold(table['yes_no'])})(?!\w)"), AnswerKind.YES_NO))
    return tuple(rules)


def _best(question: str, codes: tuple[str, ...]) -> AnswerKind:
    best: tuple[int, int, int, AnswerKind] | None = None
    for code in codes:
        for rule in _rules(code):
            match = rule.pattern.search(question)
            if match is None:
                continue
            kind = rule.kind or AnswerKind[match.lastgroup or "UNKNOWN"]
            key = (match.start(), -(match.end() - match.start()), _PRIORITY[kind], kind)
            if best is None or key[:3] < best[:3]:
                best = key
    if best is None:
        return AnswerKind.UNKNOWN
    if best[0] > 0 and any(_opens_with_which(question, code) for code in codes):
        # "What is it called when...", "Was sagte er, wo...": after a leading "what/which" that found
        # no noun (else it would have matched first), a later "when/where/who" opens a clause.
        return AnswerKind.UNKNOWN
    return best[3]


@cache
def _which_start(code: str) -> re.Pattern[str]:
    return re.compile(rf"(?:{_fold(QUESTION_WORDS[code]['which'])})(?!\w)")


def _opens_with_which(question: str, code: str) -> bool:
    return _which_start(code).match(question) is not None


def wanted_kind(question: str, language: str | None) -> AnswerKind:
    """The kind of answer ``question`` wants in ``language`` (an ISO code of the registry, or ``None``
    to try every language's rules); ``UNKNOWN`` when no rule says."""
    folded = _LEADING.sub("", folded_same_length(question.strip()))
    if language is None:
        return _best(folded, tuple(QUESTION_WORDS))
    if language not in QUESTION_WORDS:
        return AnswerKind.UNKNOWN
    return _best(folded, (language,))
