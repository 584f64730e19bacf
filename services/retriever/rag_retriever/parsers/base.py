"""What every parser shares: the :class:`Parser` protocol, the rejection error and text decoding."""

from __future__ import annotations

from pathlib import PurePosixPath
from typing import Protocol

from rag_common.schemas import DocumentIn



class UploadRejected(ValueError):
    """The file cannot be ingested; the message says why, for the client."""


class Parser(Protocol):
    """Turns one uploaded file into documents, or raises :class:`UploadRejected` with the reason.

    ``data`` is the whole file, already checked to be non-empty and within the upload limit. The
    documents' text is Markdown-like for structured formats: headings as ``#`` lines, tables as pipe
    tables, PDF pages separated by form feeds (``\\f``); the chunker reads that structure back.
    """

    #: Lower-case file name suffixes, dot included (``".md"``): its ``rag_common.upload_formats`` entry's.
    extensions: tuple[str, ...]
    #: MIME types (no parameters) that select this parser when the name has no known suffix.
    mime_types: tuple[str, ...]

    def parse(self, name: str, data: bytes) -> list[DocumentIn]: ...


def decode_text(data: bytes) -> str:
    """UTF-8 text (a BOM is dropped); rejects other encodings, binary data and blank files."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UploadRejected(f"file is not UTF-8 text (invalid byte at offset {exc.start})") from exc
    if "\x00" in text:
        raise UploadRejected("file is binary, not text")
    if not text.strip():
        raise UploadRejected("file is empty")
    return text


def stem(name: str) -> str:
    return PurePosixPath(name).stem
