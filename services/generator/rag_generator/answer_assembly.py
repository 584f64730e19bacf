"""The response for a chosen set of (text, cited sentences): markers, citations, abstentions.

Both modes end here. A citation is one cited sentence: ``quote`` is the sentence in the source's
own words and ``start``/``end`` its offsets in the chunk, so what a client highlights is exactly what
was cited. Citations are numbered ``[1]..[n]`` in the order the answer first cites them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from rag_common.messages import message
from rag_common.schemas import AnswerMode, AnswerSpan, Citation, Conflict, GenerateResponse
from rag_generator.evidence import EvidenceUnit


@dataclass(frozen=True)
class AnswerPart:
    """One claim (or extracted sentence) and the sentences it cites."""

    text: str
    evidence: Sequence[EvidenceUnit]
    #: Written right after the markers: the punctuation of a list ("Facebook [1]; Apple [2].").
    after: str = ""


@dataclass(frozen=True)
class CitedAnswer:
    #: The answer text in the order it is shown (and streamed): ``"".join(pieces) == answer``.
    pieces: list[str]
    citations: list[Citation]
    #: ``EvidenceUnit.id`` → its citation's number.
    numbers: dict[str, int] = field(default_factory=dict)

    @property
    def answer(self) -> str:
        return "".join(self.pieces)


def abstention(
    reason: str,
    *,
    language: str,
    answerability: float | None = None,
    citation_precision: float | None = None,
    claims_dropped: int = 0,
    repaired: bool = False,
    degraded: Sequence[str] = (),
) -> GenerateResponse:
    """The one answer a user sees whenever the generator abstains, whatever the ``reason`` (a code, in
    English), in the question's ``language`` (the catalog's ``abstain``)."""
    return GenerateResponse(
        answer=message("abstain", language),
        citations=[],
        abstained=True,
        abstain_reason=reason,
        answerability=answerability,
        citation_precision=citation_precision,
        claims_dropped=claims_dropped,
        repaired=repaired,
        degraded=list(degraded),
    )


def cite(parts: Sequence[AnswerPart]) -> CitedAnswer:
    """Each part's text followed by its markers (``"... [1][2]"``), parts separated by one space."""
    numbers: dict[str, int] = {}
    citations: list[Citation] = []
    pieces: list[str] = []
    for part in parts:
        markers = []
        for unit in part.evidence:
            if unit.id not in numbers:
                numbers[unit.id] = len(numbers) + 1
                citations.append(_citation(numbers[unit.id], unit))
            markers.append(f"[{numbers[unit.id]}]")
        text = " ".join(part.text.split())
        pieces.append(("" if not pieces else " ") + f"{text} {''.join(dict.fromkeys(markers))}".rstrip() + part.after)
    return CitedAnswer(pieces, citations, numbers)


def answered(
    cited: CitedAnswer,
    mode: AnswerMode,
    *,
    answerability: float | None,
    citation_precision: float | None = None,
    claims_dropped: int = 0,
    repaired: bool = False,
    degraded: Sequence[str] = (),
    conflict: Conflict | None = None,
    answer_span: AnswerSpan | None = None,
) -> GenerateResponse:
    return GenerateResponse(
        answer=cited.answer,
        citations=cited.citations,
        abstained=False,
        mode=mode,
        answerability=answerability,
        citation_precision=citation_precision,
        claims_dropped=claims_dropped,
        repaired=repaired,
        degraded=list(degraded),
        conflict=conflict,
        answer_span=answer_span,
    )


def _citation(number: int, unit: EvidenceUnit) -> Citation:
    passage = unit.passage
    return Citation(
        id=number,
        source=passage.source,
        title=passage.title,
        page=passage.page,
        chunk_id=passage.chunk_id,
        score=passage.score,
        quote=unit.text,
        start=unit.start,
        end=unit.end,
        section_path=passage.section_path,
    )
