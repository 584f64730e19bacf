"""Turn the model's citations into wire ``Citation``s the caller can trust to point somewhere real."""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence

from rag_common.schemas import Citation, Passage
from rag_generator.llm_response import LLMCitation

_MARKER = re.compile(r"\s?\[(\d+)\]")


def select_citations(
    citations: Sequence[LLMCitation], sources: Mapping[int, Passage], *, max_citations: int | None = None
) -> list[Citation]:
    """Keep citations of shown sources, one per source (first non-empty quote wins), in model order."""
    quotes: dict[int, str] = {}
    for citation in citations:
        if citation.source_id not in sources:
            continue
        quote = " ".join(citation.quote.split())
        if citation.source_id not in quotes or (not quotes[citation.source_id] and quote):
            quotes[citation.source_id] = quote
    selected = [_to_wire(number, sources[number], quote) for number, quote in quotes.items()]
    return selected[:max_citations] if max_citations is not None else selected


def strip_unbacked_markers(answer: str, cited_ids: Collection[int]) -> str:
    """Remove ``[n]`` markers with no citation behind them, so every marker left resolves."""
    return _MARKER.sub(lambda m: m.group(0) if int(m.group(1)) in cited_ids else "", answer).strip()


def _to_wire(number: int, passage: Passage, quote: str) -> Citation:
    return Citation(
        id=number,
        source=passage.source,
        title=passage.title,
        page=passage.page,
        chunk_id=passage.chunk_id,
        score=passage.score,
        quote=quote,
    )
