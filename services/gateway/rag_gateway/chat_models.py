"""The gateway's own wire models: the chat request and response, stored turns and conversations,
feedback, and the sources a conversation cited.

No other service sends or reads these (the wire contract between the services stays in
``rag_common.schemas``); they are the gateway's public API, and its OpenAPI document names them.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from rag_common.schemas import (
    MAX_MESSAGE_CHARS,
    MAX_TOP_K,
    NOT_BLANK,
    AnswerMode,
    AnswerSpan,
    Citation,
    Conflict,
    ConversationId,
    Intent,
    JsonInt,
    LanguageCode,
    WireModel,
)

# --------------------------------------------------------------------------- conversation

#: A thumbs up or down on one answer.
Rating = Literal["up", "down"]
#: Upper bound on a feedback comment, in characters.
MAX_FEEDBACK_COMMENT_CHARS = 2000


class FeedbackRequest(WireModel):
    """Body of ``POST /v1/conversations/{conversation_id}/turns/{turn_index}/feedback``."""

    rating: Rating
    comment: str | None = Field(default=None, max_length=MAX_FEEDBACK_COMMENT_CHARS)


class Feedback(WireModel):
    """The user's verdict on a turn's answer, stored with the turn (the latest one counts)."""

    rating: Rating
    comment: str | None = None
    #: When it was given, Unix seconds.
    created_at: float


class Turn(WireModel):
    """One stored exchange of a conversation: the user's own words, the standalone query that was
    searched, the answer and the chunks it cites (``citations[].chunk_id``)."""

    message: str
    refined_query: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    abstained: bool = False
    intent: Intent = "rag"
    created_at: float
    #: Names the turn in the query log (its record and any feedback record share it); None on turns
    #: stored before it existed.
    turn_id: str | None = None
    #: Thumbs up/down on the answer, if the user gave one.
    feedback: Feedback | None = None
    #: The question's language as the gateway named it (the next turn's fallback when it cannot be
    #: told); None when it could not be, and on turns stored before languages were named.
    language: LanguageCode | None = None
    #: The phrase of a cited sentence that answers (``answer_span.citation`` numbers one of ``citations``).
    answer_span: AnswerSpan | None = None
    #: The cited sources' disagreement, when they disagree (the answer names every side).
    conflict: Conflict | None = None


class FeedbackOut(WireModel):
    """Answer of the feedback route: which turn now holds which feedback."""

    conversation_id: str
    turn_index: JsonInt
    turn_id: str | None = None
    feedback: Feedback


# --------------------------------------------------------------------------- chat


class ChatRequest(WireModel):
    conversation_id: ConversationId | None = None
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, json_schema_extra=NOT_BLANK)
    top_k: JsonInt | None = Field(default=None, ge=1, le=MAX_TOP_K)
    #: Search with a hypothetical answer (HyDE) instead of the query; ``None`` = the gateway default.
    hyde: bool | None = None

    @field_validator("message")
    @classmethod
    def message_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("message is blank")
        return value


class ChatResponse(WireModel):
    conversation_id: str
    answer: str
    citations: list[Citation]
    refined_query: str
    abstained: bool
    timings_ms: dict[str, float]
    #: Stages that failed and were bypassed without losing the request, e.g. ``["rerank: ..."]``.
    degraded: list[str] = Field(default_factory=list)
    intent: Intent = "rag"
    citation_precision: float | None = None
    #: Which mode wrote the answer (``generative`` or ``extractive``); None for canned replies and abstentions.
    answer_mode: AnswerMode | None = None
    #: The answerability gate's probability that the documents answer the question.
    answerability: float | None = None
    #: Claims of the model dropped by the support check.
    claims_dropped: JsonInt = 0
    #: Why the answer is an abstention, when it is (``not_answerable``, ``no_passages``,
    #: ``no_supported_claim``, ``out_of_scope``, ...); empty otherwise.
    abstain_reason: str = ""
    #: The question's language (ISO 639-1) as the gateway named it, or its conversation's when the
    #: message alone could not tell; None when neither could (the service's texts are then in
    #: ``RAG_DEFAULT_LANGUAGE``).
    language: LanguageCode | None = None
    #: The phrase of a cited sentence that answers: ``citations[id == answer_span.citation].quote[start:end]``;
    #: None when the generator marked none (canned replies, abstentions, generative answers without one).
    answer_span: AnswerSpan | None = None
    #: Set when the cited sources disagree on the answer: each value with the citations that state it.
    conflict: Conflict | None = None


class ConversationOut(WireModel):
    conversation_id: str
    turns: list[Turn]


class ConversationSummary(WireModel):
    """One entry of the caller's conversation list."""

    conversation_id: str
    title: str = Field(description="The conversation's first question (cut to 80 characters).")
    turns: JsonInt = Field(description="Stored turns.")
    updated_at: float = Field(description="Time of the last turn, seconds since the epoch.")


class ConversationList(WireModel):
    """The caller's live conversations, the most recent first (at most 100)."""

    conversations: list[ConversationSummary]


class SourceChunk(WireModel):
    """A chunk as a turn of a conversation cited it: ``text[citation.start:citation.end]`` is the
    citation's quote."""

    chunk_id: str
    doc_id: str
    title: str = ""
    source: str = ""
    page: JsonInt | None = None
    section_path: list[str] = Field(default_factory=list)
    text: str
