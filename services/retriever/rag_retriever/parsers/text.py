"""Plain text: one document, titled after the file."""

from __future__ import annotations

from rag_common.schemas import DocumentIn
from rag_common.upload_formats import PLAIN_TEXT
from rag_retriever.parsers.base import decode_text, stem


class PlainTextParser:
    extensions = PLAIN_TEXT.suffixes
    mime_types = PLAIN_TEXT.mime_types

    def parse(self, name: str, data: bytes) -> list[DocumentIn]:
        text = decode_text(data)
        return [DocumentIn(id=name, text=text, title=stem(name), source=name, metadata={"content_type": PLAIN_TEXT.mime_type})]
