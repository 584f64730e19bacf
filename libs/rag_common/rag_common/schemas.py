"""Wire schemas shared by every service.

Every request and response that crosses a process boundary between two services is one of these
models, so a change to the contract between two services is a change in exactly one file. The
gateway's public API alone (chat, conversations, feedback) is the gateway's: ``rag_gateway.chat_models``.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)

SearchMode = Literal["dense", "bm25", "hybrid"]
#: What a message asks for: ``rag`` needs the documents; ``chitchat`` (greeting, thanks) and ``meta``
#: (about the conversation itself) are answered without retrieval; ``out_of_scope`` is declined.
Intent = Literal["rag", "chitchat", "meta", "out_of_scope"]

def _supported_language(code: str) -> str:
    from rag_common.languages.registry import language

    return language(code).code  # UnsupportedLanguageError (a ValueError): a 422 naming the choices


#: An ISO 639-1 code of a language the product analyses (``rag_common.languages.LANGUAGES``).
LanguageCode = Annotated[str, AfterValidator(_supported_language)]

#: Upper bound on a user message, in characters (about 2k tokens). Longer input is a 422.
MAX_MESSAGE_CHARS = 8000
#: Upper bound on the passages an answer is written from (``ChatRequest.top_k``, generator input).
MAX_TOP_K = 50
#: Upper bound on the candidates one search or rerank returns (``SearchRequest``/``RerankRequest.top_k``).
MAX_SEARCH_TOP_K = 200

#: Unicode's control (Cc) and format (Cf) characters, as ranges of code points (Unicode 14.0, the
#: ``unicodedata`` of Python 3.11; tests/common/test_document_ids.py checks the table against
#: ``unicodedata.category`` on every code point). Format characters are invisible: zero-width
#: spaces and joiners, bidirectional overrides (U+202E shows ``exe.txt`` for ``txt.exe``), the BOM.
CONTROL_OR_FORMAT_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)


def _code_point(value: int) -> str:
    # \uXXXX reads the same in Python's re and ECMA-262; a code point past the BMP is written as
    # itself (JSON Schema patterns are read with ECMA's "u" flag, where it is one character).
    return f"\\u{value:04x}" if value <= 0xFFFF else chr(value)


_CONTROL_OR_FORMAT_CLASS = "".join(
    _code_point(low) if low == high else f"{_code_point(low)}-{_code_point(high)}"
    for low, high in CONTROL_OR_FORMAT_RANGES
)
_CONTROL_OR_FORMAT_CATEGORIES = frozenset({"Cc", "Cf"})

#: A document id: 1-512 characters, no control or format character (Unicode Cc, Cf: they cannot
#: travel in a URL path or a log line intact, or they hide what the id says), not blank, and not
#: ``.`` or ``..`` (a URL path would resolve them). So file names (spaces, accents, ``#``, ``?``,
#: ``/``) are ids as they are; wherever an id goes into a URL it is percent-encoded as one path segment.
DOCUMENT_ID_PATTERN = (
    f"^[^{_CONTROL_OR_FORMAT_CLASS}]*[^\\s{_CONTROL_OR_FORMAT_CLASS}][^{_CONTROL_OR_FORMAT_CLASS}]*$"
)
MAX_DOCUMENT_ID_CHARS = 512
#: A conversation id as the gateway issues them (``uuid4().hex``), with room for other issuers.
CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
_NOT_SPACE = re.compile(r"\S")


def control_or_format_character(value: str) -> str | None:
    """The first control or format character (Unicode category Cc or Cf) in ``value``, if any."""
    if value.isprintable():  # the usual case, in C: printable text holds neither
        return None
    return next((char for char in value if unicodedata.category(char) in _CONTROL_OR_FORMAT_CATEGORIES), None)


def check_document_id(value: str) -> str:
    """``value`` if it is a valid document id (see ``DOCUMENT_ID_PATTERN``), else ValueError saying why."""
    # The length first: the character scan below then reads at most 512 characters.
    if len(value) > MAX_DOCUMENT_ID_CHARS:
        raise ValueError(f"document id is longer than {MAX_DOCUMENT_ID_CHARS} characters")
    # Control and format characters before blankness: a lone tab or CR is "blank" too, but the
    # control character is the reason worth naming.
    if (char := control_or_format_character(value)) is not None:
        kind = "control" if unicodedata.category(char) == "Cc" else "format"
        raise ValueError(f"document id contains the {kind} character U+{ord(char):04X}")
    if not _NOT_SPACE.search(value):
        raise ValueError("document id is blank")
    if value in {".", ".."}:
        raise ValueError("'.' and '..' are not document ids")
    return value


DocumentId = Annotated[
    str,
    AfterValidator(check_document_id),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_DOCUMENT_ID_CHARS,
            "pattern": DOCUMENT_ID_PATTERN,
            "not": {"enum": [".", ".."]},
        }
    ),
]
ConversationId = Annotated[str, StringConstraints(pattern=CONVERSATION_ID_PATTERN)]


def _integral_number(value: Any) -> Any:
    # JSON Schema's "integer" is any number with no fraction, so 5.0 is one; strict mode alone would refuse it.
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: An integer as JSON Schema means it: 5 and 5.0, never true or "5".
JsonInt = Annotated[int, BeforeValidator(_integral_number)]

#: The fields a search may filter on (``SearchRequest.filters``): keyword fields of every chunk.
SearchFilterField = Literal["doc_id", "source", "tenant", "content_type"]
SEARCH_FILTER_FIELDS: tuple[str, ...] = get_args(SearchFilterField)
#: JSON Schema of a string with some non-space character in it (pattern matching is a search).
NOT_BLANK = {"pattern": r"\S"}


class WireModel(BaseModel):
    """Base for wire models: unknown fields are rejected so typos surface as 422s, and JSON types are
    taken as the schema says (strict: ``0`` is not ``false``, ``false`` is not ``0.0``, ``"5"`` is not ``5``)."""

    model_config = ConfigDict(extra="forbid", strict=True)


# --------------------------------------------------------------------------- passages


#: Upper bound on ``SentenceVectors.dim`` (a sanity bound: today's embedders have 384-1024).
MAX_VECTOR_DIM = 4096
#: Upper bound on the sentences one chunk carries vectors for.
MAX_SENTENCE_VECTORS = 512


class SentenceVectors(WireModel):
    """The embeddings of a chunk's scorable sentences, computed once at ingestion
    (``RETRIEVER_SENTENCE_VECTORS``; the rule is :mod:`rag_common.sentence_vectors`).

    Row ``i`` stands for the string ``context + text[start_i:end_i]``, the one the extractive
    answerer scores for that sentence. ``method`` says how it was made: ``"embedded"``, that string's
    own ``encode_documents`` vector (a consumer gets the very vector it would compute); ``"pooled"``,
    the mean of the sentence's (and the chunk's context lines') token states in the chunk's own
    encoder pass (:mod:`rag_common.embedders.span_pooling`: no second pass at ingestion, a vector
    in context, not the same numbers). ``vectors`` is the rows' float32 values, little-endian,
    row-major, base64: a quarter of the JSON-number size and exact.
    """

    #: The prefix of every sentence's string (``"Title > Section: "`` or ``""``).
    context: str = Field(max_length=MAX_MESSAGE_CHARS)
    #: How the rows were computed (see above); stored before it existed means ``"embedded"``.
    method: Literal["embedded", "pooled"] = "embedded"
    #: ``[start, end]`` of each sentence in the passage's ``text``, in text order.
    spans: list[Annotated[list[JsonInt], Field(min_length=2, max_length=2)]] = Field(max_length=MAX_SENTENCE_VECTORS)
    dim: JsonInt = Field(ge=1, le=MAX_VECTOR_DIM)
    #: base64 of ``len(spans) * dim`` little-endian float32 values.
    vectors: str

    @model_validator(mode="after")
    def _consistent(self) -> SentenceVectors:
        previous = 0
        for start, end in self.spans:
            if not previous <= start < end:
                raise ValueError("sentence spans must be non-empty, non-overlapping and in text order")
            previous = end
        try:
            raw = base64.b64decode(self.vectors, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("sentence vectors are not valid base64") from None
        if len(raw) != 4 * self.dim * len(self.spans):
            raise ValueError(f"sentence vectors hold {len(raw)} bytes, expected {4 * self.dim * len(self.spans)}")
        return self


class Passage(WireModel):
    """One retrievable chunk as it travels between retriever, reranker and generator."""

    chunk_id: str
    doc_id: str
    text: str
    title: str = ""
    source: str = ""
    page: JsonInt | None = None
    section_path: list[str] = Field(default_factory=list)
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: The chunk's unit-length embedding, only when the retriever was asked for it
    #: (``SearchRequest.include_embeddings``): the reranker's diffusion and diversity stages need
    #: it, and sending it saves the reranker re-embedding every candidate. Dropped before generation.
    embedding: list[float] | None = None
    #: The chunk's stored sentence vectors, only when the retriever was asked for them
    #: (``SearchRequest.include_sentence_vectors``) and has them: the generator then embeds only the
    #: question. Absent for chunks indexed without them (the generator embeds those sentences).
    sentence_vectors: SentenceVectors | None = None
    #: The chunk's language as ingestion named it (declared or identified); None: analysed neutrally.
    language: LanguageCode | None = None

    @model_validator(mode="after")
    def _spans_in_text(self) -> Passage:
        if self.sentence_vectors is not None and self.sentence_vectors.spans:
            if self.sentence_vectors.spans[-1][1] > len(self.text):
                raise ValueError("sentence_vectors.spans reach past the end of the passage text")
        return self


class Citation(WireModel):
    """One sentence of a source the answer relies on. ``id`` is the ``[n]`` marker in the answer text.

    ``quote`` is the cited sentence in the source's own words, and ``start``/``end`` are its
    character offsets in the chunk's text (``Passage.text[start:end] == quote``), so a client can
    highlight exactly what was cited.
    """

    id: JsonInt
    source: str
    title: str
    page: JsonInt | None = None
    chunk_id: str
    score: float
    quote: str = ""
    start: JsonInt | None = Field(default=None, ge=0)
    end: JsonInt | None = Field(default=None, ge=0)
    section_path: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- conversation


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
    #: The message's language as the caller named it (``rag_common.languages.identify_query``); None: unknown.
    language: LanguageCode | None = None


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
    top_k: JsonInt = Field(default=10, ge=1, le=MAX_SEARCH_TOP_K)
    mode: SearchMode = "hybrid"
    #: Field -> a value or a non-empty list of values (any of them matches); fields AND together.
    filters: dict[SearchFilterField, str | Annotated[list[str], Field(min_length=1)]] = Field(default_factory=dict)
    #: Return each passage's stored embedding and the query's embedding (for the reranker).
    include_embeddings: bool = False
    #: Return each passage's stored sentence vectors (``Passage.sentence_vectors``), for the generator.
    include_sentence_vectors: bool = False
    #: Re-score the hits with personalised PageRank over the structure-and-entity graph; ``None``
    #: = the retriever's ``RETRIEVER_GRAPH_PPR``. Backends without the graph ignore it.
    graph: bool | None = None
    #: Add a second hop (follow-up searches for entities of the top hits not in the query); ``None``
    #: = the retriever's ``RETRIEVER_GRAPH_SECOND_HOP``. Backends without the graph ignore it.
    second_hop: bool | None = None
    #: The query's language as the caller named it; None: the retriever identifies it. Picks the query's
    #: analyzer and how far the dense list is trusted in the fusion (``EMBEDDER_LANGUAGES``).
    language: LanguageCode | None = None


class SearchResponse(WireModel):
    passages: list[Passage]
    mode: SearchMode
    timings_ms: dict[str, float] = Field(default_factory=dict)
    #: The query's unit-length embedding when ``include_embeddings`` was set (in bm25 mode too: the
    #: query is then embedded for this purpose alone); ``None`` otherwise.
    query_embedding: list[float] | None = None
    #: The language the query was analysed in (the request's, else identified); None: unsure (neutral
    #: field plus every configured language's field).
    language: LanguageCode | None = None


#: A user or group name in an ACL or an identity: 1-256 characters, no control characters.
PrincipalName = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00-\x1f\x7f]+$")]


class DocumentAcl(WireModel):
    """Who may read a document within its tenant; a document without one is readable by all of it.
    An ACL naming nobody (both lists empty) makes the document readable by no one."""

    groups: list[PrincipalName] = Field(
        default_factory=list, max_length=256, description="Groups whose members may read the document."
    )
    users: list[PrincipalName] = Field(
        default_factory=list, max_length=256, description="Users who may read the document."
    )


class DocumentIn(WireModel):
    """A document given as JSON. ``id`` defaults to a hash of source and text. It is stored in the
    caller's tenant (from the identity, never from the body)."""

    id: DocumentId | None = Field(
        default=None, description="The document id, unique within the tenant; default: a hash of source and text."
    )
    text: str = Field(json_schema_extra=NOT_BLANK, description="The document's text (not blank).")
    title: str = Field(default="", description="The document title.")
    source: str = Field(default="", description="Where the document came from: file name, URL or a label.")
    metadata: dict[str, Any] = Field(
        default_factory=dict,
        description="Returned with each passage. ``content_type`` (a string) is a search filter; a "
        "``tenant`` other than the caller's is refused (422).",
    )
    acl: DocumentAcl | None = Field(
        default=None,
        description="Who in the tenant may read it; absent: everyone in the tenant. Re-ingesting the "
        "same text with another ACL changes who reads it without re-embedding.",
    )
    language: LanguageCode | None = Field(
        default=None,
        description="The document's language (ISO 639-1, one of RAG_LANGUAGES), when known: it is analysed in it. "
        "Absent: identified from the text; text of no supported language is analysed language-neutrally.",
    )

    @field_validator("text")
    @classmethod
    def text_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("document text is empty")
        return value


