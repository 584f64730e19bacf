"""Wire schemas shared by every service.

Every request and response that crosses a process boundary is one of these models, so a
change to the contract between two services is a change in exactly one file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SearchMode = Literal["dense", "bm25", "hybrid"]

#: Upper bound on a user message, in characters (about 2k tokens). Longer input is a 422.
MAX_MESSAGE_CHARS = 8000
MAX_TOP_K = 50


class WireModel(BaseModel):
    """Base for wire models: unknown fields are rejected so typos surface as 422s."""

    model_config = ConfigDict(extra="forbid")


# --------------------------------------------------------------------------- passages


class Passage(WireModel):
    """One retrievable chunk as it travels between retriever, reranker and generator."""

    chunk_id: str
    doc_id: str
    text: str
    title: str = ""
    source: str = ""
    page: int | None = None
    section_path: list[str] = Field(default_factory=list)
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)


class Citation(WireModel):
    """A source the answer relies on. ``id`` is the ``[n]`` marker used in the answer text."""

    id: int
    source: str
    title: str
    page: int | None = None
    chunk_id: str
    score: float
    quote: str = ""


# --------------------------------------------------------------------------- conversation


class Turn(WireModel):
    """One stored exchange of a conversation."""

    message: str
    refined_query: str
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    abstained: bool = False
    created_at: float


class HistoryTurn(WireModel):
    """The part of a turn the refiner and generator need: what was asked and answered."""

    question: str
    answer: str


# --------------------------------------------------------------------------- refiner


class RefineRequest(WireModel):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    history: list[HistoryTurn] = Field(default_factory=list)


class RefineResponse(WireModel):
    query: str
    rewritten: bool
    #: ``passthrough`` (first message), ``llm`` (model rewrite accepted), ``context_append``
    #: (model rewrite rejected by the guard, context appended verbatim), ``fallback`` (model
    #: failed: raw message used).
    method: Literal["passthrough", "llm", "context_append", "fallback"]
    detail: str = ""


# --------------------------------------------------------------------------- retriever


class SearchRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    top_k: int = Field(default=10, ge=1, le=200)
    mode: SearchMode = "hybrid"
    filters: dict[str, str | list[str]] = Field(default_factory=dict)


class SearchResponse(WireModel):
    passages: list[Passage]
    mode: SearchMode
    timings_ms: dict[str, float] = Field(default_factory=dict)


class DocumentIn(WireModel):
    """A document given as JSON. ``id`` defaults to a hash of source and text."""

    id: str | None = Field(default=None, max_length=512)
    text: str
    title: str = ""
    source: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("text")
    @classmethod
    def text_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("document text is empty")
        return value


class IngestRequest(WireModel):
    documents: list[DocumentIn] = Field(min_length=1, max_length=1000)


class IngestFailure(WireModel):
    name: str
    reason: str


class IngestResponse(WireModel):
    documents: int
    chunks: int
    skipped: int = 0
    failed: list[IngestFailure] = Field(default_factory=list)
    doc_ids: list[str] = Field(default_factory=list)


class DocumentInfo(WireModel):
    doc_id: str
    title: str
    source: str
    chunks: int


class DocumentList(WireModel):
    documents: list[DocumentInfo]


# --------------------------------------------------------------------------- reranker


class RerankRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    passages: list[Passage] = Field(max_length=500)
    top_k: int = Field(default=5, ge=1, le=200)


class RerankResponse(WireModel):
    passages: list[Passage]
    #: Which scoring stages ran, e.g. ``["bi_encoder"]`` or ``["cross_encoder"]``.
    stages: list[str]
    timings_ms: dict[str, float] = Field(default_factory=dict)


# --------------------------------------------------------------------------- generator


class GenerateRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    passages: list[Passage] = Field(max_length=50)
    history: list[HistoryTurn] = Field(default_factory=list)


class GenerateResponse(WireModel):
    answer: str
    citations: list[Citation]
    abstained: bool
    #: Why the generator abstained, if it did (``no_passages``, ``no_valid_citation``, ...).
    abstain_reason: str = ""


# --------------------------------------------------------------------------- gateway


class ChatRequest(WireModel):
    conversation_id: str | None = Field(default=None, min_length=1, max_length=128)
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K)

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


class ConversationOut(WireModel):
    conversation_id: str
    turns: list[Turn]


class ErrorBody(WireModel):
    """Body of every 4xx/5xx the services return."""

    error: str
    detail: Any = None
    stage: str | None = None
