"""The file formats the upload endpoint accepts: suffixes and MIME types, in one table.

Part of the contract between the retriever (whose parsers are registered under these names) and
its clients (``ragctl ingest`` filters directories and names fetched URLs by them), so both read
this table instead of keeping copies.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class UploadFormat:
    #: The canonical MIME type (the one a parsed document records as ``content_type``).
    mime_type: str
    #: Lower-case file name suffixes, dot included; the first is the one a client gives a fetched URL.
    suffixes: tuple[str, ...]
    #: Other MIME types meaning the same format.
    mime_aliases: tuple[str, ...] = ()

    @property
    def mime_types(self) -> tuple[str, ...]:
        return (self.mime_type, *self.mime_aliases)


PLAIN_TEXT = UploadFormat("text/plain", (".txt",))
MARKDOWN = UploadFormat("text/markdown", (".md", ".markdown"), ("text/x-markdown",))
HTML = UploadFormat("text/html", (".html", ".htm", ".xhtml"), ("application/xhtml+xml",))
PDF = UploadFormat("application/pdf", (".pdf",), ("application/x-pdf",))
JSON = UploadFormat("application/json", (".json",))
JSONL = UploadFormat("application/jsonl", (".jsonl",), ("application/x-ndjson", "application/jsonlines"))

UPLOAD_FORMATS: tuple[UploadFormat, ...] = (PLAIN_TEXT, MARKDOWN, HTML, PDF, JSON, JSONL)
SUPPORTED_SUFFIXES = frozenset(suffix for fmt in UPLOAD_FORMATS for suffix in fmt.suffixes)
#: MIME types that say nothing about the format (curl and many clients send these): the name decides.
GENERIC_MIME_TYPES = frozenset(
    {"", "application/octet-stream", "binary/octet-stream", "application/x-www-form-urlencoded"}
)


def format_for_mime(content_type: str | None) -> UploadFormat | None:
    """The format a MIME type (parameters ignored) names, or None for generic and unknown types."""
    mime = (content_type or "").split(";", 1)[0].strip().lower()
    return next((fmt for fmt in UPLOAD_FORMATS if mime in fmt.mime_types), None)

#: The optional ``acl`` form field of a multipart upload (the gateway's and the retriever's OpenAPI).
UPLOAD_LANGUAGE_DESCRIPTION = (
    "The uploaded documents' language (ISO 639-1, one of RAG_LANGUAGES, e.g. ro): they are analysed in it. Absent: "
    "each document's language is identified from its text. Applies to every document of the upload that declares "
    "none of its own (documents in a .json/.jsonl file may declare one each)."
)
UPLOAD_ACL_DESCRIPTION = (
    'Who in the tenant may read the uploaded documents: JSON {"groups": [...], "users": [...]}. Absent: '
    "everyone in the tenant. Applies to every document of the upload that carries no ACL of its own "
    "(documents in a .json/.jsonl file may carry one each)."
)
