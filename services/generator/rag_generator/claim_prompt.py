"""The prompt for an answer written as claims, each citing the numbered sentences it rests on.

The sources are shown cut into sentences with ids (``[2.3]`` = source 2, sentence 3; see
``evidence.py``). A small model cannot copy a quote verbatim, but it can copy an id, and the cited
sentence then *is* the quote. One worked example teaches the reply shape; an abstaining example was
measured (for the earlier quote prompt) to make SmolLM2 refuse answerable questions, so abstaining
is only described in the instructions. A question of a known language gets its answer asked for in
that language (the worked example is English, and a small model follows it unless told otherwise).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from rag_common.languages import language as spoken_language
from rag_common.schemas import HistoryTurn, Passage
from rag_generator.conflicts import DetectedConflict
from rag_generator.evidence import EvidenceUnit, build_evidence, render_evidence

SYSTEM_INSTRUCTIONS = (
    "Answer the question using only the numbered sentences of the sources. "
    "Write the answer as one to three short claims. For each claim give the ids of the sentences "
    'that say it, such as "1.2". Use only ids that are shown. '
    "If the sentences do not answer the question, reply with an empty list of claims."
)

_EXAMPLE_PASSAGES = [
    Passage(
        chunk_id="example-1",
        doc_id="example",
        title="Tides",
        text="Tides are caused mainly by the gravitational pull of the Moon. The Sun adds a smaller pull.",
    ),
    Passage(chunk_id="example-2", doc_id="example", title="Office handbook", text="Visitors park in the north lot."),
]
_EXAMPLE_QUESTION = "What causes tides?"
_EXAMPLE_REPLY = {
    "claims": [
        {"text": "Tides are caused mainly by the pull of the Moon.", "evidence": ["1.1"]},
        {"text": "The Sun adds a smaller pull.", "evidence": ["1.2"]},
    ]
}


def build_claim_messages(
    question: str,
    units: Sequence[EvidenceUnit],
    history: Sequence[HistoryTurn] = (),
    language: str | None = None,
    *,
    conflict: DetectedConflict | None = None,
) -> list[BaseMessage]:
    """The claims conversation; ``language``: the question's ISO 639-1 code when known, else None;
    ``conflict``: the sources' disagreement, noted before the question (:func:`conflict_note`)."""
    example_units = build_evidence(_EXAMPLE_PASSAGES, max_passages=2, max_passage_chars=400)
    return [
        SystemMessage(SYSTEM_INSTRUCTIONS + answer_language_instruction(language)),
        HumanMessage(_user_block(_EXAMPLE_QUESTION, example_units, ())),
        AIMessage(json.dumps(_EXAMPLE_REPLY)),
        HumanMessage(_user_block(question, units, history, conflict_note(conflict))),
    ]


def answer_language_instruction(language: str | None) -> str:
    """``" Write the claims in Romanian, the language of the question."``; ``""`` for an unknown language."""
    if language is None:
        return ""
    return f" Write the claims in {spoken_language(language).name.capitalize()}, the language of the question."


def conflict_note(conflict: DetectedConflict | None) -> str:
    """``'Note: the sources disagree: 1.2 says "Facebook"; 2.1 says "Apple". Say so and cite both.'``
    (``""`` without a conflict): a small model told nothing picks one side silently."""
    if conflict is None:
        return ""
    sides = "; ".join(f'{side.units[0].id} says "{" ".join(side.value.split())}"' for side in conflict.sides)
    return f"Note: the sources disagree: {sides}. Say that they disagree and cite each side."


def _user_block(question: str, units: Sequence[EvidenceUnit], history: Sequence[HistoryTurn], note: str = "") -> str:
    blocks = [f"Sources:\n{render_evidence(units)}"]
    if history:
        # The history arrives cut by the gateway (rag_common.history): shown as received.
        turns = "\n".join(f"User: {turn.question}\nAssistant: {turn.answer}" for turn in history)
        blocks.append(f"Conversation so far:\n{turns}")
    if note:
        blocks.append(note)
    blocks.append(f"Question: {question.strip()}")
    return "\n\n".join(blocks)
