"""The one repair turn after a reply that is not a valid claims object.

The conversation is replayed with the invalid reply as the assistant's turn and a user turn that
names the validation error and asks for the corrected JSON alone; the call uses the same response
schema as the first one. For a question of a known language the request repeats which language the
claims are written in (the first instruction is far back in the conversation by then).
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from rag_generator.claim_prompt import answer_language_instruction

#: The invalid reply shown back to the model is cut to this many characters.
REPAIR_REPLY_CHARS = 4000
REPAIR_ERROR_CHARS = 500


def build_repair_messages(
    messages: Sequence[BaseMessage], invalid_reply: str, error: str, language: str | None = None
) -> list[BaseMessage]:
    """``messages`` replayed with the invalid reply and the request to correct it; ``language``: the
    question's ISO 639-1 code when known, else None."""
    return [
        *messages,
        AIMessage(invalid_reply[:REPAIR_REPLY_CHARS]),
        HumanMessage(
            f"Your reply is not valid: {error[:REPAIR_ERROR_CHARS]}\n"
            'Reply again with only the corrected JSON object {"claims": [{"text": string, "evidence": '
            "[sentence ids]}]}, using only the sentence ids shown." + answer_language_instruction(language)
        ),
    ]