class IngestRequest(WireModel):
    documents: list[DocumentIn] = Field(min_length=1, max_length=1000)


class IngestFailure(WireModel):
    name: str = Field(description="The file name, or the document id (``documents[i]`` for a document without one).")
    reason: str = Field(description="Why it was not indexed; nothing of it was written.")


class DuplicateContent(WireModel):
    """A document of the ingest whose text other documents also hold. Reported, never refused: two ids
    for one content may be wanted; delete one of them (``DELETE /v1/documents/{id}``) to merge."""

    doc_id: str = Field(description="The document of this request that holds the content.")
    content_hash: str = Field(description="The keyed digest of its normalised text, as in ``DocumentInfo.content_hash``.")
    duplicate_of: list[str] = Field(
        description="The other documents holding the same content after this ingest, sorted: already "
        "indexed ones and others of this request. Never ``doc_id`` itself."
    )


class IngestResponse(WireModel):
    documents: JsonInt = Field(description="Documents written (new or changed).")
    chunks: JsonInt = Field(description="Chunks written.")
    skipped: JsonInt = Field(default=0, description="Documents already indexed as given (same chunks and metadata).")
    failed: list[IngestFailure] = Field(
        default_factory=list, description="One entry per file or document rejected; the others still went in."
    )
    doc_ids: list[str] = Field(default_factory=list, description="Ids of the documents written or skipped.")
    duplicates: list[DuplicateContent] = Field(
        default_factory=list,
        description="The documents of ``doc_ids`` whose content other documents also hold, in request order.",
    )
    readers: dict[str, list[str]] = Field(
        default_factory=dict,
        description="Who may read each document written (new or changed) by this request: ``*`` (everyone "
        "in the tenant), ``group:<name>``, ``user:<name>``; an empty list is no one. The audit log keeps it.",
    )


