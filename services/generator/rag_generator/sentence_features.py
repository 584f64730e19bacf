"""What the sentence scorer reads of each candidate sentence (issue 32, item 1).

Relevance, as before: ``cosine`` (query vs the sentence with its passage's title and section path),
``cosine_gap`` (the best candidate's cosine minus this one: a question's cosines share a scale that
differs from question to question), ``passage_cosine`` (query vs the sentence's passage), ``lexical``
(share of the question's content words in the sentence and its context), ``rank_prior`` (``1 / rank``
of the passage) and ``position_prior`` (``1 / index`` of the sentence in it).

Whether it answers (``rag_generator.answer_kinds``, ``rag_generator.sentence_roles``), in the
sentence's language (its passage's, else the question's): ``kind_known`` (the question wants a
person, place, date, number or organisation), ``has_kind`` (the sentence holds a value of that kind),
``has_new_kind`` (one that the question does not already name: "Who won Wimbledon in 2019?" is not
answered by "2019"), ``question`` / ``heading`` / ``navigation`` (the sentence's role: a quoted
question, a title alone, "Check out the medal count."), ``contradicts`` (it names another year or
edition than the question asks for) and ``log_words``.

No weights here: :mod:`rag_generator.sentence_scorer` fits them on labelled sentences.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import astuple, dataclass, fields

import numpy as np

from rag_common.content_words import content_words, coverage
from rag_common.sentence_vectors import word_count
from rag_generator.answer_kinds import AnswerKind, Constraints, ValueSpan, contradicts, question_constraints
from rag_generator.answer_kinds import value_spans, wanted_kind
from rag_generator.answer_kinds.folding import fold_key
from rag_generator.evidence import EvidenceUnit
from rag_generator.sentence_roles import SentenceRole, unit_role

__all__ = ["FEATURE_NAMES", "AskedQuestion", "SentenceFeatures", "accepted_kinds", "answering_spans", "sentence_features"]

#: The kinds a value span can answer; a "who" question is answered by a person or an organisation
#: alike ("Who acquired WhatsApp?" → Facebook), a "where" question by a place or an organisation
#: ("the University of Bucharest").
_ACCEPTED: dict[AnswerKind, frozenset[AnswerKind]] = {
    AnswerKind.PERSON: frozenset({AnswerKind.PERSON, AnswerKind.ORGANISATION}),
    AnswerKind.ORGANISATION: frozenset({AnswerKind.ORGANISATION, AnswerKind.PERSON}),
    AnswerKind.PLACE: frozenset({AnswerKind.PLACE, AnswerKind.ORGANISATION}),
    AnswerKind.DATE: frozenset({AnswerKind.DATE}),
    AnswerKind.NUMBER: frozenset({AnswerKind.NUMBER}),
}


_NOT_WORD = re.compile(r"\W+")


def _words_key(text: str) -> str:
    """Folded words between single spaces, padded: ``" super bowl 50 "``, for whole-word containment."""
    return f" {_NOT_WORD.sub(' ', fold_key(text)).strip()} "


def accepted_kinds(wanted: AnswerKind) -> frozenset[AnswerKind]:
    """The span kinds that answer a question wanting ``wanted`` (empty: the rules cannot type its answer)."""
    return _ACCEPTED.get(wanted, frozenset())


@dataclass(frozen=True, slots=True)
class AskedQuestion:
    """What is read once per question: its words, the kind it wants, its constraints, its own values."""

    text: str
    language: str | None
    words: tuple[str, ...]
    wanted: AnswerKind
    constraints: Constraints
    #: Normalised values and folded texts of the question's own spans, and the folded question.
    named: frozenset[str]
    folded: str

    @classmethod
    def of(cls, question: str, language: str | None) -> AskedQuestion:
        spans = value_spans(question, language)
        named = frozenset({s.normalised for s in spans} | {fold_key(s.text) for s in spans})
        return cls(
            question, language, tuple(content_words(question, language)), wanted_kind(question, language),
            question_constraints(question, language), named, _words_key(question),
        )

    def names(self, span: ValueSpan) -> bool:
        """Whether the question already names ``span``'s value (then it is not the answer)."""
        key = _words_key(span.text)
        return span.normalised in self.named or fold_key(span.text) in self.named or (key.strip() != "" and key in self.folded)


def answering_spans(asked: AskedQuestion, spans: Sequence[ValueSpan]) -> list[ValueSpan]:
    """The spans of the wanted kind that the question does not already name."""
    kinds = accepted_kinds(asked.wanted)
    return [span for span in spans if span.kind in kinds and not asked.names(span)]


@dataclass(frozen=True, slots=True)
class SentenceFeatures:
    """One candidate's features; field order is :data:`FEATURE_NAMES` and the order of ``vector``."""

    cosine: float
    cosine_gap: float
    passage_cosine: float
    lexical: float
    rank_prior: float
    position_prior: float
    kind_known: float
    has_kind: float
    has_new_kind: float
    question: float
    heading: float
    navigation: float
    contradicts: float
    log_words: float

    def vector(self) -> np.ndarray:
        return np.asarray(astuple(self), dtype=np.float64)

    def as_dict(self) -> dict[str, float]:
        return dict(zip(FEATURE_NAMES, astuple(self)))


FEATURE_NAMES: tuple[str, ...] = tuple(f.name for f in fields(SentenceFeatures))


def sentence_features(
    asked: AskedQuestion,
    unit: EvidenceUnit,
    *,
    context: str,
    cosine: float,
    best_cosine: float,
    passage_cosine: float,
) -> SentenceFeatures:
    """The features of ``unit`` for ``asked``; ``context``: its ``"Title > Section: "`` prefix."""
    language = unit.passage.language or asked.language
    kinds = accepted_kinds(asked.wanted)
    spans = value_spans(unit.text, language) if kinds or asked.constraints else []
    typed = [span for span in spans if span.kind in kinds]
    role = unit_role(unit, asked.language)
    return SentenceFeatures(
        cosine=cosine,
        cosine_gap=best_cosine - cosine,
        passage_cosine=passage_cosine,
        lexical=coverage(asked.words, content_words(context + unit.text, language)),
        rank_prior=1.0 / unit.source,
        position_prior=1.0 / unit.index,
        kind_known=float(bool(kinds)),
        has_kind=float(bool(typed)),
        has_new_kind=float(bool(answering_spans(asked, typed))),
        question=float(role is SentenceRole.QUESTION),
        heading=float(role is SentenceRole.HEADING),
        navigation=float(role is SentenceRole.NAVIGATION),
        contradicts=float(contradicts(spans, asked.constraints)),
        log_words=math.log(max(1, word_count(unit.text))),
    )
