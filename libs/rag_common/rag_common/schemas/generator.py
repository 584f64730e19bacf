"""The generator's request and response."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from rag_common.schemas.wire import JsonInt, LanguageCode, MAX_MESSAGE_CHARS, MAX_TOP_K, WireModel
from rag_common.schemas.passages import Citation, HistoryTurn, Passage


#: How an answer was written: ``generative`` (the LLM's claims, each checked against the sentences
#: it cites) or ``extractive`` (the best sentences of the sources, verbatim; no LLM).
AnswerMode = Literal["generative", "extractive"]


class GenerateRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    passages: list[Passage] = Field(max_length=MAX_TOP_K)
    history: list[HistoryTurn] = Field(default_factory=list)
    #: The query's embedding from the retriever (same model as the passages' ``embedding``); with
    #: both, the generator embeds only the sentences it scores.
    query_embedding: list[float] | None = None
    #: The question's language (``rag_common.languages.identify_query``): the answer, the abstention and
    #: the content-word rules are in it. None: the generator identifies it.
    language: LanguageCode | None = None


#: What kind of value an answer span or a conflict is about (``rag_generator.answer_kinds.AnswerKind``
#: less the kinds a phrase cannot be); ``other``: sources differ in a value no rule could type.
ValueKind = Literal["person", "place", "date", "number", "organisation", "other"]


class AnswerSpan(WireModel):
    """The phrase that answers, inside one cited sentence: ``quote[start:end] == text`` of the citation
    numbered ``citation``. The sentence stays the unit of citation; the span only marks it."""

    citation: JsonInt = Field(ge=1, description="The ``Citation.id`` whose ``quote`` holds the phrase.")
    start: JsonInt = Field(ge=0, description="Offset of the phrase in the citation's ``quote``.")
    end: JsonInt = Field(ge=1, description="End offset (exclusive) of the phrase in the citation's ``quote``.")
    text: str = Field(min_length=1)
    kind: ValueKind

    @model_validator(mode="after")
    def _ordered(self) -> AnswerSpan:
        if self.end - self.start != len(self.text):
            raise ValueError("answer_span: end - start must be the length of text")
        return self


class ConflictValue(WireModel):
    """One side of a disagreement: a value as a source words it, and the citations that state it."""

    value: str = Field(min_length=1)
    citations: list[JsonInt] = Field(min_length=1)


class Conflict(WireModel):
    """The sources give different values of what the question asks (e.g. two owners, two years)."""

    kind: ValueKind
    values: list[ConflictValue] = Field(min_length=2)


class GenerateResponse(WireModel):
    answer: str
    citations: list[Citation]
    abstained: bool
    #: Why the generator abstained, if it did (``no_passages``, ``not_answerable``, ``no_supported_claim``, ...).
    abstain_reason: str = ""
    #: Which mode wrote the answer; None when it abstained before writing one.
    mode: AnswerMode | None = None
    #: The answerability gate's probability that the sources answer the question; None without a gate.
    answerability: float | None = None
    #: Share of the model's claims that passed the support check; None when no model claims were made.
    citation_precision: float | None = None
    #: Claims of the model dropped because their cited sentences do not support them.
    claims_dropped: JsonInt = 0
    #: The model's first reply was invalid JSON and the one repair attempt produced this answer.
    repaired: bool = False
    #: What went wrong without losing the answer, e.g. the LLM timed out and the extractive answer stood in.
    degraded: list[str] = Field(default_factory=list)
    #: The phrase of a cited sentence that answers, when one of the wanted kind was found.
    answer_span: AnswerSpan | None = None
    #: Set when the cited sources disagree on the answer; the answer text then names every side.
    conflict: Conflict | None = None