class DocumentInfo(WireModel):
    doc_id: str = Field(description="The document id.")
    title: str = Field(description="The document title (may be empty).")
    source: str = Field(description="Where the document came from: file name, URL or the caller's label.")
    chunks: JsonInt = Field(description="Indexed chunks.")
    content_hash: str | None = Field(
        default=None,
        description="A digest of the normalised text (BOM dropped, LF line ends, NFC, stripped), keyed per "
        "tenant (HMAC-SHA256 of its sha256 with the retriever's secret): equal for documents of the tenant with "
        "the same content, whatever the route, and not computable without the key. None if indexed before "
        "content hashes existed.",
    )


class DocumentDeleted(WireModel):
    """Answer to deleting a document: its id and how many chunks went with it."""

    doc_id: str
    deleted_chunks: JsonInt


class DocumentList(WireModel):
    documents: list[DocumentInfo]


class ReadableRequest(WireModel):
    """Which of these documents may the caller read now? (The gateway asks before it shows a source
    a conversation cited: an ACL may have changed, or the document gone, since.)"""

    doc_ids: list[str] = Field(min_length=1, max_length=1000, description="Document ids of the caller's tenant.")


class ReadableResponse(WireModel):
    doc_ids: list[str] = Field(description="Those of the asked ids that exist and that the caller may read, sorted.")


