"""The OpenSearch backend: a thin async sequence of calls; every body comes from ``opensearch_requests``.

Reads and writes go through the alias ``config.alias``; the physical index behind it is
``{alias}-v{TEMPLATE_VERSION}-{timestamp}``, so a mapping change is a reindex plus one atomic alias
swap, invisible to readers. An index that needs one (an older template version, or other languages
than ``RAG_LANGUAGES``) is refused on startup rather than half used: its searches would read fields
analysed otherwise and ``dynamic: strict`` would reject every new chunk's language fields. Writes
wait for a refresh (``refresh=wait_for``; deletes ``refresh=true``) so that a finished ingest is
searchable, as with the embedded backend.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Collection
from datetime import UTC, datetime
from typing import Any

import numpy as np
from opensearchpy import AsyncOpenSearch
from opensearchpy.helpers import async_bulk

from rag_common.schemas import DocumentInfo, SentenceVectors
from rag_retriever.backends import opensearch_graph
from rag_retriever.backends import opensearch_requests as dsl
from rag_retriever.backends.base import (
    AccessFilter,
    ChunkWriteError,
    Filters,
    FusionSettings,
    GraphOptions,
    IndexMismatchError,
)
from rag_retriever.records import ChunkRecord, ScoredChunk
from rag_retriever.settings import RetrieverSettings

logger = logging.getLogger(__name__)

#: Chunks per bulk request: ~500 x (384 floats + text) stays well under the default 100 MB limit.
BULK_CHUNK_SIZE = 500
#: Page size when listing a document's chunk ids or the documents.
PAGE_SIZE = 1000


def create_client(settings: RetrieverSettings) -> AsyncOpenSearch:
    auth = None
    if settings.opensearch_user:
        password = settings.opensearch_password.get_secret_value() if settings.opensearch_password else ""
        auth = (settings.opensearch_user, password)
    return AsyncOpenSearch(
        hosts=[settings.opensearch_url],
        http_auth=auth,
        verify_certs=settings.opensearch_verify_certs,
        timeout=settings.opensearch_timeout_s,
    )


def _utcnow() -> datetime:
    return datetime.now(UTC)


class OpenSearchBackend:
    def __init__(
        self,
        client: AsyncOpenSearch,
        config: dsl.IndexConfig,
        *,
        fusion: FusionSettings,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._client = client
        self.config = config
        self._fusion = fusion
        self._clock = clock
        self._pipelines: set[str] = set()

    @property
    def alias(self) -> str:
        return self.config.alias

    # ------------------------------------------------------------------ lifecycle

    async def ensure_index(self) -> None:
        """Template, first physical index with the alias, and the configured pipeline, if missing.

        Idempotent. Replicas starting together may race to create the first index (each with its own
        timestamp); run the first start, or ``ensure_index``, from one process.
        """
        indices = self._client.indices
        await indices.put_index_template(name=self.config.template_name, body=dsl.index_template_body(self.config))
        if await indices.exists_alias(name=self.alias):
            await self._check_existing_index()
        else:
            physical = dsl.physical_index_name(self.alias, self._clock())
            await indices.create(index=physical, body=dsl.create_index_body(self.alias))
            logger.info("created index %s behind alias %s", physical, self.alias)
        await self._ensure_pipeline(self._fusion)

    async def reindex_into_new_version(self, *, delete_old: bool = False) -> str:
        """Copy everything into a new physical index built from the current template, then swap the
        alias onto it in one ``_aliases`` call. Returns the new index name.

        Stop ingestion first: writes that land in the old index after the copy started are not
        carried over. Vectors are copied from ``_source``, so this fits a mapping, analysis (languages)
        or HNSW-parameter change, not a new embedding model (that needs a re-ingest). Every chunk's
        routed language fields are made again for ``config.languages`` (``dsl.REINDEX_SCRIPT``); chunks
        of an index from before languages have none and are found by the neutral fields.
        """
        indices = self._client.indices
        await indices.put_index_template(name=self.config.template_name, body=dsl.index_template_body(self.config))
        old = sorted(await indices.get_alias(name=self.alias))
        new = dsl.physical_index_name(self.alias, self._clock())
        await indices.create(index=new, body=dsl.create_index_body(None))
        result = await self._client.reindex(
            body=dsl.reindex_body(self.alias, new, self.config.languages), refresh=True, wait_for_completion=True,
            request_timeout=3600,
        )
        if result.get("failures"):
            raise RuntimeError(f"reindex into {new} failed: {result['failures'][:3]}")
        await indices.update_aliases(body=dsl.alias_swap_body(self.alias, old, new))
        logger.info("alias %s moved from %s to %s (%s chunks)", self.alias, old, new, result.get("total"))
        if delete_old:
            for index in old:
                await indices.delete(index=index)
        return new

    async def close(self) -> None:
        await self._client.close()

    # ------------------------------------------------------------------ Indexer

    async def upsert(self, chunks: list[ChunkRecord], vectors: np.ndarray) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(chunks), self.config.dim):
            raise ValueError(f"expected vectors of shape ({len(chunks)}, {self.config.dim}), got {vectors.shape}")
        if not chunks:
            return
        if not np.isfinite(vectors).all():
            raise ValueError("vectors contain NaN or infinity")
        now = self._clock().isoformat(timespec="milliseconds")
        # raise_on_error=False: collect every rejected chunk instead of stopping at the first bad batch.
        # A duplicate chunk id in one request is indexed twice in order, so the last one wins.
        _, errors = await async_bulk(
            self._client,
            dsl.bulk_actions(self.alias, chunks, vectors, now, self.config.languages),
            chunk_size=BULK_CHUNK_SIZE,
            raise_on_error=False,
            refresh="wait_for",
        )
        if errors:
            raise ChunkWriteError(dsl.bulk_failures(errors, {chunk.chunk_id: chunk.doc_id for chunk in chunks}))

    async def delete_document(self, doc_id: str, *, tenant: str | None = None) -> int:
        # refresh=true (delete_by_query has no wait_for): the next search no longer sees the chunks.
        result = await self._client.delete_by_query(
            index=self.alias, body=dsl.delete_document_body(doc_id, tenant), refresh=True
        )
        if result.get("failures"):
            raise RuntimeError(f"deleting document {doc_id!r} failed: {result['failures'][:3]}")
        return int(result.get("deleted", 0))

    async def replace_documents(
        self, doc_ids: Collection[str], chunks: list[ChunkRecord], vectors: np.ndarray, *, tenant: str
    ) -> None:
        # No transaction spans documents here: deleted first, so that a crash leaves a document
        # absent or partly written, never its old and new chunks mixed; either way its chunk ids
        # no longer match it and its next ingest rewrites it.
        for doc_id in dict.fromkeys(doc_ids):
            await self.delete_document(doc_id, tenant=tenant)
        await self.upsert(chunks, vectors)

    async def document_chunk_ids(self, doc_id: str, *, tenant: str | None = None) -> set[str]:
        return {hit["_id"] async for hit in self._document_hits(dsl.chunk_ids_body, doc_id, tenant)}

    async def document_vectors(self, doc_id: str, *, tenant: str | None = None) -> dict[str, np.ndarray]:
        return {
            hit["_id"]: dsl.vector_from_source(hit["_source"])
            async for hit in self._document_hits(dsl.document_vectors_body, doc_id, tenant)
        }

    async def document_sentence_vectors(
        self, doc_id: str, *, tenant: str | None = None
    ) -> dict[str, tuple[str, SentenceVectors | None]]:
        return {
            hit["_id"]: dsl.sentence_vectors_from_source(hit["_source"])
            async for hit in self._document_hits(dsl.document_sentence_vectors_body, doc_id, tenant)
        }

    async def _document_hits(
        self, body_of: Callable[..., dict[str, Any]], doc_id: str, tenant: str | None
    ) -> AsyncIterator[dict[str, Any]]:
        """Every hit of a document's chunks, ``PAGE_SIZE`` per request (``search_after`` on chunk id);
        ``body_of(doc_id, page_size, after, tenant)`` builds each page's body."""
        after = None
        while True:
            body = body_of(doc_id, PAGE_SIZE, after, tenant)
            hits = (await self._client.search(index=self.alias, body=body))["hits"]["hits"]
            for hit in hits:
                yield hit
            if len(hits) < PAGE_SIZE:
                return
            after = hits[-1]["sort"][0]

    async def document_fingerprint(self, doc_id: str, *, tenant: str | None = None) -> str | None:
        response = await self._client.search(index=self.alias, body=dsl.fingerprint_body(doc_id, tenant))
        hits = response["hits"]["hits"]
        return hits[0]["_source"].get("doc_fingerprint") if hits else None

    # ------------------------------------------------------------------ ContentLookup

    async def document_readers(self, doc_ids: Collection[str], *, tenant: str) -> dict[str, list[str]]:
        wanted = sorted(set(doc_ids))
        readers: dict[str, list[str]] = {}
        for start in range(0, len(wanted), PAGE_SIZE):
            body = dsl.document_readers_body(wanted[start : start + PAGE_SIZE], tenant)
            readers.update(dsl.document_readers_from(await self._client.search(index=self.alias, body=body)))
        return readers

    async def documents_with_content(
        self, hashes: Collection[str], *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> dict[str, list[str]]:
        wanted = sorted(set(hashes))
        holders: dict[str, list[str]] = {}
        for start in range(0, len(wanted), PAGE_SIZE):
            body = dsl.documents_with_content_body(wanted[start : start + PAGE_SIZE], tenant, access)
            holders.update(dsl.documents_with_content_from(await self._client.search(index=self.alias, body=body)))
        return holders

    # ------------------------------------------------------------------ Searcher

    # with_vectors (with_sentence_vectors): the vectors (sentence vectors) come back in the hits'
    # _source, only when asked for, in the same request (no second
    # round trip, and the same snapshot as the hits). access: a bool.filter on tenant and readers
    # inside every query (the knn clause's filter, the BM25 bool, both hybrid sub-queries).

    async def search_dense(
        self, vector: np.ndarray, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False
    ) -> list[ScoredChunk]:
        self._check_vector(vector)
        if k <= 0:
            return []
        body = dsl.dense_search_body(
            vector, k, filters, self.config.hnsw.ef_search, access=access, with_vectors=with_vectors,
            with_sentence_vectors=with_sentence_vectors,
        )
        response = await self._client.search(index=self.alias, body=body)
        return dsl.scored_hits(
            response, lambda raw: dsl.dense_score(raw, self.config.space), with_vectors=with_vectors
        )

    async def search_bm25(
        self, query: str, k: int, filters: Filters | None = None,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
        language: str | None = None,
    ) -> list[ScoredChunk]:
        if k <= 0:
            return []
        body = dsl.bm25_search_body(
            query, k, filters, access=access, with_vectors=with_vectors, with_sentence_vectors=with_sentence_vectors,
            fields=dsl.bm25_fields(self.config.languages, language, self.config.neutral_weight),
        )
        response = await self._client.search(index=self.alias, body=body)
        return dsl.scored_hits(response, with_vectors=with_vectors)

    async def search_hybrid(
        self, query: str, vector: np.ndarray, k: int, filters: Filters | None, fusion: FusionSettings,
        *, access: AccessFilter | None = None, with_vectors: bool = False, with_sentence_vectors: bool = False,
        language: str | None = None,
    ) -> list[ScoredChunk]:
        self._check_vector(vector)
        if k <= 0:
            return []
        pipeline = await self._ensure_pipeline(fusion)
        body = dsl.hybrid_search_body(
            query, vector, k, filters, self.config.hnsw.ef_search, access=access, with_vectors=with_vectors,
            with_sentence_vectors=with_sentence_vectors, fields=dsl.bm25_fields(self.config.languages, language, self.config.neutral_weight),
        )
        # The pipeline is what fuses: without search_pipeline the hybrid query is not normalised.
        response = await self._client.search(index=self.alias, body=body, search_pipeline=pipeline)
        return dsl.scored_hits(response, with_vectors=with_vectors, limit=k)

    async def graph_search(
        self, query: str, hits: list[ScoredChunk], k: int, filters: Filters | None, access: AccessFilter | None,
        *, with_vectors: bool, ppr: bool, hop: bool, options: GraphOptions, language: str | None = None,
    ) -> tuple[list[ScoredChunk], dict[str, Any]]:
        """``hits`` extended by the second hop, from the chunks' graph fields (``opensearch_graph``);
        its follow-up searches read the fields of the query's ``language`` (as ``search_bm25``).
        No personalised PageRank here: ``ppr`` only sets ``info["ppr_unavailable"]``."""
        info: dict[str, Any] = {"ppr_unavailable": 1} if ppr else {}
        if not hop:
            return list(hits[:k]), info
        ranked, facts = await opensearch_graph.second_hop(
            self._client, self.alias, query, hits, k, (filters, access, with_vectors), options,
            fields=dsl.bm25_fields(self.config.languages, language, self.config.neutral_weight),
        )
        return ranked, {**info, **facts}

    # ------------------------------------------------------------------ Catalog

    async def list_documents(
        self, *, tenant: str | None = None, access: AccessFilter | None = None
    ) -> list[DocumentInfo]:
        documents: list[DocumentInfo] = []
        after = None
        while True:
            body = dsl.list_documents_body(PAGE_SIZE, after, tenant, access)
            response = await self._client.search(index=self.alias, body=body)
            aggregation = response["aggregations"]["docs"]
            for bucket in aggregation["buckets"]:
                first = bucket["first"]["hits"]["hits"][0]["_source"]
                documents.append(
                    DocumentInfo(
                        doc_id=bucket["key"]["doc_id"],
                        title=first.get("title", ""),
                        source=first.get("source", ""),
                        chunks=bucket["doc_count"],
                        content_hash=first.get("content_hash"),
                    )
                )
            after_key = aggregation.get("after_key")
            if len(aggregation["buckets"]) < PAGE_SIZE or not after_key:
                return sorted(documents, key=lambda info: info.doc_id)
            after = after_key["doc_id"]

    async def count(self) -> int:
        return int((await self._client.count(index=self.alias))["count"])

    # ------------------------------------------------------------------ helpers

    async def _ensure_pipeline(self, fusion: FusionSettings) -> str:
        """Create (idempotent PUT) the pipeline for ``fusion`` once per process; returns its name."""
        name = dsl.pipeline_name(self.alias, fusion)
        if name not in self._pipelines:
            await self._client.search_pipeline.put(id=name, body=dsl.pipeline_body(fusion))
            self._pipelines.add(name)
        return name

    async def _check_existing_index(self) -> None:
        mappings: dict[str, Any] = await self._client.indices.get_mapping(index=self.alias)
        for index, mapping in mappings.items():
            properties = mapping["mappings"].get("properties", {})
            meta = mapping["mappings"].get("_meta", {})
            dim = properties.get(dsl.VECTOR_FIELD, {}).get("dimension")
            if dim != self.config.dim:
                raise IndexMismatchError(
                    f"index {index} (alias {self.alias}) holds {dim}-dimensional vectors (model "
                    f"{meta.get('model_id')!r}) but the embedder makes {self.config.dim}-dimensional ones; "
                    "use another opensearch_index or re-ingest"
                )
            if self.config.model_id and meta.get("model_id") and meta["model_id"] != self.config.model_id:
                raise IndexMismatchError(
                    f"index {index} (alias {self.alias}) was built with model {meta['model_id']!r}, not "
                    f"{self.config.model_id!r}; vectors of different models are not comparable"
                )
            outdated = dsl.outdated_index_reason(mapping["mappings"], self.config.languages)
            if outdated is not None:
                raise IndexMismatchError(
                    f"index {index} (alias {self.alias}) must be reindexed: {outdated}. Stop ingestion and run "
                    "OpenSearchBackend.reindex_into_new_version() (docs/retriever.md, 'Changing the mapping'): "
                    "it copies the stored vectors, no re-embedding"
                )
            upgrade = dsl.mapping_upgrade_body(mapping["mappings"])
            if upgrade is not None:
                await self._client.indices.put_mapping(index=index, body=upgrade)
                logger.warning(
                    "index %s upgraded in place from template version %s to %s (added %s); its chunks "
                    "written before lack those fields until their documents are ingested again",
                    index, meta.get("template_version"), dsl.TEMPLATE_VERSION, ", ".join(upgrade["properties"]),
                )
            elif meta.get("template_version") != dsl.TEMPLATE_VERSION:
                logger.warning(
                    "index %s has template version %s, this code writes version %s: run reindex_into_new_version",
                    index, meta.get("template_version"), dsl.TEMPLATE_VERSION,
                )

    def _check_vector(self, vector: np.ndarray) -> None:
        size = np.asarray(vector).reshape(-1).shape[0]
        if size != self.config.dim:
            raise ValueError(f"query vector has dimension {size}, index has {self.config.dim}")
