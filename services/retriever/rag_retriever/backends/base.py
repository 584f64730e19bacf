"""The backend seam: the embedded index (tantivy + hnswlib) or OpenSearch.

The protocol is async because the OpenSearch backend is network I/O; the embedded backend runs its
blocking work in worker threads. It is split into small capabilities so that a caller can say what
it needs (the ingestor indexes, the search service searches, the API lists).

Abilities only some backends have are declared here too, never discovered (no ``getattr``):
``GraphSearcher`` (the graph signals after a first pass), ``FusionCandidateSource`` (learned
fusion's candidates) and ``StagedWriter`` (a replacement prepared out of sight of searches). The
composition root (``rag_retriever.runtime``) knows which backend it opened and hands each ability to
the service that uses it, or None. ``GraphIndex`` is what the graph signals read of an index
(``graph_retrieval``, ``fusion_candidates``): those modules take it, not a concrete backend, so the
embedded backend can use them without an import cycle.

Filters are normalised once, by ``normalise_filters`` (the search service calls it on the request's);
backends take that form (``Filters``: known fields, each a list of values) as it is.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import numpy as np

from rag_common.identity import Identity
from rag_common.schemas import SEARCH_FILTER_FIELDS, DocumentInfo, SentenceVectors
from rag_retriever.entity_graph import EntityGraph
from rag_retriever.fusion_features import CandidateSignals
from rag_retriever.records import ChunkRecord, ScoredChunk

if TYPE_CHECKING:
    from rag_retriever.settings import RetrieverSettings

#: Fields a search may filter on, each an exact match on the whole value (the wire schema's list).
FILTER_FIELDS = SEARCH_FILTER_FIELDS

#: ``{field: allowed values}``, as ``normalise_filters`` makes it (known fields, each a list): a chunk
#: matches when, for every field, its value is one of the allowed values (AND across fields, OR
#: within a field). Backends take it as it is.
Filters = Mapping[str, list[str]]


def normalise_filters(filters: Mapping[str, str | Sequence[str]] | None) -> Filters:
    """The one place filters are checked and normalised: each field's values as a list (a single
    value is a list of one). An unknown field raises ``ValueError``; on the HTTP path the wire schema
    (``SearchRequest.filters``) refuses it first, with a 422 naming the allowed fields."""
    normalised: dict[str, list[str]] = {}
    for name, values in (filters or {}).items():
        if name not in FILTER_FIELDS:
            raise ValueError(f"unknown filter field {name!r}; allowed: {', '.join(FILTER_FIELDS)}")
        normalised[name] = [values] if isinstance(values, str) else list(values)
    return normalised

@dataclass(frozen=True, slots=True)
class AccessFilter:
    """What a caller may read: chunks of ``tenant`` whose ``readers`` hold one of ``principals``
    (``Identity.principals()``: ``*``, ``user:<u>``, ``group:<g>``...). Applied inside every search
    (the ANN filter and the BM25 query; OpenSearch's ``bool.filter``), never to results afterwards,
    so a narrow ACL still yields ``k`` hits when ``k`` readable chunks exist.

    Backends take ``access=None`` as "no restriction": only for tests and maintenance tools; the
    search service always passes the caller's."""

    tenant: str
    principals: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.principals:
            raise ValueError("an access filter needs at least one principal")

    @classmethod
    def of(cls, identity: Identity) -> AccessFilter:
        return cls(identity.tenant, tuple(identity.principals()))

    def allows(self, tenant: str, readers: Collection[str]) -> bool:
        return tenant == self.tenant and any(principal in readers for principal in self.principals)


#: Most document ids ``ContentLookup.documents_with_content`` lists per content hash.
MAX_DOCUMENTS_PER_CONTENT = 1000

#: How hybrid search turns a dense and a BM25 list into one: ``min_max`` and ``z_score`` normalise
#: each list and take the weighted arithmetic mean, ``rrf`` sums ``1 / (rank_constant + rank)``.
FusionMethod = Literal["min_max", "z_score", "rrf"]


#: RRF's ``k``: 60 is the value of the original paper and OpenSearch's default. No setting holds it.
RRF_RANK_CONSTANT = 60


@dataclass(frozen=True, slots=True)
class FusionSettings:
    """How hybrid search fuses; ``of(settings)`` is the configured one (``hybrid_normalization``,
    ``hybrid_dense_weight``, the one source of their defaults)."""

    method: FusionMethod
    #: Weight of the dense list (BM25 gets ``1 - dense_weight``); ignored by ``rrf``.
    dense_weight: float
    rank_constant: int = RRF_RANK_CONSTANT

    def __post_init__(self) -> None:
        if not 0.0 <= self.dense_weight <= 1.0:
            raise ValueError(f"dense_weight must be in [0, 1], got {self.dense_weight}")
        if self.rank_constant < 1:
            raise ValueError(f"rank_constant must be >= 1, got {self.rank_constant}")

    @classmethod
    def of(cls, settings: RetrieverSettings) -> FusionSettings:
        """The backend's hybrid fusion for a query in a language the embedder knows; learned fusion
        starts from a min-max first pass."""
        method = "min_max" if settings.hybrid_normalization == "learned" else settings.hybrid_normalization
        return cls(method=method, dense_weight=settings.hybrid_dense_weight)

    def with_dense_weight(self, dense_weight: float) -> FusionSettings:
        return replace(self, dense_weight=dense_weight)


@dataclass(frozen=True, slots=True)
class GraphOptions:
    """The graph signals' parameters (``rag_retriever.graph_retrieval`` says what each does); no
    defaults of its own: ``of(settings)``, whose ``graph_*`` fields are the one source."""

    damping: float
    weight: float
    seed_hits: int
    entity_max_chunks: int
    hop_passages: int
    hop_entities: int
    hop_k: int
    hop_weight: float

    @classmethod
    def of(cls, settings: RetrieverSettings) -> GraphOptions:
        """The ``RETRIEVER_GRAPH_*`` parameters of the walk and of the second hop."""
        return cls(
            damping=settings.graph_ppr_damping, weight=settings.graph_ppr_weight, seed_hits=settings.graph_seed_hits,
            entity_max_chunks=settings.graph_entity_max_chunks, hop_passages=settings.graph_hop_passages,
            hop_entities=settings.graph_hop_entities, hop_k=settings.graph_hop_k, hop_weight=settings.graph_hop_weight,
        )


@dataclass(frozen=True, slots=True)
class HnswParams:
    """The vector graph's HNSW parameters, the same for both backends (``m`` and ``ef_construction``
    fixed when an index is created, ``ef_search`` at query time, raised to k when k is larger); no
    defaults of its own: ``of(settings)``, whose ``hnsw_*`` fields are the one source."""

    m: int
    ef_construction: int
    ef_search: int

    @classmethod
    def of(cls, settings: RetrieverSettings) -> HnswParams:
        return cls(m=settings.hnsw_m, ef_construction=settings.hnsw_ef_construction, ef_search=settings.hnsw_ef_search)


@dataclass(frozen=True, slots=True)
class FusionCandidates:
    """A query's learned-fusion candidates (the first pass's ``first_pass`` best first, then the
    graph's additions) and each one's signals, aligned (``rag_retriever.fusion_candidates``)."""

    hits: list[ScoredChunk]
    signals: list[CandidateSignals]
    first_pass: int


class IndexMismatchError(RuntimeError):
    """The index was built for other vectors (dimension or model) than configured."""


@dataclass(frozen=True, slots=True)
class ChunkWriteFailure:
    chunk_id: str
    doc_id: str
    reason: str


class ChunkWriteError(RuntimeError):
    """Some chunks of an upsert were not written; the others were. ``failures`` says which and why."""

    def __init__(self, failures: Sequence[ChunkWriteFailure]) -> None:
        self.failures = list(failures)
        shown = "; ".join(f"{f.chunk_id}: {f.reason}" for f in self.failures[:5])
        more = f" (and {len(self.failures) - 5} more)" if len(self.failures) > 5 else ""
        super().__init__(f"{len(self.failures)} chunk(s) not indexed: {shown}{more}")

    @property
    def doc_ids(self) -> set[str]:
        return {failure.doc_id for failure in self.failures}


class Indexer(Protocol):
    """A document is identified by (tenant, doc_id): every per-document call takes ``tenant``, and
    ``tenant=None`` (tests and tools only) means any tenant. The ingestor always passes one."""

    async def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        """Index ``chunks`` with their unit-length ``vectors``; an existing ``chunk_id`` is replaced.

        Searchable once this returns. Raises ``ChunkWriteError`` when some chunks were rejected.
        """

    async def delete_document(self, doc_id: str, *, tenant: str | None = None) -> int:
        """Remove every chunk of ``doc_id`` (in ``tenant``); returns how many there were."""

    async def replace_documents(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> None:
        """Remove every chunk of ``doc_ids`` (in ``tenant``) and index ``chunks`` in their place.

        The embedded index does both in one commit: a crash leaves the old documents or the new ones,
        never a mix. OpenSearch has no multi-document transaction: there a crash in the middle can
        leave a document absent or partly written; its chunk ids then differ from the document's, so
        the next ingest of it rewrites it whole (``Ingestor._plan``). Raises ``ChunkWriteError`` as
        ``upsert`` does."""

    async def document_chunk_ids(self, doc_id: str, *, tenant: str | None = None) -> set[str]:
        """Chunk ids currently indexed for ``doc_id`` (empty if unknown)."""

    async def document_fingerprint(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        """The ``doc_fingerprint`` stored with ``doc_id``'s chunks, or None if unknown."""

    async def document_vectors(self, doc_id: str, *, tenant: str | None = None) -> dict[str, np.ndarray]:
        """``{chunk_id: stored vector}`` of ``doc_id``'s chunks: a chunk id hashes its text, so an
        unchanged chunk of a re-ingested document reuses its vector instead of being embedded again."""


    async def document_sentence_vectors(
        self, doc_id: str, *, tenant: str | None = None
    ) -> dict[str, tuple[str, SentenceVectors | None]]:
        """``{chunk_id: (text, stored sentence vectors or None)}`` of ``doc_id``'s chunks: a re-ingest
        embeds only the sentence strings none of them has a vector for."""


class ContentLookup(Protocol):
    async def documents_with_content(
        self, hashes: Collection[str], *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> dict[str, list[str]]:
        """For each of ``hashes`` that indexed chunks (of ``tenant``, readable under ``access`` when
        given) carry as ``content_hash``, the ids of the documents holding it (sorted, at most
        ``MAX_DOCUMENTS_PER_CONTENT``); hashes no such document holds are absent."""


class Searcher(Protocol):
    """Every search takes ``access`` (the caller's ``AccessFilter``, applied inside the search together
    with ``filters``) and ``with_vectors``: when true, each hit's ``ScoredChunk.vector`` is the chunk's
    stored vector (float32, as upserted), read in the same pass as the hit; when false it is None
    (and nothing extra is read or sent). ``with_sentence_vectors``: each hit's record carries its
    stored ``sentence_vectors`` (where stored); without it a backend may leave them out (OpenSearch
    does not fetch them; the embedded index reads them with the payload anyway)."""

    async def search_dense(
        self, vector: np.ndarray, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        """Nearest chunks by cosine; score = (1 + cosine) / 2 in [0, 1]. Filters apply inside the search."""

    async def search_bm25(
        self, query: str, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
        language: str | None = None,
    ) -> list[ScoredChunk]:
        """Best chunks by BM25 over text and title; score = raw BM25 (>= 0). ``language``: the query's
        (one of the configured ``RAG_LANGUAGES``): the neutral field and that language's field, each
        with its own analyzer, scores summed; None (unsure): the neutral field and every configured
        language's field, summed."""

    async def search_hybrid(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, fusion: FusionSettings,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
        language: str | None = None,
    ) -> list[ScoredChunk]:
        """Dense and BM25 (analysed as ``search_bm25`` does for ``language``) fused as ``fusion`` says;
        min_max in [0, 1], rrf a sum of 1 / (60 + rank)."""


class Catalog(Protocol):
    async def list_documents(
        self, *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> list[DocumentInfo]:
        """One entry per indexed document (of ``tenant``, readable under ``access`` when given),
        ordered by doc_id; ``content_hash`` as stored (the API shows a keyed digest of it)."""

    async def document_readers(self, doc_ids: Collection[str], *, tenant: str) -> dict[str, list[str]]:
        """``{doc_id: readers}`` of those of ``doc_ids`` indexed in ``tenant`` (unknown ids are absent):
        what the write rule (``document_access.DocumentAccess``) checks before a replace or delete."""

    async def count(self) -> int:
        """Number of indexed chunks."""


class IngestTarget(Indexer, ContentLookup, Catalog, Protocol):
    """What the ingestor needs: writes, which documents already hold a content (duplicates), and who
    may read the documents it would replace (the write rule)."""


class SearchBackend(Indexer, ContentLookup, Searcher, Catalog, Protocol):
    async def close(self) -> None:
        """Flush and release files or connections; the backend is unusable afterwards."""


# --------------------------------------------------------------------------- abilities some backends have


class GraphIndex(Protocol):
    """What the graph signals read of an index (``graph_retrieval``, ``fusion_candidates``): its
    structure-and-entity graph, BM25 follow-up searches and the chunks of graph labels, the last two
    under the caller's filters and access. Synchronous: they run inside the index's worker thread."""

    @property
    def graph(self) -> EntityGraph: ...

    def search_bm25(
        self, query: str, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False,
    ) -> list[ScoredChunk]: ...

    def chunks_by_labels(
        self, labels: Collection[int], filters: Filters | None, access: AccessFilter | None, *, with_vectors: bool
    ) -> dict[int, ScoredChunk]: ...


class GraphSearcher(Protocol):
    async def graph_search(
        self, query: str, hits: list[ScoredChunk], k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, hop: bool, options: GraphOptions,
    ) -> tuple[list[ScoredChunk], dict[str, Any]]:
        """``hits`` (a first pass, best first) re-scored and extended by the enabled graph signals; the
        best ``k``, and facts for the response's timings (``info["ppr_unavailable"]`` when ``ppr`` was
        asked for and the backend cannot walk its graph)."""


class FusionCandidateSource(Protocol):
    async def fusion_candidates(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, options: GraphOptions, dense_weight: float, language: str | None = None,
    ) -> FusionCandidates:
        """Learned fusion's candidates for ``query`` and their signals: the min-max hybrid first pass of
        ``k`` (its BM25 analysed for ``language`` as ``Searcher.search_bm25`` does) plus the graph's
        additions, access and filters inside every search."""


#: What ``StagedWriter.prepare_replacement`` hands back for the commit: opaque to its callers.
Prepared = TypeVar("Prepared")


class StagedWriter(Protocol[Prepared]):
    """A replacement in two steps: prepared while searches still run (the embedded index: queued
    tantivy documents and the new vectors in the graph), then committed under the write lock alone.
    The ingestor uses it when given one (``Ingestor._write``), ``Indexer.replace_documents`` else."""

    async def prepare_replacement(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> Prepared: ...

    async def commit_prepared(self, prepared: Prepared) -> None: ...

    async def abandon_prepared(self, prepared: Prepared) -> None: ...