# --------------------------------------------------------------------------- reranker


class _StageSpec(WireModel):
    """A rerank stage: ``name`` has a default for Python callers but is required on the wire, where it
    is the discriminator that picks the stage."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema = handler.resolve_ref_schema(handler(core_schema))
        schema["required"] = ["name", *[field for field in schema.get("required", []) if field != "name"]]
        return schema


class CrossEncoderSpec(_StageSpec):
    """Score every (query, passage) pair with the configured cross-encoder; skipped if none is set."""

    name: Literal["cross_encoder"] = "cross_encoder"


class DiffusionSpec(_StageSpec):
    """Personalised PageRank over the candidates' cosine-similarity graph, seeded by the current scores."""

    name: Literal["diffusion"] = "diffusion"
    alpha: float | None = Field(default=None, ge=0.0, lt=1.0, description="Damping; None = service default.")
    top_k_edges: JsonInt | None = Field(default=None, ge=1, description="Keep only the k strongest edges per node.")


class GmmrSpec(_StageSpec):
    """Geometric MMR (DF-RAG): relevant and diverse ``top_k``; ``mmr_lambda="adaptive"`` lets an LLM pick λ."""

    name: Literal["gmmr"] = "gmmr"
    mmr_lambda: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["adaptive"] | None = Field(
        default=None, description="1 = relevance only, 0 = diversity only; None = service default."
    )
    #: The relevance term: ``cosine`` of query and passage embeddings (DF-RAG as published), or the
    #: incoming ``scores`` (retriever's or cross-encoder's) min-max scaled to [0, 1], so gMMR keeps
    #: the upstream ranking's judgement of relevance; None = service default.
    relevance: Literal["cosine", "scores"] | None = None


