"""Wire schemas shared by every service.

Every request and response that crosses a process boundary is one of these models, so a
change to the contract between two services is a change in exactly one file.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

SearchMode = Literal["dense", "bm25", "hybrid"]
#: What a message asks for: ``rag`` needs the documents; ``chitchat`` (greeting, thanks) and ``meta``
#: (about the conversation itself) are answered without retrieval; ``out_of_scope`` is declined.
Intent = Literal["rag", "chitchat", "meta", "out_of_scope"]

#: Upper bound on a user message, in characters (about 2k tokens). Longer input is a 422.
MAX_MESSAGE_CHARS = 8000
#: Upper bound on the passages an answer is written from (``ChatRequest.top_k``, generator input).
MAX_TOP_K = 50
#: Upper bound on the candidates one search or rerank returns (``SearchRequest``/``RerankRequest.top_k``).
MAX_SEARCH_TOP_K = 200


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
    #: The chunk's unit-length embedding, only when the retriever was asked for it
    #: (``SearchRequest.include_embeddings``): the reranker's diffusion and diversity stages need
    #: it, and sending it saves the reranker re-embedding every candidate. Dropped before generation.
    embedding: list[float] | None = None


class Citation(WireModel):
    """One sentence of a source the answer relies on. ``id`` is the ``[n]`` marker in the answer text.

    ``quote`` is the cited sentence in the source's own words, and ``start``/``end`` are its
    character offsets in the chunk's text (``Passage.text[start:end] == quote``), so a client can
    highlight exactly what was cited.
    """

    id: int
    source: str
    title: str
    page: int | None = None
    chunk_id: str
    score: float
    quote: str = ""
    start: int | None = Field(default=None, ge=0)
    end: int | None = Field(default=None, ge=0)
    section_path: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- conversation


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


class HistoryTurn(WireModel):
    """The part of a turn the refiner and generator need: what was asked and answered."""

    question: str
    answer: str


# --------------------------------------------------------------------------- refiner


class RefineRequest(WireModel):
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    history: list[HistoryTurn] = Field(default_factory=list)
    #: Also write a hypothetical answer (HyDE) to search with.
    hyde: bool = False


class RefineResponse(WireModel):
    query: str
    rewritten: bool
    #: ``passthrough`` (first message, or a non-rag intent: nothing to rewrite), ``llm`` (model rewrite accepted), ``context_append``
    #: (model rewrite rejected by the guard, context appended verbatim), ``fallback`` (model
    #: failed or timed out: raw message used).
    method: Literal["passthrough", "llm", "context_append", "fallback"]
    detail: str = ""
    intent: Intent = "rag"
    #: How the intent was decided: cheap ``rules`` / ``embedding`` classifier first, the ``llm`` only
    #: when those are unsure, ``fallback`` when the LLM was needed but failed (then ``rag``).
    intent_method: Literal["rules", "embedding", "llm", "fallback"] = "rules"
    #: The hypothetical answer to search with, when HyDE was asked for and succeeded.
    hyde_query: str | None = None


# --------------------------------------------------------------------------- retriever


class SearchRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    top_k: int = Field(default=10, ge=1, le=MAX_SEARCH_TOP_K)
    mode: SearchMode = "hybrid"
    filters: dict[str, str | list[str]] = Field(default_factory=dict)
    #: Return each passage's stored embedding and the query's embedding (for the reranker).
    include_embeddings: bool = False


class SearchResponse(WireModel):
    passages: list[Passage]
    mode: SearchMode
    timings_ms: dict[str, float] = Field(default_factory=dict)
    #: The query's unit-length embedding when ``include_embeddings`` was set (in bm25 mode too: the
    #: query is then embedded for this purpose alone); ``None`` otherwise.
    query_embedding: list[float] | None = None


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


class CrossEncoderSpec(WireModel):
    """Score every (query, passage) pair with the configured cross-encoder; skipped if none is set."""

    name: Literal["cross_encoder"] = "cross_encoder"


class DiffusionSpec(WireModel):
    """Personalised PageRank over the candidates' cosine-similarity graph, seeded by the current scores."""

    name: Literal["diffusion"] = "diffusion"
    alpha: float | None = Field(default=None, ge=0.0, lt=1.0, description="Damping; None = service default.")
    top_k_edges: int | None = Field(default=None, ge=1, description="Keep only the k strongest edges per node.")


class GmmrSpec(WireModel):
    """Geometric MMR (DF-RAG): relevant and diverse ``top_k``; ``mmr_lambda="adaptive"`` lets an LLM pick λ."""

    name: Literal["gmmr"] = "gmmr"
    mmr_lambda: float | Literal["adaptive"] | None = Field(
        default=None, description="1 = relevance only, 0 = diversity only; None = service default."
    )
    #: The relevance term: ``cosine`` of query and passage embeddings (DF-RAG as published), or the
    #: incoming ``scores`` (retriever's or cross-encoder's) min-max scaled to [0, 1], so gMMR keeps
    #: the upstream ranking's judgement of relevance; None = service default.
    relevance: Literal["cosine", "scores"] | None = None

    @field_validator("mmr_lambda")
    @classmethod
    def lambda_in_unit_interval(cls, value: float | str | None) -> float | str | None:
        if isinstance(value, float) and not 0.0 <= value <= 1.0:
            raise ValueError("mmr_lambda must be in [0, 1] or 'adaptive'")
        return value


RerankStageSpec = Annotated[CrossEncoderSpec | DiffusionSpec | GmmrSpec, Field(discriminator="name")]
RerankStageName = Literal["cross_encoder", "diffusion", "gmmr"]


class RerankRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    passages: list[Passage] = Field(max_length=500)
    top_k: int = Field(default=5, ge=1, le=MAX_SEARCH_TOP_K)
    #: The chain to run, in order; ``None`` runs the service's configured default chain.
    stages: list[RerankStageSpec] | None = Field(default=None, max_length=8)
    #: The query's embedding in the passages' embedding space (the retriever's ``query_embedding``).
    query_embedding: list[float] | None = None


class StageReport(WireModel):
    """What one stage of the chain did: ``ran``, ``skipped`` (with why), or ``failed`` (order kept)."""

    name: str
    status: Literal["ran", "skipped", "failed"]
    reason: str = ""
    ms: float = 0.0
    #: Stage-specific facts, e.g. diffusion's iterations or the λ gMMR chose and why.
    detail: dict[str, Any] = Field(default_factory=dict)


class RerankResponse(WireModel):
    passages: list[Passage]
    #: The stages that ran, in order, e.g. ``["cross_encoder", "diffusion"]``.
    stages: list[str]
    timings_ms: dict[str, float] = Field(default_factory=dict)
    #: One report per requested stage, including skipped and failed ones.
    reports: list[StageReport] = Field(default_factory=list)
    #: True when a stage failed and was bypassed (the order before it was kept).
    degraded: bool = False


# --------------------------------------------------------------------------- generator


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
    claims_dropped: int = 0
    #: The model's first reply was invalid JSON and the one repair attempt produced this answer.
    repaired: bool = False
    #: What went wrong without losing the answer, e.g. the LLM timed out and the extractive answer stood in.
    degraded: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- gateway


class ChatRequest(WireModel):
    conversation_id: str | None = Field(default=None, min_length=1, max_length=128)
    message: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    top_k: int | None = Field(default=None, ge=1, le=MAX_TOP_K)
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
    claims_dropped: int = 0


class ConversationOut(WireModel):
    conversation_id: str
    turns: list[Turn]


class ErrorBody(WireModel):
    """Body of every 4xx/5xx the services return."""

    error: str
    detail: Any = None
    stage: str | None = None
