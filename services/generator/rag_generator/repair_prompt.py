"""The one repair turn after a reply that is not a valid claims object.

The conversation is replayed with the invalid reply as the assistant's turn and a user turn that
names the validation error and asks for the corrected JSON alone; the call uses the same response
schema as the first one.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

#: The invalid reply shown back to the model is cut to this many characters.
REPAIR_REPLY_CHARS = 4000
REPAIR_ERROR_CHARS = 500


def build_repair_messages(messages: Sequence[BaseMessage], invalid_reply: str, error: str) -> list[BaseMessage]:
    return [
        *messages,
        AIMessage(invalid_reply[:REPAIR_REPLY_CHARS]),
        HumanMessage(
            f"Your reply is not valid: {error[:REPAIR_ERROR_CHARS]}\n"
            'Reply again with only the corrected JSON object {"claims": [{"text": string, "evidence": '
            "[sentence ids]}]}, using only the sentence ids shown."
        ),
    ]
