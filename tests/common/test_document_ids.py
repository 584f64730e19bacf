"""Which characters a document id may hold (issue 29): none of Unicode's control (Cc) or format
(Cf) characters, anywhere, checked by ``check_document_id`` and stated by ``DOCUMENT_ID_PATTERN``
(the OpenAPI documents' pattern, which schemathesis generates ids from: the two must agree)."""

from __future__ import annotations

import re
import sys
import unicodedata

import pytest
from pydantic import TypeAdapter, ValidationError

from rag_common.schemas import CONTROL_OR_FORMAT_RANGES, DOCUMENT_ID_PATTERN, DocumentId, DocumentIn, check_document_id

#: As a JSON Schema validator reads it: ECMA-262's "$" is the end of the string (Python's also matches
#: before a final newline).
PATTERN = re.compile(DOCUMENT_ID_PATTERN.removesuffix("$") + r"\Z")


def test_the_table_is_every_control_and_format_character_of_this_python() -> None:
    listed = {code for low, high in CONTROL_OR_FORMAT_RANGES for code in range(low, high + 1)}
    expected = {code for code in range(sys.maxunicode + 1) if unicodedata.category(chr(code)) in ("Cc", "Cf")}
    assert listed == expected, f"update CONTROL_OR_FORMAT_RANGES for Unicode {unicodedata.unidata_version}"


@pytest.mark.parametrize(
    "char",
    ["\n", "\x00", "\t", "\x7f", "\x85", "\u00ad", "\u200b", "\u200d", "\u200e", "\u202e", "\u2066", "\ufeff", "\U000e0041"],
)
@pytest.mark.parametrize("where", ["{}", "a{}", "{}b", "a{}b"])
def test_a_control_or_format_character_anywhere_is_refused_with_its_code_point(char: str, where: str) -> None:
    value = where.format(char)
    kind = "control" if unicodedata.category(char) == "Cc" else "format"
    with pytest.raises(ValueError, match=f"the {kind} character U\\+{ord(char):04X}"):
        check_document_id(value)
    assert not PATTERN.search(value)
    with pytest.raises(ValidationError):
        DocumentIn.model_validate({"id": value, "text": "x"})


@pytest.mark.parametrize("value", ["a", "Über (1).pdf", "notes#2?v=1/final", "x y", "100%", "日本語.md", "emoji 🎉", "a\u00a0b"])
def test_printable_ids_pass_both(value: str) -> None:
    assert check_document_id(value) == value
    assert PATTERN.search(value)
    assert TypeAdapter(DocumentId).validate_python(value) == value


def test_the_pattern_is_portable() -> None:
    # \uXXXX escapes in the BMP (Python's re and ECMA-262 read them alike); no \x, \Z or lookaround.
    assert "\\x" not in DOCUMENT_ID_PATTERN and "\\Z" not in DOCUMENT_ID_PATTERN and "(?" not in DOCUMENT_ID_PATTERN
    assert "\\u200b-\\u200f" in DOCUMENT_ID_PATTERN


def test_a_very_long_id_is_refused_for_its_length_first() -> None:
    with pytest.raises(ValueError, match="longer than 512"):
        check_document_id("\u00a0" * 5_000_000)
