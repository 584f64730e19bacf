"""Which parser reads an upload: by file name suffix first, else by the upload's MIME type."""

from __future__ import annotations

import logging
import unicodedata
from pathlib import PurePosixPath

from rag_common.schemas import DocumentIn, check_document_id
from rag_common.upload_formats import GENERIC_MIME_TYPES
from rag_retriever.parsers.base import Parser, UploadRejected
from rag_retriever.parsers.html import HtmlParser
from rag_retriever.parsers.json_documents import JsonLinesParser, JsonParser
from rag_retriever.parsers.markdown import MarkdownParser
from rag_retriever.parsers.pdf import PdfParser
from rag_retriever.parsers.text import PlainTextParser

logger = logging.getLogger(__name__)



class ParserRegistry:
    def __init__(self, parsers: list[Parser] | None = None) -> None:
        self._by_extension: dict[str, Parser] = {}
        self._by_mime: dict[str, Parser] = {}
        for parser in parsers or []:
            self.register(parser)

    def register(self, parser: Parser) -> None:
        for extension in parser.extensions:
            self._by_extension[extension.lower()] = parser
        for mime in parser.mime_types:
            self._by_mime.setdefault(mime.lower(), parser)

    @property
    def extensions(self) -> list[str]:
        return list(self._by_extension)

    def find(self, name: str, content_type: str | None = None) -> Parser | None:
        suffix = PurePosixPath(name).suffix.lower()
        if suffix in self._by_extension:
            return self._by_extension[suffix]
        mime = (content_type or "").split(";", 1)[0].strip().lower()
        return None if mime in GENERIC_MIME_TYPES else self._by_mime.get(mime)

    def parse_upload(
        self, filename: str | None, data: bytes, max_bytes: int, content_type: str | None = None
    ) -> list[DocumentIn]:
        """The documents in one uploaded file; raises :class:`UploadRejected` with the reason otherwise.

        ``data`` may be cut at ``max_bytes + 1``: the caller needs to read no more to know it is too
        big. The file name's suffix picks the parser; ``content_type`` is used only when the name
        has no known suffix.
        """
        name = upload_name(filename)
        if not name:
            raise UploadRejected("the file has no name")
        try:
            # The name becomes the document id (Markdown, text, PDF, HTML): refused here with its reason.
            check_document_id(name)
        except ValueError as exc:
            raise UploadRejected(f"the file name cannot be a document id: {exc}") from exc
        parser = self.find(name, content_type)
        if parser is None:
            suffix = PurePosixPath(name).suffix.lower()
            described = suffix or "(none)"
            if content_type and content_type.split(";", 1)[0].strip().lower() not in GENERIC_MIME_TYPES:
                described += f" ({content_type})"
            raise UploadRejected(f"unsupported file type {described!r}; supported: {', '.join(self.extensions)}")
        if len(data) > max_bytes:
            raise UploadRejected(f"file is larger than the upload limit of {max_bytes / (1024 * 1024):g} MiB")
        if not data.strip():
            raise UploadRejected("file is empty")
        try:
            return parser.parse(name, data)
        except UploadRejected:
            raise
        except Exception as exc:  # noqa: BLE001 - one unreadable file must not fail the batch
            logger.exception("parser %s failed on %s", type(parser).__name__, name)
            raise UploadRejected(f"could not be parsed: {type(exc).__name__}") from exc


def default_registry() -> ParserRegistry:
    return ParserRegistry(
        [PlainTextParser(), MarkdownParser(), JsonParser(), JsonLinesParser(), PdfParser(), HtmlParser()]
    )


#: What is trimmed off an upload's name: white space, but no control or format character (``str.strip``
#: would take a trailing tab, U+001F or U+0085 off, and the name would pass for a valid document id).
_NAME_PADDING = "".join(
    char for char in map(chr, range(0x3001)) if char.isspace() and unicodedata.category(char) not in ("Cc", "Cf")
)


def upload_name(filename: str | None) -> str:
    # Browsers and curl send a bare name, but some clients send a path; only the name identifies it.
    return PurePosixPath((filename or "").replace("\\", "/")).name.strip(_NAME_PADDING)
