"""Index backends: where chunks, their vectors and their BM25 postings live."""

from rag_retriever.backends.base import FILTER_FIELDS, Filters, SearchBackend

__all__ = ["FILTER_FIELDS", "Filters", "SearchBackend"]
