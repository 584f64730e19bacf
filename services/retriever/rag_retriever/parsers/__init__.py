"""Uploaded files → documents: one parser per format behind the :class:`Parser` protocol, picked by
the :class:`ParserRegistry` from the file name's suffix (else the upload's MIME type).

| format | suffixes | module |
|---|---|---|
| plain text | ``.txt`` | ``text.py`` |
| Markdown | ``.md``, ``.markdown`` | ``markdown.py`` |
| JSON / JSON Lines documents | ``.json``, ``.jsonl`` | ``json_documents.py`` |
| PDF (pages, tables) | ``.pdf`` | ``pdf.py`` |
| HTML (main content, tables) | ``.html``, ``.htm``, ``.xhtml`` | ``html.py`` |

A file that cannot be read is rejected whole with a reason (:class:`UploadRejected`); the other
files of the request still go in.
"""

from __future__ import annotations

from rag_common.schemas import DocumentIn
from rag_retriever.parsers.base import Parser, UploadRejected
from rag_retriever.parsers.registry import ParserRegistry, default_registry, upload_name

REGISTRY = default_registry()


def parse_upload(
    filename: str | None, data: bytes, max_bytes: int, content_type: str | None = None
) -> list[DocumentIn]:
    """See :meth:`ParserRegistry.parse_upload`; uses the default registry."""
    return REGISTRY.parse_upload(filename, data, max_bytes, content_type)


__all__ = [
    "REGISTRY", "Parser", "ParserRegistry", "UploadRejected", "default_registry", "parse_upload", "upload_name",
]
