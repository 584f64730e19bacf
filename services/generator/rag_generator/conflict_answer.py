"""What a user reads when the sources disagree: "The sources disagree: A [1]; B [2]." and ``conflict``.

The statement names every side (``conflicts.DetectedConflict``) with the sentence that states it, so
each value's sentence is a citation like any other (``answer_assembly.cite``); the response's
``conflict`` lists each value with the numbers of the citations that state it. The lead-in is the
catalog's ``sources_disagree`` in the answer's language.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rag_common.messages import message
from rag_common.schemas import Conflict, ConflictValue
from rag_generator.answer_assembly import AnswerPart, CitedAnswer
from rag_generator.conflicts import DetectedConflict
from rag_generator.evidence import EvidenceUnit

__all__ = ["conflict_of", "disagreement_parts", "sides_cited", "with_disagreement"]


def disagreement_parts(conflict: DetectedConflict, language: str | None) -> list[AnswerPart]:
    """``sources_disagree`` then each side's value citing its best sentence: "…: A [1]; B [2]."."""
    last = len(conflict.sides) - 1
    sides = [
        AnswerPart(" ".join(side.value.split()), side.units[:1], after="." if n == last else ";")
        for n, side in enumerate(conflict.sides)
    ]
    return [AnswerPart(message("sources_disagree", language), []), *sides]


def conflict_of(conflict: DetectedConflict, cited: CitedAnswer) -> Conflict:
    """The wire ``conflict``: each side with the numbers of its sentences that the answer cites."""
    values = []
    for side in conflict.sides:
        numbers = sorted({cited.numbers[unit.id] for unit in side.units if unit.id in cited.numbers})
        if numbers:
            values.append(ConflictValue(value=" ".join(side.value.split()), citations=numbers))
    return Conflict(kind=conflict.kind, values=values)


def sides_cited(conflict: DetectedConflict, cited_units: Iterable[EvidenceUnit]) -> bool:
    """Whether every side has one of its sentences among ``cited_units`` (claims citing one side only
    would hide the disagreement)."""
    ids = {unit.id for unit in cited_units}
    return all(any(unit.id in ids for unit in side.units) for side in conflict.sides)


def with_disagreement(
    conflict: DetectedConflict | None, parts: Sequence[AnswerPart], language: str | None
) -> list[AnswerPart]:
    """``parts`` led by the disagreement statement when there is a conflict."""
    if conflict is None:
        return list(parts)
    return [*disagreement_parts(conflict, language), *parts]
