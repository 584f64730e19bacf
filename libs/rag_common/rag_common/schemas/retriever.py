"""The retriever's search, ingestion and document requests and responses."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, StringConstraints, field_validator

from rag_common.schemas.wire import (
    DocumentId,
    JsonInt,
    LanguageCode,
    MAX_MESSAGE_CHARS,
    MAX_SEARCH_TOP_K,
    NOT_BLANK,
    SearchFilterField,
    SearchMode,
    WireModel,
)
from rag_common.schemas.passages import Passage


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
