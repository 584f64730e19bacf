"""The building blocks of every wire model: ids, language codes, bounds and ``WireModel``."""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    StringConstraints,
    WithJsonSchema,
)


SearchMode = Literal["dense", "bm25", "hybrid"]
#: What a message asks for: ``rag`` needs the documents; ``chitchat`` (greeting, thanks) and ``meta``
#: (about the conversation itself) are answered without retrieval; ``out_of_scope`` is declined.
Intent = Literal["rag", "chitchat", "meta", "out_of_scope"]

def _supported_language(code: str) -> str:
    from rag_common.languages.registry import language

    return language(code).code  # UnsupportedLanguageError (a ValueError): a 422 naming the choices


#: An ISO 639-1 code of a language the product analyses (``rag_common.languages.LANGUAGES``).
LanguageCode = Annotated[str, AfterValidator(_supported_language)]

#: Upper bound on a user message, in characters (about 2k tokens). Longer input is a 422.
MAX_MESSAGE_CHARS = 8000
#: Upper bound on the passages an answer is written from (``ChatRequest.top_k``, generator input).
MAX_TOP_K = 50
#: Upper bound on the candidates one search or rerank returns (``SearchRequest``/``RerankRequest.top_k``).
MAX_SEARCH_TOP_K = 200

#: Unicode's control (Cc) and format (Cf) characters, as ranges of code points (Unicode 14.0, the
#: ``unicodedata`` of Python 3.11; tests/common/test_document_ids.py checks the table against
#: ``unicodedata.category`` on every code point). Format characters are invisible: zero-width
#: spaces and joiners, bidirectional overrides (U+202E shows ``exe.txt`` for ``txt.exe``), the BOM.
CONTROL_OR_FORMAT_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x001F), (0x007F, 0x009F), (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C),
    (0x06DD, 0x06DD), (0x070F, 0x070F), (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E),
    (0x200B, 0x200F), (0x202A, 0x202E), (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB), (0x110BD, 0x110BD), (0x110CD, 0x110CD), (0x13430, 0x13438), (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A), (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)


def _code_point(value: int) -> str:
    # \uXXXX reads the same in Python's re and ECMA-262; a code point past the BMP is written as
    # itself (JSON Schema patterns are read with ECMA's "u" flag, where it is one character).
    return f"\\u{value:04x}" if value <= 0xFFFF else chr(value)


_CONTROL_OR_FORMAT_CLASS = "".join(
    _code_point(low) if low == high else f"{_code_point(low)}-{_code_point(high)}"
    for low, high in CONTROL_OR_FORMAT_RANGES
)
_CONTROL_OR_FORMAT_CATEGORIES = frozenset({"Cc", "Cf"})

#: A document id: 1-512 characters, no control or format character (Unicode Cc, Cf: they cannot
#: travel in a URL path or a log line intact, or they hide what the id says), not blank, and not
#: ``.`` or ``..`` (a URL path would resolve them). So file names (spaces, accents, ``#``, ``?``,
#: ``/``) are ids as they are; wherever an id goes into a URL it is percent-encoded as one path segment.
DOCUMENT_ID_PATTERN = (
    f"^[^{_CONTROL_OR_FORMAT_CLASS}]*[^\\s{_CONTROL_OR_FORMAT_CLASS}][^{_CONTROL_OR_FORMAT_CLASS}]*$"
)
MAX_DOCUMENT_ID_CHARS = 512
#: A conversation id as the gateway issues them (``uuid4().hex``), with room for other issuers.
CONVERSATION_ID_PATTERN = r"^[A-Za-z0-9_-]{1,128}$"
_NOT_SPACE = re.compile(r"\S")


def control_or_format_character(value: str) -> str | None:
    """The first control or format character (Unicode category Cc or Cf) in ``value``, if any."""
    if value.isprintable():  # the usual case, in C: printable text holds neither
        return None
    return next((char for char in value if unicodedata.category(char) in _CONTROL_OR_FORMAT_CATEGORIES), None)


def check_document_id(value: str) -> str:
    """``value`` if it is a valid document id (see ``DOCUMENT_ID_PATTERN``), else ValueError saying why."""
    # The length first: the character scan below then reads at most 512 characters.
    if len(value) > MAX_DOCUMENT_ID_CHARS:
        raise ValueError(f"document id is longer than {MAX_DOCUMENT_ID_CHARS} characters")
    # Control and format characters before blankness: a lone tab or CR is "blank" too, but the
    # control character is the reason worth naming.
    if (char := control_or_format_character(value)) is not None:
        kind = "control" if unicodedata.category(char) == "Cc" else "format"
        raise ValueError(f"document id contains the {kind} character U+{ord(char):04X}")
    if not _NOT_SPACE.search(value):
        raise ValueError("document id is blank")
    if value in {".", ".."}:
        raise ValueError("'.' and '..' are not document ids")
    return value


DocumentId = Annotated[
    str,
    AfterValidator(check_document_id),
    WithJsonSchema(
        {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_DOCUMENT_ID_CHARS,
            "pattern": DOCUMENT_ID_PATTERN,
            "not": {"enum": [".", ".."]},
        }
    ),
]
ConversationId = Annotated[str, StringConstraints(pattern=CONVERSATION_ID_PATTERN)]


def _integral_number(value: Any) -> Any:
    # JSON Schema's "integer" is any number with no fraction, so 5.0 is one; strict mode alone would refuse it.
    return int(value) if isinstance(value, float) and value.is_integer() else value


#: An integer as JSON Schema means it: 5 and 5.0, never true or "5".
JsonInt = Annotated[int, BeforeValidator(_integral_number)]

#: The fields a search may filter on (``SearchRequest.filters``): keyword fields of every chunk.
SearchFilterField = Literal["doc_id", "source", "tenant", "content_type"]
SEARCH_FILTER_FIELDS: tuple[str, ...] = get_args(SearchFilterField)
#: JSON Schema of a string with some non-space character in it (pattern matching is a search).
NOT_BLANK = {"pattern": r"\S"}


class WireModel(BaseModel):
    """Base for wire models: unknown fields are rejected so typos surface as 422s, and JSON types are
    taken as the schema says (strict: ``0`` is not ``false``, ``false`` is not ``0.0``, ``"5"`` is not ``5``)."""

    model_config = ConfigDict(extra="forbid", strict=True)
