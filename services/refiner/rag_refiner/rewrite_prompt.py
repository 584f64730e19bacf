"""The few-shot prompt that turns a follow-up message into a standalone question.

The model is small, so the instruction is short and the examples carry most of the intent: copy
the user's words, swap a pronoun or fill a gap with the thing named earlier, add nothing else.
The examples also show the JSON reply shape the response schema enforces.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from rag_common.schemas import HistoryTurn
from rag_refiner.prompt_language import write_in

#: Upper bound the response schema puts on the rewrite; the guard's own limit may be larger.
QUERY_SCHEMA_MAX_CHARS = 300
#: Enough tokens for a 300-character query plus the JSON around it, so the object always closes.
REWRITE_MAX_TOKENS = 160

REWRITE_SCHEMA = {
    "name": "standalone_query",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"query": {"type": "string", "maxLength": QUERY_SCHEMA_MAX_CHARS}},
        "required": ["query"],
        "additionalProperties": False,
    },
}

SYSTEM_INSTRUCTIONS = (
    "Rewrite the user's last message as one standalone question. Keep the user's words. "
    "Replace words like it, they, that with the thing they refer to in the conversation, "
    "and add the missing subject from the conversation if the message is incomplete. "
    "Add nothing else and do not answer the question."
)
_REPLY_SHAPE = ' Reply in JSON: {"query": "..."}'

# (history, message, rewrite): one pronoun swap, one elliptical follow-up, one already standalone.
FEW_SHOT_EXAMPLES: tuple[tuple[tuple[HistoryTurn, ...], str, str], ...] = (
    (
        (
            HistoryTurn(
                question="What is the warranty period of the X200 printer?",
                answer="The X200 printer has a two-year warranty.",
            ),
        ),
        "Does it cover the ink cartridges?",
        "Does the X200 printer warranty cover the ink cartridges?",
    ),
    (
        (
            HistoryTurn(
                question="Who founded Globex Corporation?",
                answer="Globex Corporation was founded by Hank Scorpio in 1989.",
            ),
        ),
        "And where is the headquarters?",
        "Where is the Globex Corporation headquarters?",
    ),
    (
        (
            HistoryTurn(
                question="How many vacation days do new employees get?",
                answer="New employees get 20 vacation days per year.",
            ),
        ),
        "How do I request parental leave from my manager?",
        "How do I request parental leave from my manager?",
    ),
)


def build_rewrite_messages(
    message: str, history: Sequence[HistoryTurn], language: str | None = None
) -> list[BaseMessage]:
    """Messages asking for a standalone form of ``message``; ``history`` is already windowed and cut.
    ``language``: the message's code when known; the question is then asked for in that language
    (the examples are English, and a small model follows them unless told otherwise)."""
    instructions = SYSTEM_INSTRUCTIONS + write_in(language, "the question") + _REPLY_SHAPE
    messages: list[BaseMessage] = [SystemMessage(instructions)]
    for example_history, example_message, example_rewrite in FEW_SHOT_EXAMPLES:
        messages.append(HumanMessage(_conversation_block(example_history, example_message)))
        messages.append(AIMessage(json.dumps({"query": example_rewrite})))
    messages.append(HumanMessage(_conversation_block(history, message)))
    return messages


def _conversation_block(history: Sequence[HistoryTurn], message: str) -> str:
    turns = "\n".join(f"User: {turn.question}\nAssistant: {turn.answer}" for turn in history)
    return f"Conversation:\n{turns}\n\nLast message: {message.strip()}"
