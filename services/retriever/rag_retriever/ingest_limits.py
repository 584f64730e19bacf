"""How much one ingest request may ask of the retriever: characters per document, chunks per request.

Nothing else bounds it: the gateway caps a request's bytes (20 MiB), which is ~20 million characters
of one document, and embedding costs about 37 ms of the 2-core machine per chunk, so one request could
hold the retriever's CPU for more than ten minutes (issue 29). Both limits are checked by ``Ingestor.ingest``
before anything is embedded or written, and exceeding one refuses the whole request with
:class:`~rag_common.errors.PayloadTooLarge` (413), whose message names the limit, its setting and
its value; both routes (JSON documents and uploaded files, which become documents) end there.

- ``RETRIEVER_MAX_DOCUMENT_CHARS``: characters of one document's text as sent, checked before it is
  normalised or chunked (the memory and chunking time of a document grow with it);
- ``RETRIEVER_MAX_CHUNKS_PER_REQUEST``: chunks the request would write (its changed documents'
  chunks), checked after chunking, before embedding: the embedding work, which dominates.

The defaults and why are in ``settings.py`` (docs/retriever.md, "Limits and the ingest pool").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rag_common.errors import PayloadTooLarge
from rag_common.schemas import DocumentIn

if TYPE_CHECKING:
    from rag_retriever.settings import RetrieverSettings

DOCUMENT_CHARS_SETTING = "RETRIEVER_MAX_DOCUMENT_CHARS"
CHUNKS_SETTING = "RETRIEVER_MAX_CHUNKS_PER_REQUEST"


@dataclass(frozen=True, slots=True)
class IngestLimits:
    """The service's are its settings' (``of``, the one source of their defaults); None is no limit
    (``unlimited``: tools and tests that build an ``Ingestor`` themselves)."""

    max_document_chars: int | None
    max_chunks_per_request: int | None

    @classmethod
    def of(cls, settings: RetrieverSettings) -> IngestLimits:
        return cls(settings.max_document_chars, settings.max_chunks_per_request)

    @classmethod
    def unlimited(cls) -> IngestLimits:
        return cls(None, None)

    def check_documents(self, documents: Sequence[DocumentIn]) -> None:
        """PayloadTooLarge naming the first document whose text is over ``max_document_chars``."""
        limit = self.max_document_chars
        if limit is None:
            return
        for position, document in enumerate(documents):
            size = len(document.text)
            if size > limit:
                name = document.id or f"documents[{position}]"
                raise PayloadTooLarge(
                    f"document {name} has {size:,} characters, over the limit of {limit:,} characters per "
                    f"document ({DOCUMENT_CHARS_SETTING}={limit}); split it into smaller documents",
                    detail={"limit": "max_document_chars", "setting": DOCUMENT_CHARS_SETTING, "value": limit,
                            "document": name, "characters": size},
                )

    def check_chunks(self, chunks: int) -> None:
        """PayloadTooLarge when the request would write more than ``max_chunks_per_request`` chunks."""
        limit = self.max_chunks_per_request
        if limit is not None and chunks > limit:
            raise PayloadTooLarge(
                f"this request would write {chunks:,} chunks, over the limit of {limit:,} chunks per ingest "
                f"request ({CHUNKS_SETTING}={limit}); send its documents in smaller requests",
                detail={"limit": "max_chunks_per_request", "setting": CHUNKS_SETTING, "value": limit,
                        "chunks": chunks},
            )