RerankStageSpec = Annotated[CrossEncoderSpec | DiffusionSpec | GmmrSpec, Field(discriminator="name")]
RerankStageName = Literal["cross_encoder", "diffusion", "gmmr"]


class RerankRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    passages: list[Passage] = Field(max_length=500)
    top_k: JsonInt = Field(default=5, ge=1, le=MAX_SEARCH_TOP_K)
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


class RankedPassage(WireModel):
    """One passage of the reranker's answer: which of the sent passages (``Passage.chunk_id``) and the
    score the chain gave it. The caller already holds the passage itself."""

    chunk_id: str
    score: float


class RerankResponse(WireModel):
    """The reranker's decision, not the passages again: ``ranking`` names the kept passages by id, in
    final order, with their new scores (the caller applies it with :meth:`ranked_passages`)."""

    #: The ``top_k`` kept passages, best first (ties keep their input order).
    ranking: list[RankedPassage]
    #: The stages that ran, in order, e.g. ``["cross_encoder", "diffusion"]``.
    stages: list[str]
    timings_ms: dict[str, float] = Field(default_factory=dict)
    #: One report per requested stage, including skipped and failed ones.
    reports: list[StageReport] = Field(default_factory=list)
    #: True when a stage failed and was bypassed (the order before it was kept).
    degraded: bool = False

    def ranked_passages(self, sent: list[Passage]) -> list[Passage]:
        """``sent`` (the request's passages, or the caller's fuller copies of them) in the ranking's
        order, each with its new score and every other field as the caller holds it.

        Raises ``ValueError`` when the ranking names a passage that was not sent, or one passage
        twice: the reranker broke the contract, and its order cannot be trusted.
        """
        by_id = {passage.chunk_id: passage for passage in sent}
        ranked: list[Passage] = []
        seen: set[str] = set()
        for item in self.ranking:
            if item.chunk_id not in by_id:
                raise ValueError(f"the ranking names chunk {item.chunk_id!r}, which was not sent")
            if item.chunk_id in seen:
                raise ValueError(f"the ranking names chunk {item.chunk_id!r} twice")
            seen.add(item.chunk_id)
            ranked.append(by_id[item.chunk_id].model_copy(update={"score": item.score}))
        return ranked


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
    #: The question's language (``rag_common.languages.identify_query``): the answer, the abstention and
    #: the content-word rules are in it. None: the generator identifies it.
    language: LanguageCode | None = None


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


# --------------------------------------------------------------------------- every service


class Readiness(WireModel):
    """Body of ``/readyz``: 200 when every dependency is ``ok``, 503 otherwise."""

    status: Literal["ready", "not_ready"]
    service: str
    #: ``{dependency: "ok" | reason}``.
    checks: dict[str, str]


class ErrorBody(WireModel):
    """Body of every 4xx/5xx the services return."""

    error: str
    detail: Any = None
    stage: str | None = None
