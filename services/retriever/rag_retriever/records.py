"""What the index stores per chunk, and what a search returns."""

from __future__ import annotations

import hashlib
import json
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from rag_common.identity import EVERYONE
from rag_common.schemas import Passage, SentenceVectors
from rag_common.upload_formats import HTML, MARKDOWN, PDF, PLAIN_TEXT

#: Content types read with Markdown structure (ATX headings give ``section_path``, pipe tables are kept
#: whole): what the parsers write for Markdown and HTML, and plain text, which is also what a JSON
#: document without ``content_type`` is. So one text gets the same chunks whether it came as a
#: ``.md`` or ``.txt`` upload or as JSON (issue 12: the JSON copy of a Markdown file was chunked as
#: one flat text, with its ``#`` lines inside the chunks).
MARKDOWN_LAYOUT = frozenset({MARKDOWN.mime_type, HTML.mime_type, PLAIN_TEXT.mime_type})
#: Content types whose text is pages separated by form feeds (``\f``): chunks carry their ``page``.
PAGED_LAYOUT = frozenset({PDF.mime_type})
#: The tenant of chunks indexed before tenants existed (and of callers when the gateway's auth is off).
DEFAULT_TENANT = "default"


def strip_outer_space(text: str) -> str:
    """``text`` without the whitespace at either end, form feeds (page breaks) excepted: what
    ``re.sub(r"\\A[^\\S\\f]+|[^\\S\\f]+\\Z", "", text)`` gives, in time linear in the text.

    The regular expression was quadratic in the length of every run of whitespace *inside* the text
    (the engine tries ``[^\\S\\f]+\\Z`` from each position of a run, scanning to its end each time):
    40,000 spaces in a row took 12 s, holding the GIL. ``str.lstrip``/``rstrip`` strip the same
    characters (``str.isspace``, which is what ``\\s`` matches in a ``str`` pattern); a form feed in
    the stripped part ends the strip there."""
    head = len(text) - len(text.lstrip())
    feed = text.find("\f", 0, head)
    start = feed if feed >= 0 else head
    tail = len(text.rstrip())
    feed = text.rfind("\f", max(tail, start))
    end = feed + 1 if feed >= 0 else tail
    return text[start:end] if start < end else ""


def normalise_text(text: str) -> str:
    """A document's text as it is chunked and hashed, whatever the route it came by: a leading BOM
    dropped, line ends as ``\n`` (CRLF and CR), Unicode NFC, no leading or trailing whitespace other
    than form feeds (they are PDF page breaks: an empty first page must stay page 1).

    So a file uploaded as saved on Windows (BOM, CRLF, final newline) and the same text sent as JSON
    are one content. Apart from NFC, nothing inside a line changes (spaces, tabs, Markdown hard
    breaks stay).
    """
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return strip_outer_space(unicodedata.normalize("NFC", text))


def content_hash(text: str) -> str:
    """``sha256`` (hex) of the normalised text: equal for two documents with the same content."""
    return hashlib.sha256(normalise_text(text).encode("utf-8")).hexdigest()


@dataclass(slots=True)
class ChunkRecord:
    """One indexed chunk of a document.

    ``tenant`` is the tenant the document belongs to (the ingesting caller's) and ``readers`` the
    principals that may read it (``rag_common.identity.readers_of`` of its ACL: ``["*"]`` for everyone
    in the tenant); both are indexed keyword fields every search filters on (``AccessFilter``). Chunks
    indexed before tenants existed read as tenant ``default``, readers ``["*"]``.

    ``metadata`` is the document's metadata; its ``content_type`` key (a string, when present) is also
    indexed as an exact-match filter field. ``doc_fingerprint`` identifies the
    document-level fields (title, source, metadata) so a metadata-only change is not mistaken for
    an unchanged document. ``page`` is the 1-based PDF page the chunk comes from. ``table_id`` is set
    on chunks that hold a table (or, for a table too large for one chunk, a run of its rows under the
    repeated header): every part of one table shares it. ``content_hash`` is the document's
    :func:`content_hash`, the same on all its chunks (None on chunks indexed before it existed).
    """

    chunk_id: str
    doc_id: str
    text: str
    chunk_index: int
    title: str = ""
    source: str = ""
    page: int | None = None
    section_path: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    doc_fingerprint: str = ""
    table_id: str | None = None
    content_hash: str | None = None
    tenant: str = DEFAULT_TENANT
    readers: list[str] = field(default_factory=lambda: [EVERYONE])
    #: What is embedded when it is not ``text`` (``RETRIEVER_EMBED_TEMPLATE``): set by the chunker for
    #: the ingestor, not stored (the chunk id covers it).
    embed_text: str | None = field(default=None, compare=False, repr=False)
    #: The vectors of the chunk's scorable sentences (``RETRIEVER_SENTENCE_VECTORS``,
    #: :mod:`rag_common.sentence_vectors`), stored with it; None when off or indexed before they
    #: existed. Left out of ``==`` and the repr, like ``ScoredChunk.vector``.
    sentence_vectors: SentenceVectors | None = field(default=None, compare=False, repr=False)
    #: The document's language (declared, or identified at ingestion; ``rag_common.languages``): the
    #: chunk is indexed in that language's lexical field as well as the neutral one. None: neutral only
    #: (no supported language could be named, or indexed before languages existed).
    language: str | None = None

    @property
    def content_type(self) -> str | None:
        value = self.metadata.get("content_type")
        return value if isinstance(value, str) else None

    def to_payload(self) -> dict[str, Any]:
        return {
            "chunk_id": self.chunk_id,
            "doc_id": self.doc_id,
            "text": self.text,
            "chunk_index": self.chunk_index,
            "title": self.title,
            "source": self.source,
            "page": self.page,
            "section_path": list(self.section_path),
            "metadata": self.metadata,
            "doc_fingerprint": self.doc_fingerprint,
            "table_id": self.table_id,
            "content_hash": self.content_hash,
            "tenant": self.tenant,
            "readers": list(self.readers),
            # Only when there are some: payloads of chunks without them stay as they always were.
            **({"sentence_vectors": self.sentence_vectors.model_dump()} if self.sentence_vectors is not None else {}),
            **({"language": self.language} if self.language is not None else {}),
        }

    @classmethod
    def from_payload(cls, payload: dict[str, Any]) -> ChunkRecord:
        stored = payload.get("sentence_vectors")
        if isinstance(stored, dict):
            # Written by ``to_payload`` from a validated model: rebuilt without validating again
            # (every search hit is read through here).
            payload = {**payload, "sentence_vectors": SentenceVectors.model_construct(**stored)}
        return cls(**payload)


