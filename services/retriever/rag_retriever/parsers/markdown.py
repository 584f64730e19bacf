"""Markdown: one document, titled by its first line if that is a level-1 heading.

The chunker follows the heading structure (``section_path``) and keeps pipe tables whole.
"""

from __future__ import annotations

from rag_common.schemas import DocumentIn
from rag_common.upload_formats import MARKDOWN
from rag_retriever.parsers.base import decode_text, stem


class MarkdownParser:
    extensions = MARKDOWN.suffixes
    mime_types = MARKDOWN.mime_types

    def parse(self, name: str, data: bytes) -> list[DocumentIn]:
        text = decode_text(data)
        title = markdown_title(text) or stem(name)
        return [DocumentIn(id=name, text=text, title=title, source=name, metadata={"content_type": MARKDOWN.mime_type})]


def markdown_title(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("# "):
            return stripped[2:].strip().rstrip("#").strip()
        if stripped:
            return ""
    return ""
