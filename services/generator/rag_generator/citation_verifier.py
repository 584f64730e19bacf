"""Check every citation the model produced against the source it names.

A citation is *verified* when its ``source_id`` is one of the numbered sources and its quote
occurs in that source's text: first as an exact substring after both are normalised
(``quote_normalisation``), else as a fuzzy partial match (``rapidfuzz.fuzz.partial_ratio``)
scoring at least ``threshold`` (0-100). An empty quote (nothing alphanumeric) is never verified.
A verified citation's quote is replaced by the words of the passage it matched, so what the
caller shows is always text from the source.

``citation_precision`` = verified / produced over the model's citations (repeats included);
``None`` when the model produced none.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from rapidfuzz import fuzz

from rag_common.schemas import Passage
from rag_generator.llm_response import QUOTE_MAX_CHARS, LLMCitation
from rag_generator.quote_normalisation import normalise_quote, normalise_with_offsets

#: Default minimum ``partial_ratio`` (0-100) of a quote that is not an exact (normalised) substring.
DEFAULT_QUOTE_MATCH_THRESHOLD = 90.0

Verdict = Literal["exact", "fuzzy", "unknown_source", "empty_quote", "not_found"]


@dataclass(frozen=True)
class CitationCheck:
    citation: LLMCitation
    verdict: Verdict
    #: 100 for an exact match, the partial_ratio for a fuzzy attempt, 0 when no match was tried.
    score: float = 0.0
    #: The passage's own words the quote matched (whitespace collapsed); ``""`` when not verified.
    matched_text: str = ""

    @property
    def verified(self) -> bool:
        return self.verdict in ("exact", "fuzzy")


@dataclass(frozen=True)
class Verification:
    checks: list[CitationCheck]

    @property
    def verified(self) -> list[LLMCitation]:
        """The verified citations, in model order, each quoting the passage's own words."""
        # A fuzzy match can span more of the passage than the model's quote (normalisation, the
        # aligned window): cut it to the schema's bound rather than fail on the model's output.
        return [
            LLMCitation(source_id=check.citation.source_id, quote=_bounded(check.matched_text))
            for check in self.checks
            if check.verified
        ]

    @property
    def citation_precision(self) -> float | None:
        if not self.checks:
            return None
        return sum(check.verified for check in self.checks) / len(self.checks)


class CitationVerifier:
    def __init__(self, threshold: float = DEFAULT_QUOTE_MATCH_THRESHOLD):
        if not 0.0 <= threshold <= 100.0:
            raise ValueError(f"threshold must be within 0..100, got {threshold}")
        self.threshold = threshold

    def verify(self, citations: Sequence[LLMCitation], sources: Mapping[int, Passage]) -> Verification:
        return Verification([self.check(citation, sources) for citation in citations])

    def check(self, citation: LLMCitation, sources: Mapping[int, Passage]) -> CitationCheck:
        passage = sources.get(citation.source_id)
        if passage is None:
            return CitationCheck(citation, "unknown_source")
        quote = normalise_quote(citation.quote)
        if not quote:
            return CitationCheck(citation, "empty_quote")
        text, origins = normalise_with_offsets(passage.text)
        start = text.find(quote)
        if start >= 0:
            return CitationCheck(citation, "exact", 100.0, _original_span(passage.text, origins, start, start + len(quote)))
        if len(quote) > len(text):
            # partial_ratio would look for the passage inside the quote and ignore whatever the
            # model added around it; a quote longer than its source has to match it as a whole.
            score = fuzz.ratio(quote, text)
            start, end = 0, len(text)
        else:
            alignment = fuzz.partial_ratio_alignment(quote, text)
            score, start, end = alignment.score, alignment.dest_start, alignment.dest_end
        if score >= self.threshold and end > start:
            return CitationCheck(citation, "fuzzy", score, _original_span(passage.text, origins, start, end))
        return CitationCheck(citation, "not_found", score)


def _original_span(original: str, origins: list[int], start: int, end: int) -> str:
    """The original text behind folded characters ``start:end``, whitespace collapsed."""
    return " ".join(original[origins[start] : origins[end - 1] + 1].split())


def _bounded(text: str) -> str:
    if len(text) <= QUOTE_MAX_CHARS:
        return text
    cut = text[: QUOTE_MAX_CHARS - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut) + "…"