@dataclass(slots=True)
class ScoredChunk:
    chunk: ChunkRecord
    score: float
    #: The chunk's stored unit-length vector (float32, exactly as upserted), only when the search
    #: was asked for it (``with_vectors=True``), else None. Left out of ``==`` (an array has no
    #: single truth value) and of the repr; compare vectors explicitly.
    vector: np.ndarray | None = field(default=None, compare=False, repr=False)

    def to_passage(self, *, with_sentence_vectors: bool = False) -> Passage:
        """The wire passage; ``embedding`` is the vector as Python floats (each float32 value exact);
        ``sentence_vectors`` the stored ones when asked for (and stored)."""
        chunk = self.chunk
        metadata = dict(chunk.metadata)
        if chunk.table_id is not None:
            metadata["table_id"] = chunk.table_id
        return Passage(
            chunk_id=chunk.chunk_id,
            doc_id=chunk.doc_id,
            text=chunk.text,
            title=chunk.title,
            source=chunk.source,
            page=chunk.page,
            section_path=list(chunk.section_path),
            score=self.score,
            metadata=metadata,
            embedding=None if self.vector is None else np.asarray(self.vector, dtype=np.float32).reshape(-1).tolist(),
            sentence_vectors=chunk.sentence_vectors if with_sentence_vectors else None,
            language=chunk.language,
        )


@dataclass(slots=True)
class SourceDocument:
    """A document ready for chunking: its id is resolved, its metadata validated, its tenant and
    readers (``readers_of`` its ACL) set."""

    doc_id: str
    text: str
    title: str = ""
    source: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    tenant: str = DEFAULT_TENANT
    readers: list[str] = field(default_factory=lambda: [EVERYONE])
    #: Declared by the caller, else identified by the ingestor (``document_language``); None: neutral.
    language: str | None = None

    @property
    def content_type(self) -> str:
        value = self.metadata.get("content_type")
        return value if isinstance(value, str) and value else "text/plain"

    @property
    def is_markdown(self) -> bool:
        return self.content_type == "text/markdown"

    @property
    def content_hash(self) -> str:
        return content_hash(self.text)

    @property
    def layout(self) -> Literal["pages", "markdown", "plain"]:
        """How the chunker reads the text: PDF pages, Markdown headings (Markdown, HTML, plain text:
        see ``MARKDOWN_LAYOUT``) or, for any other content type a document states, plain."""
        if self.content_type in PAGED_LAYOUT:
            return "pages"
        return "markdown" if self.content_type in MARKDOWN_LAYOUT else "plain"

    def fingerprint(self, embed_template: str = "{text}", *, sentence_vectors: str = "off") -> str:
        """Hash of the document-level fields; the text is covered by the chunk ids. The content hash
        is one of them, so chunks indexed before it existed are rewritten (with it) on re-ingest. So are
        the readers (only when not everyone, so fingerprints from before ACLs stay valid): an ACL
        change rewrites the chunks, with their stored vectors (``Ingestor``), nothing re-embedded. So is
        the embedding template (``RETRIEVER_EMBED_TEMPLATE``; only when not text-only, so text-only
        fingerprints from before it existed stay valid): re-ingesting under another template rewrites
        the document, re-embedding the chunks whose embedded string changed. So is whether sentence
        vectors are stored and how (``RETRIEVER_SENTENCE_VECTORS``; only when on, so fingerprints from
        before they existed stay valid with it off, and ``embedded`` keeps the fingerprint it had as
        the switch's only mode): changing it, re-ingesting a document rewrites them, its chunk vectors
        reused."""
        fields: dict[str, Any] = {
            "title": self.title, "source": self.source, "metadata": self.metadata, "content_hash": self.content_hash,
        }
        if embed_template != "{text}":
            fields["embed_template"] = embed_template
        if sentence_vectors != "off":
            fields["sentence_vectors"] = True if sentence_vectors == "embedded" else sentence_vectors
        if self.readers != [EVERYONE]:
            fields["readers"] = sorted(self.readers)
        if self.language is not None:
            # Only when named, so fingerprints from before languages existed stay valid for neutral
            # documents; a document re-ingested under a language is rewritten with it (vectors reused).
            fields["language"] = self.language
        return hashlib.sha1(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()
