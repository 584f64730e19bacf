"""The phrase that answers, marked inside the best sentence (issue 32, item 2).

In the sentence the answerer ranked best, among the value spans of the kind the question wants
(``rag_generator.answer_kinds``; a "who" question takes a person or an organisation) that the question
does not already name, the one nearest to the question's content words in that sentence: "Who won the
women's singles Wimbledon in 2019?" → "Simona Halep" in "Simona Halep won the women's singles title
at Wimbledon in 2019." Nearest because a sentence often holds several names or numbers and the one
that answers sits next to the words the question shares with it ("won ... singles"). None when the
question's kind is not one a span can be (a definition, a yes/no) or the sentence holds no such span.
The sentence stays the unit of citation: the span is given within the citation's ``quote``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from rag_common.content_words import content_words
from rag_common.schemas import AnswerSpan
from rag_generator.answer_kinds import AnswerKind, ValueSpan, value_spans
from rag_generator.evidence import EvidenceUnit
from rag_generator.sentence_features import AskedQuestion, answering_spans

__all__ = ["MarkedSpan", "answer_span", "best_span"]

_WORD = re.compile(r"\w+")
#: ``AnswerKind`` → the wire's ``ValueKind`` (the kinds a span can be).
_WIRE_KIND = {
    AnswerKind.PERSON: "person",
    AnswerKind.PLACE: "place",
    AnswerKind.DATE: "date",
    AnswerKind.NUMBER: "number",
    AnswerKind.ORGANISATION: "organisation",
}


#: The kinds a *marked* phrase may be, by the kind asked: narrower than the scorer's feature
#: (``sentence_features.accepted_kinds``, where an organisation may answer "where"), because a marked
#: phrase is shown as the answer. "Where are conversations stored?" must not mark the acronym "JSON"
#: (typed an organisation) in "... stored in Redis ... holds the Turn JSON". Names stay interchangeable
#: between person and organisation: the rules often cannot tell a company from a person.
_MARKABLE: dict[AnswerKind, frozenset[AnswerKind]] = {
    AnswerKind.PERSON: frozenset({AnswerKind.PERSON, AnswerKind.ORGANISATION}),
    AnswerKind.ORGANISATION: frozenset({AnswerKind.ORGANISATION, AnswerKind.PERSON}),
    AnswerKind.PLACE: frozenset({AnswerKind.PLACE}),
    AnswerKind.DATE: frozenset({AnswerKind.DATE}),
    AnswerKind.NUMBER: frozenset({AnswerKind.NUMBER}),
}


def best_span(asked: AskedQuestion, sentence: str, language: str | None) -> ValueSpan | None:
    """The span of ``sentence`` that best answers ``asked`` (module docstring), or None."""
    markable = _MARKABLE.get(asked.wanted, frozenset())
    candidates = [s for s in answering_spans(asked, value_spans(sentence, language)) if s.kind in markable]
    if not candidates:
        return None
    wanted = set(asked.words)
    anchors = [
        match.start() for match in _WORD.finditer(sentence)
        if wanted & set(content_words(match.group(), language))
    ]

    def distance(span: ValueSpan) -> tuple[int, int]:
        outside = [a for a in anchors if not span.start <= a < span.end]
        nearest = min((span.start - a if a < span.start else a - span.end for a in outside), default=len(sentence))
        return nearest, span.start

    return min(candidates, key=distance)


@dataclass(frozen=True, slots=True)
class MarkedSpan:
    """The best sentence and the span in it that answers; a citation number is given once it is cited."""

    unit: EvidenceUnit
    span: ValueSpan

    def cited(self, numbers: Mapping[str, int]) -> AnswerSpan | None:
        """The wire's :class:`AnswerSpan` if the sentence is cited (``numbers``: unit id → citation
        number, ``CitedAnswer.numbers``), else None."""
        citation = numbers.get(self.unit.id)
        if citation is None:
            return None
        span = self.span
        return AnswerSpan(citation=citation, start=span.start, end=span.end, text=span.text, kind=_WIRE_KIND[span.kind])


def answer_span(query: str, language: str | None, unit: EvidenceUnit) -> MarkedSpan | None:
    """The span of ``unit`` (the best sentence, read in its passage's language, else ``language``,
    the question's) that answers ``query``, or None (module docstring)."""
    span = best_span(AskedQuestion.of(query, language), unit.text, unit.passage.language or language)
    if span is None or span.kind not in _WIRE_KIND:
        return None
    return MarkedSpan(unit, span)
