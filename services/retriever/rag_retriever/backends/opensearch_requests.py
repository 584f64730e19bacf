"""Every request body the OpenSearch backend sends, and the parsers of the answers: one namespace
(``from rag_retriever.backends import opensearch_requests as dsl``) over the three modules that
build them, each pure functions, no I/O, pinned by the golden tests:

- ``opensearch_index``: template, mapping and its upgrades, physical index and alias, search pipelines;
- ``opensearch_queries``: dense, BM25 and hybrid searches, the second hop's requests, hits parsed;
- ``opensearch_documents``: a document's chunks, the catalog's aggregations, the bulk write.

Split by what a body addresses so each stays small; re-exported here so the backend reads every
body as ``dsl.<name>`` whichever module builds it.
"""

from __future__ import annotations

from rag_retriever.backends.opensearch_documents import (
    METADATA_KEYWORDS,
    bulk_actions,
    bulk_failures,
    chunk_ids_body,
    chunk_source,
    delete_document_body,
    doc_query,
    document_readers_body,
    document_readers_from,
    document_sentence_vectors_body,
    document_vectors_body,
    documents_with_content_body,
    documents_with_content_from,
    fingerprint_body,
    list_documents_body,
    routed_texts,
    scope_clauses,
    sentence_vectors_from_source,
)
from rag_retriever.backends.opensearch_index import (
    ADDED_FIELDS,
    GRAPH_ENTITIES_FIELD,
    GRAPH_TITLE_FIELD,
    NEUTRAL_ANALYZER,
    PIPELINE_SUFFIX,
    REINDEX_SCRIPT,
    REINDEX_VERSION,
    SENTENCE_VECTORS_FIELD,
    TEMPLATE_VERSION,
    TEXT_SOURCES,
    VECTOR_FIELD,
    IndexConfig,
    KnnEngine,
    KnnSpace,
    alias_swap_body,
    analysis_settings,
    analyzer_name,
    create_index_body,
    index_template_body,
    language_field,
    language_mappings,
    mapping_upgrade_body,
    outdated_index_reason,
    physical_index_name,
    pipeline_body,
    pipeline_name,
    reindex_body,
)
from rag_retriever.backends.opensearch_queries import (
    BM25_FIELDS,
    CHUNK_FIELDS,
    FIELD_BOOSTS,
    SOURCE_WITH_BOTH,
    SOURCE_WITH_SENTENCE_VECTORS,
    SOURCE_WITH_VECTOR,
    SOURCE_WITHOUT_VECTOR,
    EntityCounts,
    access_clauses,
    bm25_clause,
    bm25_fields,
    bm25_search_body,
    chunk_from_source,
    dense_score,
    dense_search_body,
    entity_stats_body,
    entity_stats_from,
    filter_clauses,
    follow_up_msearch_body,
    hybrid_search_body,
    knn_clause,
    msearch_hits,
    scored_hits,
    source_filter,
    vector_from_source,
)

__all__ = [
    "ADDED_FIELDS", "BM25_FIELDS", "CHUNK_FIELDS", "FIELD_BOOSTS", "GRAPH_ENTITIES_FIELD",
    "GRAPH_TITLE_FIELD", "METADATA_KEYWORDS", "NEUTRAL_ANALYZER", "PIPELINE_SUFFIX", "REINDEX_SCRIPT",
    "REINDEX_VERSION", "SENTENCE_VECTORS_FIELD", "SOURCE_WITHOUT_VECTOR",
    "SOURCE_WITH_BOTH", "SOURCE_WITH_SENTENCE_VECTORS", "SOURCE_WITH_VECTOR", "TEMPLATE_VERSION", "TEXT_SOURCES",
    "VECTOR_FIELD", "EntityCounts", "IndexConfig", "KnnEngine", "KnnSpace",
    "access_clauses", "alias_swap_body", "analysis_settings", "analyzer_name", "bm25_clause", "bm25_fields",
    "bm25_search_body", "bulk_actions", "bulk_failures", "chunk_from_source", "chunk_ids_body", "chunk_source",
    "create_index_body", "delete_document_body",
    "dense_score", "dense_search_body", "doc_query", "document_readers_body", "document_readers_from",
    "document_sentence_vectors_body", "document_vectors_body", "documents_with_content_body",
    "documents_with_content_from", "entity_stats_body", "entity_stats_from", "filter_clauses", "fingerprint_body",
    "follow_up_msearch_body", "hybrid_search_body", "index_template_body", "knn_clause", "language_field",
    "language_mappings", "list_documents_body", "mapping_upgrade_body", "msearch_hits", "outdated_index_reason",
    "physical_index_name", "pipeline_body", "pipeline_name", "reindex_body", "routed_texts", "scope_clauses",
    "scored_hits", "sentence_vectors_from_source", "source_filter", "vector_from_source",
]
