"""How tests build the retriever's parts: as ``rag_retriever.runtime`` does, with the defaults of
``RetrieverSettings`` (the one source of every default) wherever a test pins no value of its own.

An ingestor over an embedded backend takes its staged writes from ``runtime.embedded_abilities``,
the same write path as the service's; tests that pin the one-step path pass ``staged=None``.
"""

from __future__ import annotations

from typing import Any

from rag_common.embedders import Embedder
from rag_common.languages import identifier_of
from rag_common.settings import LanguageSettings
from rag_common.sentence_vectors import SentenceVectorMode
from rag_retriever.backends.base import HnswParams, IngestTarget
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.chunking import Chunker, Tokenizer
from rag_retriever.document_language import DocumentLanguages
from rag_retriever.ingest_limits import IngestLimits
from rag_retriever.ingestion import Ingestor
from rag_retriever.locking import ReadWriteLock
from rag_retriever.runtime import embedded_abilities
from rag_retriever.settings import RetrieverSettings

#: The settings as they are by default (tests run with no ``RETRIEVER_*`` variables set).
SETTINGS = RetrieverSettings()
#: The vector graph's parameters by default (``RETRIEVER_HNSW_*``).
HNSW = HnswParams.of(SETTINGS)
#: How the runtime names a document's language (``RAG_LANGUAGES`` by default: all 17).
DOCUMENT_LANGUAGES = DocumentLanguages(identifier_of(LanguageSettings()), tuple(LanguageSettings().languages))


def settings_chunker(tokenizer: Tokenizer, *args: Any, **options: Any) -> Chunker:
    """A chunker of the settings' chunk sizes; the template and sentence vectors as ``Chunker``'s
    (text only, none) unless given."""
    return Chunker(tokenizer, SETTINGS.chunk_tokens, SETTINGS.chunk_overlap_tokens, *args, **options)


def build_ingestor(
    backend: IngestTarget,
    embedder: Embedder,
    chunker: Chunker,
    lock: ReadWriteLock | None = None,
    *,
    sentence_vectors: SentenceVectorMode = "off",
    limits: IngestLimits | None = None,
    **options: Any,
) -> Ingestor:
    """An ingestor over any backend (a fake, OpenSearch's): no sentence vectors and no limits unless
    the test asks for them; documents' languages named as the runtime names them unless ``languages``
    says otherwise (None: only declared ones)."""
    options.setdefault("languages", DOCUMENT_LANGUAGES)
    return Ingestor(
        backend, embedder, chunker, lock or ReadWriteLock(), sentence_vectors=sentence_vectors,
        limits=limits or IngestLimits.unlimited(), **options,
    )


def embedded_ingestor(
    backend: EmbeddedBackend, embedder: Embedder, chunker: Chunker, lock: ReadWriteLock | None = None, **options: Any
) -> Ingestor:
    """An ingestor over an embedded backend that writes as the service's does (staged writes)."""
    return build_ingestor(backend, embedder, chunker, lock, staged=embedded_abilities(backend).staged, **options)
