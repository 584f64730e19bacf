"""Stage 3 of intent routing: ask the chat model, only for messages the classifier is unsure about.

The reply is grammar-constrained to ``{"intent": one of the four}`` (json_schema structured
output), so a small model cannot answer anything else. Few-shot examples carry the definitions;
the instruction says that ``rag`` is the answer when in doubt.
"""

from __future__ import annotations

import json
from typing import Any, get_args

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from rag_common.schemas import Intent
from rag_refiner.llm_call import UnusableOutput

INTENT_SCHEMA = {
    "name": "intent",
    "strict": True,
    "schema": {
        "type": "object",
        "properties": {"intent": {"type": "string", "enum": list(get_args(Intent))}},
        "required": ["intent"],
        "additionalProperties": False,
    },
}

SYSTEM_INSTRUCTIONS = (
    "You route messages sent to an assistant that answers questions from a document collection. "
    "rag: any question or request for information, on any topic. "
    "chitchat: only a greeting, thanks, goodbye or small talk, with no question. "
    "meta: about this conversation itself, like what the user asked before. "
    "out_of_scope: a task documents cannot help with: a poem, a joke, the weather or time right now, "
    "booking, alarms, playing music. "
    "When unsure, answer rag. "
    'Reply in JSON: {"intent": "..."}'
)

FEW_SHOT_EXAMPLES: tuple[tuple[str, Intent], ...] = (
    ("What is the warranty period of the X200 printer?", "rag"),
    ("hey, thanks a lot, see you", "chitchat"),
    ("what was the first thing I asked you?", "meta"),
    ("write a funny poem about my cat", "out_of_scope"),
    ("who wrote the song that won the contest in 1974", "rag"),
    ("is it going to rain here in an hour?", "out_of_scope"),
    ("I meant the other model", "rag"),
)


class UnusableIntent(UnusableOutput):
    """The model answered, but not with one of the four intents."""


class LLMIntentClassifier:
    """One structured-output call; transport errors propagate, malformed replies raise ``UnusableIntent``."""

    def __init__(self, chat_model: BaseChatModel):
        self._structured = chat_model.with_structured_output(INTENT_SCHEMA, method="json_schema", include_raw=True)

    async def classify(self, message: str) -> Intent:
        result: dict[str, Any] = await self._structured.ainvoke(build_intent_messages(message))
        parsed = result.get("parsed")
        intent = parsed.get("intent") if isinstance(parsed, dict) and result.get("parsing_error") is None else None
        if intent not in get_args(Intent):
            raw = getattr(result.get("raw"), "content", "")
            raise UnusableIntent(f"model output is not an intent: {str(raw)[:120]!r}")
        return intent  # type: ignore[return-value]


def build_intent_messages(message: str) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage(SYSTEM_INSTRUCTIONS)]
    for example, intent in FEW_SHOT_EXAMPLES:
        messages.append(HumanMessage(f"Message: {example}"))
        messages.append(AIMessage(json.dumps({"intent": intent})))
    messages.append(HumanMessage(f"Message: {message.strip()[:1000]}"))
    return messages
