"""The embedded index's tantivy part: the schema, a chunk as a tantivy document, every query the
index asks (BM25, field filters, tenant and access clauses, ids and labels) and its one writer. The
text fields and their analysis per language are ``analyzers``'.

Tantivy is the source of truth: every chunk is stored here together with its vector (the exact
float32 bytes upserted, which ``with_vectors`` returns, not hnswlib's re-normalised copy) and the
integer label it has in the HNSW graph (``vector_graph``).

Access (``AccessFilter``) is enforced inside the query: the BM25 query is the user's query AND
``tenant`` AND any of the ``readers`` (``restricted``); the ANN side asks ``access_map``.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Iterable
from pathlib import Path

import numpy as np
import tantivy
from tantivy import Occur, Query

from rag_retriever.backends.base import AccessFilter, Filters
from rag_retriever.backends.embedded.analyzers import LANGUAGE_FIELD, LexicalFields
from rag_retriever.records import ChunkRecord, ScoredChunk

_KEYWORD_FIELDS = (
    "chunk_id", "doc_id", "source", "tenant", "content_type", "content_hash", "readers", LANGUAGE_FIELD,
)
#: The format that added each keyword field not in format 1.
_FIELD_SINCE = {"content_hash": 2, "readers": 3, LANGUAGE_FIELD: 4}
#: Keyword fields that aggregations read (``list_documents``, ``documents_with_content``).
_FAST_FIELDS = ("doc_id", "content_hash")
#: The format whose text fields are per language (``analyzers``); before it, ``text``/``title`` in ``en_stem``.
_LANGUAGE_FIELDS_SINCE = 4
WRITER_HEAP_BYTES = 50_000_000


def lexical_fields(format_version: int, languages: Collection[str]) -> LexicalFields:
    """The text fields of ``format_version`` for the configured ``languages``."""
    if format_version < _LANGUAGE_FIELDS_SINCE:
        return LexicalFields.english_stemmed()
    return LexicalFields.of(languages)


def build_schema(format_version: int, lexical: LexicalFields) -> tantivy.Schema:
    """The tantivy schema of ``format_version`` with the text fields ``lexical`` (older formats lack
    fields; the upgrade re-reads their chunks)."""
    builder = tantivy.SchemaBuilder()
    for name in _KEYWORD_FIELDS:
        if _FIELD_SINCE.get(name, 1) > format_version:
            continue
        # "raw" keeps the whole value as one term: filters and deletes are exact matches.
        builder.add_text_field(name, fast=(name in _FAST_FIELDS), tokenizer_name="raw", index_option="basic")
    lexical.add_to_schema(builder)
    builder.add_unsigned_field("label", indexed=True, fast=True)
    builder.add_bytes_field("payload", stored=True)
    builder.add_bytes_field("vector", stored=True)
    return builder.build()


def to_document(chunk: ChunkRecord, vector: np.ndarray, label: int, lexical: LexicalFields) -> tantivy.Document:
    document = tantivy.Document()
    keywords = {
        "chunk_id": chunk.chunk_id,
        "doc_id": chunk.doc_id,
        "source": chunk.source,
        "tenant": chunk.tenant,
        "content_type": chunk.content_type,
        "content_hash": chunk.content_hash,
    }
    for field, value in keywords.items():
        if value is not None:
            document.add_text(field, value)
    for reader in chunk.readers:
        document.add_text("readers", reader)
    lexical.add_to_document(document, chunk)
    document.add_unsigned("label", label)
    document.add_bytes("payload", json.dumps(chunk.to_payload(), ensure_ascii=False).encode("utf-8"))
    document.add_bytes("vector", np.asarray(vector, dtype="<f4").tobytes())
    return document


def record(searcher: tantivy.Searcher, address: tantivy.DocAddress) -> ChunkRecord:
    return ChunkRecord.from_payload(json.loads(searcher.doc(address).get_first("payload")))


def scored(document: tantivy.Document, score: float, with_vectors: bool) -> ScoredChunk:
    chunk = ChunkRecord.from_payload(json.loads(document.get_first("payload")))
    # The stored little-endian float32 bytes, copied into a writable native array.
    vector = np.frombuffer(document.get_first("vector"), dtype="<f4").astype(np.float32) if with_vectors else None
    return ScoredChunk(chunk, score, vector)


def all_hits(searcher: tantivy.Searcher, query: tantivy.Query) -> list[tantivy.DocAddress]:
    return [address for _, address in searcher.search(query, limit=max(1, searcher.num_docs)).hits]


class TextIndex:
    """The tantivy index in ``path`` of ``schema``, with its text fields and their analyzers
    (``lexical``) and its one writer (whose operations stay invisible until ``commit``)."""

    def __init__(
        self, path: Path, schema: tantivy.Schema, lexical: LexicalFields, index_dir: Path, neutral_weight: float = 1.0
    ) -> None:
        self.schema = schema
        self.lexical = lexical
        self.neutral_weight = neutral_weight
        path.mkdir(exist_ok=True)
        self.index = tantivy.Index(schema, path=str(path), reuse=True)
        lexical.register(self.index)
        try:
            self.writer = self.index.writer(heap_size=WRITER_HEAP_BYTES, num_threads=1)
        except ValueError as exc:
            raise RuntimeError(f"index at {index_dir} is locked (in use by another process?): {exc}") from exc
        # A writer killed between writing a commit's files and swapping tantivy's meta.json leaves those
        # files behind, and the next commit reuses its opstamps, so it names its delete file
        # `<segment>.<opstamp>.del` exactly as the dead one did: the write fails (FileAlreadyExists), or
        # a later garbage collection takes the new file for the leftover and the acknowledged deletes
        # are undone. Collecting now, before any commit of ours, removes the leftovers first
        # (tests/retriever/test_retriever_crash_consistency.py, the stale-delete-file test).
        self.writer.garbage_collect_files()

    # ------------------------------------------------------------------ the writer

    def queue_write(
        self, removed: list[tantivy.Query], chunk_ids: Iterable[str], labels: list[int], chunks: list[ChunkRecord],
        vectors: np.ndarray,
    ) -> None:
        """Queue a write's deletes (``removed``, and the chunks of ``chunk_ids``) and its documents:
        invisible until ``commit``, dropped by ``rollback``."""
        for query in removed:
            self.writer.delete_documents_by_query(query)
        for chunk_id in chunk_ids:
            self.writer.delete_documents_by_term("chunk_id", chunk_id)
        for label, chunk, vector in zip(labels, chunks, vectors, strict=True):
            self.writer.add_document(to_document(chunk, vector, label, self.lexical))

    def close(self) -> None:
        try:
            self.writer.wait_merging_threads()
        finally:
            # Dropping the writer releases tantivy's directory lock, so the index can be reopened.
            self.writer = None

    # ------------------------------------------------------------------ queries

    def doc_query(self, doc_id: str, tenant: str | None = None) -> tantivy.Query:
        return self.in_tenant(Query.term_query(self.schema, "doc_id", doc_id), tenant)

    def in_tenant(self, query: tantivy.Query, tenant: str | None) -> tantivy.Query:
        """``query`` AND ``tenant`` (None: any tenant)."""
        if tenant is None:
            return query
        in_tenant = Query.term_query(self.schema, "tenant", tenant)
        return Query.boolean_query([(Occur.Must, query), (Occur.Must, in_tenant)])

    def access_query(self, access: AccessFilter) -> tantivy.Query:
        """The chunks ``access`` may read: its tenant AND any of its principals among the readers."""
        return Query.boolean_query(
            [
                (Occur.Must, Query.term_query(self.schema, "tenant", access.tenant)),
                (Occur.Must, Query.term_set_query(self.schema, "readers", list(access.principals))),
            ]
        )

    def restricted(self, filter_query: tantivy.Query | None, access: AccessFilter | None) -> tantivy.Query | None:
        """The field filters AND the access filter (either may be absent)."""
        if access is None:
            return filter_query
        access_query = self.access_query(access)
        if filter_query is None:
            return access_query
        return Query.boolean_query([(Occur.Must, filter_query), (Occur.Must, access_query)])

    def filter_query(self, filters: Filters | None) -> tantivy.Query | None:
        """One exact term-set clause per field (AND across fields, OR within one). ``filters`` as
        ``base.normalise_filters`` made them (known fields, each a list): taken as they are."""
        if not filters:
            return None
        clauses = [(Occur.Must, Query.term_set_query(self.schema, field, values)) for field, values in filters.items()]
        return Query.boolean_query(clauses)

    def bm25_query(
        self, searcher: tantivy.Searcher, query: str, filters: Filters | None, access: AccessFilter | None,
        language: str | None = None,
    ) -> tantivy.Query | None:
        """BM25 over text and title (the fields ``lexical.query_groups`` names for ``language`` and
        the languages ``searcher`` holds, scores summed), restricted by the field filters and the
        caller's access; None when the query has no term."""
        filter_query = self.restricted(self.filter_query(filters), access)
        clauses = self.lexical.clauses(
            self.schema, query, language, self.lexical.present(searcher), self.neutral_weight
        )
        if not clauses:
            return None
        text_query = Query.boolean_query(clauses)
        if filter_query is not None:
            # Constant score 0: the filter decides membership and leaves the BM25 score untouched.
            text_query = Query.boolean_query(
                [(Occur.Must, text_query), (Occur.Must, Query.const_score_query(filter_query, 0.0))]
            )
        return text_query

    def terms_query(self, field: str, values: Collection[str] | Collection[int]) -> tantivy.Query:
        """Any of ``values`` in ``field`` (``chunk_id``, ``content_hash``, ``label``)."""
        return Query.term_set_query(self.schema, field, list(values))

    def labels_query(self, labels: Iterable[int]) -> tantivy.Query:
        return self.terms_query("label", [int(label) for label in labels])

    # ------------------------------------------------------------------ reads

    def labels_matching(self, searcher: tantivy.Searcher, query: tantivy.Query) -> list[int]:
        addresses = all_hits(searcher, query)
        return [int(label) for label in searcher.fast_field_values("label", addresses)] if addresses else []

    def labels_replaced(
        self, searcher: tantivy.Searcher, chunk_ids: Collection[str], removed: list[tantivy.Query]
    ) -> set[int]:
        """The labels a write replaces: the stored chunks of ``chunk_ids`` and those ``removed`` matches."""
        replaced = set(self.labels_matching(searcher, self.terms_query("chunk_id", chunk_ids)))
        for query in removed:
            replaced.update(self.labels_matching(searcher, query))
        return replaced

    def records_matching(self, searcher: tantivy.Searcher, query: tantivy.Query) -> list[ChunkRecord]:
        return [record(searcher, address) for address in all_hits(searcher, query)]

    def documents_by_label(self, searcher: tantivy.Searcher, labels: Iterable[int]) -> dict[int, tantivy.Document]:
        addresses = all_hits(searcher, self.labels_query(labels))
        if not addresses:
            return {}
        found = searcher.fast_field_values("label", addresses)
        return {int(label): searcher.doc(address) for label, address in zip(found, addresses, strict=True)}

    @staticmethod
    def stored_chunks(searcher: tantivy.Searcher) -> dict[int, tantivy.DocAddress]:
        """Every stored chunk's label -> address."""
        addresses = all_hits(searcher, Query.all_query()) if searcher.num_docs else []
        labels = searcher.fast_field_values("label", addresses) if addresses else []
        return {int(label): address for label, address in zip(labels, addresses, strict=True)}

    @staticmethod
    def stored_vectors(searcher: tantivy.Searcher, addresses: Iterable[tantivy.DocAddress]) -> np.ndarray:
        """The stored vectors of ``addresses``, one row each (little-endian float32)."""
        return np.stack([np.frombuffer(searcher.doc(address).get_first("vector"), dtype="<f4") for address in addresses])
