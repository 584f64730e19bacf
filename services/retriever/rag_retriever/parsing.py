"""Uploaded files → documents. One parser per format; a file that cannot be read is rejected whole.

Formats: ``.txt`` (plain text), ``.md``/``.markdown`` (chunked along its headings), ``.json`` (one
document object or a list of them, fields as in ``DocumentIn``) and ``.jsonl`` (one document object
per line). A file's document id is its file name, unless its JSON gives one.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any

from pydantic import ValidationError

from rag_common.schemas import DocumentIn

MARKDOWN = "text/markdown"
PLAIN_TEXT = "text/plain"


class UploadRejected(ValueError):
    """The file cannot be ingested; the message says why, for the client."""


def parse_text(name: str, text: str) -> list[DocumentIn]:
    title = PurePosixPath(name).stem
    return [DocumentIn(id=name, text=text, title=title, source=name, metadata={"content_type": PLAIN_TEXT})]


def parse_markdown(name: str, text: str) -> list[DocumentIn]:
    title = _markdown_title(text) or PurePosixPath(name).stem
    return [DocumentIn(id=name, text=text, title=title, source=name, metadata={"content_type": MARKDOWN})]


def parse_json(name: str, text: str) -> list[DocumentIn]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UploadRejected(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    if isinstance(value, dict):
        return [_document(name, value, "the document")]
    if isinstance(value, list):
        if not value:
            raise UploadRejected("the JSON list holds no documents")
        return [_document(name, item, f"item {index}") for index, item in enumerate(value)]
    raise UploadRejected("JSON must be a document object or a list of them")


def parse_jsonl(name: str, text: str) -> list[DocumentIn]:
    documents = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UploadRejected(f"line {number}: invalid JSON: {exc.msg}") from exc
        documents.append(_document(name, value, f"line {number}"))
    if not documents:
        raise UploadRejected("the file holds no documents")
    return documents


PARSERS: dict[str, Callable[[str, str], list[DocumentIn]]] = {
    ".txt": parse_text,
    ".md": parse_markdown,
    ".markdown": parse_markdown,
    ".json": parse_json,
    ".jsonl": parse_jsonl,
}


def parse_upload(filename: str | None, data: bytes, max_bytes: int) -> list[DocumentIn]:
    """The documents in one uploaded file; raises :class:`UploadRejected` with the reason otherwise.

    ``data`` may be cut at ``max_bytes + 1``: the caller needs to read no more to know it is too big.
    """
    name = upload_name(filename)
    if not name:
        raise UploadRejected("the file has no name")
    suffix = PurePosixPath(name).suffix.lower()
    parser = PARSERS.get(suffix)
    if parser is None:
        raise UploadRejected(f"unsupported file type {suffix or '(none)'!r}; supported: {', '.join(PARSERS)}")
    if len(data) > max_bytes:
        raise UploadRejected(f"file is larger than the upload limit of {max_bytes / (1024 * 1024):g} MiB")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UploadRejected(f"file is not UTF-8 text (invalid byte at offset {exc.start})") from exc
    if "\x00" in text:
        raise UploadRejected("file is binary, not text")
    if not text.strip():
        raise UploadRejected("file is empty")
    return parser(name, text)


def upload_name(filename: str | None) -> str:
    # Browsers and curl send a bare name, but some clients send a path; only the name identifies it.
    return PurePosixPath((filename or "").replace("\\", "/")).name.strip()


def _document(name: str, value: Any, where: str) -> DocumentIn:
    if not isinstance(value, dict):
        raise UploadRejected(f"{where}: expected a JSON object, got {type(value).__name__}")
    try:
        document = DocumentIn.model_validate(value)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'document'}: {e['msg']}" for e in exc.errors())
        raise UploadRejected(f"{where}: {problems}") from exc
    if not document.source:
        document = document.model_copy(update={"source": name})
    return document


def _markdown_title(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# "):
            return stripped[2:].strip().rstrip("#").strip()
        if stripped:
            return ""
    return ""
