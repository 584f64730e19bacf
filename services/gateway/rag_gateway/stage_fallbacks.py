"""What the gateway puts in place of a stage that failed, when the failure policy says to degrade.

The policy itself (which stage degrades, which fails the request) is coded in the chat graph's
nodes and drawn in its docstring and in docs/ARCHITECTURE.md ("Failure policy"); these are the
stand-ins, plain functions with no model and no I/O so that they work when everything else is down:

- the refiner's: the deterministic context-append rewrite (``rag_common.history.append_context``,
  the refiner's own fallback) and the ``rag`` intent, the one that is always safe to serve;
- the generator's: an extractive answer quoting the sentence of the top passages that covers the
  most of the query's content words (``rag_common.content_words``, the generator's lexical signal),
  cited with offsets like any answer. The generator's extractive mode scores sentences with
  embeddings and gates on answerability; without it the gateway has only words, so it quotes one
  sentence and abstains when no sentence of the top passages shares a content word with the query.
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_common.content_words import content_words, coverage
from rag_common.errors import DependencyFailed
from rag_common.history import append_context
from rag_common.messages import message
from rag_common.schemas import Citation, GenerateResponse, HistoryTurn, Passage, RefineResponse
from rag_common.sentences import sentence_spans

#: Passages (in the reranker's order, or the retriever's) whose sentences the stand-in answer may quote.
FALLBACK_PASSAGES = 3


def describe_failure(failure: DependencyFailed, replacement: str) -> str:
    """The ``degraded`` entry: which stage failed, how, and what stood in (cut to 300 characters)."""
    return f"{failure.stage} {failure.kind}: {failure.reason}; {replacement}"[:300]


def refine_without_refiner(message: str, history: Sequence[HistoryTurn]) -> RefineResponse:
    """The refiner's answer without the refiner: context appended to a follow-up, intent ``rag``."""
    query = append_context(message, history)
    return RefineResponse(
        query=query,
        rewritten=query != message,
        method="context_append" if history else "passthrough",
        detail="refiner unreachable: the gateway's deterministic rewrite",
        intent="rag",
        intent_method="fallback",
    )


def answer_without_generator(
    query: str, passages: Sequence[Passage], *, texts: str, language: str | None = None
) -> GenerateResponse:
    """The best-covering sentence of the top passages, quoted verbatim with its citation; an
    abstention when none shares a content word with ``query`` (or there are no passages), its text
    in the ``texts`` language (the catalog's ``generator_unavailable``). Ties go to the higher-ranked
    passage, then the earlier sentence. ``language``: the query's (None: unsure), for its content
    words; each passage is cut and read in its own (``Passage.language``; the query's when unset)."""
    wanted = set(content_words(query, language))
    best: tuple[float, int, int, Passage, int, int] | None = None
    for rank, passage in enumerate(passages[:FALLBACK_PASSAGES]):
        for position, (start, end) in enumerate(sentence_spans(passage.text, passage.language)):
            score = coverage(wanted, content_words(passage.text[start:end], passage.language or language))
            if score > 0 and (best is None or (score, -rank, -position) > best[:3]):
                best = (score, -rank, -position, passage, start, end)
    if best is None:
        return GenerateResponse(
            answer=message("generator_unavailable", texts), citations=[], abstained=True,
            abstain_reason="generator_unavailable",
        )
    _, _, _, passage, start, end = best
    quote = passage.text[start:end]
    citation = Citation(
        id=1,
        source=passage.source,
        title=passage.title,
        page=passage.page,
        chunk_id=passage.chunk_id,
        score=passage.score,
        quote=quote,
        start=start,
        end=end,
        section_path=passage.section_path,
    )
    return GenerateResponse(answer=f"{' '.join(quote.split())} [1]", citations=[citation], abstained=False, mode="extractive")
