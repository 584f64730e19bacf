"""The prompt for a grounded, cited answer.

Sources are numbered ``[1]..[n]`` in the order given (the reranker's order), and the numbers are
the only handle the model has on them: citations name a number, and the response schema only
admits numbers that were shown. One worked example teaches the reply shape; an abstaining
example was measured to make SmolLM2 refuse answerable questions, so abstention is only
described in the instructions.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from rag_common.schemas import HistoryTurn, Passage

SYSTEM_INSTRUCTIONS = (
    "Answer the question using only the numbered sources. Keep the answer short. "
    "After each claim write its source number in brackets, like [1]. "
    "List each source you used in citations with a short quote copied exactly from it. "
    "If the sources do not answer the question, set abstained to true and leave citations empty."
)

_EXAMPLE_SOURCES = {
    1: Passage(
        chunk_id="example-1",
        doc_id="example",
        title="Tides",
        text="Tides are caused mainly by the gravitational pull of the Moon on the oceans.",
    ),
    2: Passage(
        chunk_id="example-2",
        doc_id="example",
        title="Office handbook",
        section_path=["Parking"],
        text="Visitors park in the north lot.",
    ),
}
_EXAMPLE_QUESTION = "What causes tides?"
_EXAMPLE_REPLY = {
    "answer": "Tides are caused mainly by the pull of the Moon [1].",
    "citations": [{"source_id": 1, "quote": "Tides are caused mainly by the gravitational pull of the Moon"}],
    "abstained": False,
}


def number_sources(passages: Sequence[Passage], max_passages: int) -> dict[int, Passage]:
    """The passages the model will see, keyed by the ``[n]`` it will cite them by."""
    return {number: passage for number, passage in enumerate(passages[:max_passages], start=1)}


def build_answer_messages(
    question: str,
    sources: Mapping[int, Passage],
    history: Sequence[HistoryTurn] = (),
    *,
    max_passage_chars: int = 1200,
) -> list[BaseMessage]:
    return [
        SystemMessage(SYSTEM_INSTRUCTIONS),
        HumanMessage(_user_block(_EXAMPLE_QUESTION, _EXAMPLE_SOURCES, (), max_passage_chars)),
        AIMessage(json.dumps(_EXAMPLE_REPLY)),
        HumanMessage(_user_block(question, sources, history, max_passage_chars)),
    ]


def source_header(number: int, passage: Passage) -> str:
    """``[n] title — section/page``: what the model (and a reader of the prompt) sees per source."""
    location = [" > ".join(passage.section_path)] if passage.section_path else []
    if passage.page is not None:
        location.append(f"page {passage.page}")
    name = passage.title or passage.source or passage.doc_id
    return f"[{number}] {name}" + (f" — {', '.join(location)}" if location else "")


def _user_block(
    question: str, sources: Mapping[int, Passage], history: Sequence[HistoryTurn], max_passage_chars: int
) -> str:
    blocks = [
        "Sources:\n"
        + "\n\n".join(
            f"{source_header(number, passage)}\n{passage.text.strip()[:max_passage_chars]}"
            for number, passage in sources.items()
        )
    ]
    if history:
        turns = "\n".join(f"User: {turn.question}\nAssistant: {turn.answer}" for turn in history)
        blocks.append(f"Conversation so far:\n{turns}")
    blocks.append(f"Question: {question.strip()}")
    return "\n\n".join(blocks)
