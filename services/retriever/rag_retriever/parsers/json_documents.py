"""JSON (one document object or a list of them) and JSON Lines (one object per line).

Fields are those of ``DocumentIn``; a document without ``source`` gets the file name.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from rag_common.schemas import DocumentIn
from rag_common.upload_formats import JSON, JSONL
from rag_retriever.parsers.base import UploadRejected, decode_text


class JsonParser:
    extensions = JSON.suffixes
    mime_types = JSON.mime_types

    def parse(self, name: str, data: bytes) -> list[DocumentIn]:
        text = decode_text(data)
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise UploadRejected(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
        if isinstance(value, dict):
            return [to_document(name, value, "the document")]
        if isinstance(value, list):
            if not value:
                raise UploadRejected("the JSON list holds no documents")
            return [to_document(name, item, f"item {index}") for index, item in enumerate(value)]
        raise UploadRejected("JSON must be a document object or a list of them")


class JsonLinesParser:
    extensions = JSONL.suffixes
    mime_types = JSONL.mime_types

    def parse(self, name: str, data: bytes) -> list[DocumentIn]:
        text = decode_text(data)
        documents = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise UploadRejected(f"line {number}: invalid JSON: {exc.msg}") from exc
            documents.append(to_document(name, value, f"line {number}"))
        if not documents:
            raise UploadRejected("the file holds no documents")
        return documents


def to_document(name: str, value: Any, where: str) -> DocumentIn:
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
