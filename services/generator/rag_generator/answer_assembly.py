"""The response for one validated model reply: verification, citation selection, abstention."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from rag_common.schemas import GenerateResponse, Passage
from rag_generator.citation_selection import select_citations, strip_unbacked_markers
from rag_generator.citation_verifier import CitationVerifier
from rag_generator.llm_response import InvalidModelOutput, LLMResponse, ResponseLimits

logger = logging.getLogger(__name__)

#: The one answer a user sees whenever the generator abstains, whatever the reason.
ABSTAIN_MESSAGE = "I could not find this in the documents."

_DEFAULT_VERIFIER = CitationVerifier()


def abstention(reason: str, *, citation_precision: float | None = None, repaired: bool = False) -> GenerateResponse:
    return GenerateResponse(
        answer=ABSTAIN_MESSAGE,
        citations=[],
        abstained=True,
        abstain_reason=reason,
        citation_precision=citation_precision,
        repaired=repaired,
    )


def answer_from_reply(
    reply: LLMResponse,
    sources: Mapping[int, Passage],
    limits: ResponseLimits = ResponseLimits(),
    verifier: CitationVerifier = _DEFAULT_VERIFIER,
    *,
    repaired: bool = False,
) -> GenerateResponse:
    """Verify the reply's citations and build the response; never raises."""
    if reply.abstained:
        return abstention("model_abstained", repaired=repaired)
    if not reply.answer.strip():
        return abstention("invalid_output", repaired=repaired)
    verification = verifier.verify(reply.citations, sources)
    precision = verification.citation_precision
    for check in verification.checks:
        if not check.verified:
            citation = check.citation
            logger.info(
                "dropping citation [%d]: %s (score %.0f): %r", citation.source_id, check.verdict, check.score, citation.quote
            )
    citations = select_citations(verification.verified, sources, max_citations=limits.max_citations)
    if not citations:
        return abstention("no_valid_citation", citation_precision=precision, repaired=repaired)
    answer = strip_unbacked_markers(reply.answer, {citation.id for citation in citations})
    return GenerateResponse(
        answer=answer, citations=citations, abstained=False, citation_precision=precision, repaired=repaired
    )


def answer_from_model_output(
    output: Mapping[str, Any] | str | None,
    sources: Mapping[int, Passage],
    limits: ResponseLimits = ResponseLimits(),
    verifier: CitationVerifier = _DEFAULT_VERIFIER,
) -> GenerateResponse:
    """The response for one model reply (parsed object or raw JSON text), without repair; never raises."""
    try:
        reply = LLMResponse.from_model_output(output, limits)
    except InvalidModelOutput as exc:
        logger.info("abstaining: invalid model output (%s)", exc)
        return abstention("invalid_output")
    return answer_from_reply(reply, sources, limits, verifier)
