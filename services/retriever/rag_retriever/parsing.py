"""Compatibility module: the parsers live in :mod:`rag_retriever.parsers` (one per format)."""

from __future__ import annotations

from rag_retriever.parsers import (
    HTML,
    MARKDOWN,
    PDF,
    PLAIN_TEXT,
    REGISTRY,
    Parser,
    ParserRegistry,
    UploadRejected,
    parse_upload,
    upload_name,
)

__all__ = [
    "HTML", "MARKDOWN", "PDF", "PLAIN_TEXT", "REGISTRY", "Parser", "ParserRegistry", "UploadRejected",
    "parse_upload", "upload_name",
]
