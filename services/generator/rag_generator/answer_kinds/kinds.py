"""The kinds of answer a question can want, and a typed value found in a sentence."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["AnswerKind", "ValueSpan"]


class AnswerKind(StrEnum):
    """What a question asks for, or what a value is.

    ``DATE`` includes a bare year, a decade and a century; ``NUMBER`` includes quantities, money and
    percentages; ``DESCRIPTION`` is a definition, a description, a reason or a manner (why/how/what is);
    ``UNKNOWN`` is what the rules cannot tell (most "what ..." questions about things).
    """

    PERSON = "person"
    PLACE = "place"
    DATE = "date"
    NUMBER = "number"
    ORGANISATION = "organisation"
    YES_NO = "yes_no"
    DESCRIPTION = "description"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class ValueSpan:
    """A typed value in a sentence: ``sentence[start:end] == text``.

    ``normalised`` is the value in a form that compares across passages and languages: a date as
    ``2019-01-01``, ``2019-01``, ``--01-01`` (no year) or ``2019``, a decade as ``1990s``, a century
    as ``century 19``; a number as its shortest decimal (``1500``, ``1500.5``) with ``%`` or an ISO
    currency code appended (``50%``, ``1500.5 RON``); a name case-folded, diacritics folded, leading
    article dropped and spaces collapsed (``universitatea din bucuresti``).
    """

    kind: AnswerKind
    start: int
    end: int
    text: str
    normalised: str
