"""The reranker service."""
