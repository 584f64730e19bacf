"""The one repair turn: the conversation replayed, the invalid reply, the error, the request."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from rag_generator.repair_prompt import REPAIR_ERROR_CHARS, REPAIR_REPLY_CHARS, build_repair_messages

CONVERSATION = [SystemMessage("Answer."), HumanMessage("Sources: ...\n\nQuestion: Who?")]


def test_the_conversation_is_replayed_then_the_invalid_reply_then_the_error() -> None:
    messages = build_repair_messages(CONVERSATION, '{"claims": [', "not JSON: Expecting value at char 11")
    assert messages[:2] == CONVERSATION
    assert messages[2] == AIMessage('{"claims": [')
    assert isinstance(messages[3], HumanMessage) and len(messages) == 4
    assert messages[3].content.startswith("Your reply is not valid: not JSON: Expecting value at char 11\n")
    assert '{"claims": [{"text": string, "evidence": [sentence ids]}]}' in messages[3].content
    assert "only the sentence ids shown" in messages[3].content


def test_the_input_list_is_not_modified() -> None:
    conversation = list(CONVERSATION)
    build_repair_messages(conversation, "x", "y")
    assert conversation == CONVERSATION


def test_long_replies_and_errors_are_cut() -> None:
    reply, error = "r" * (REPAIR_REPLY_CHARS + 50), "e" * (REPAIR_ERROR_CHARS + 50)
    messages = build_repair_messages(CONVERSATION, reply, error)
    assert messages[2].content == "r" * REPAIR_REPLY_CHARS
    assert "e" * REPAIR_ERROR_CHARS + "\n" in messages[3].content
    assert "e" * (REPAIR_ERROR_CHARS + 1) not in messages[3].content


def test_a_known_language_is_repeated_in_the_repair_request() -> None:
    request = build_repair_messages(CONVERSATION, "x", "y", "ro")[3].content
    assert request.endswith("using only the sentence ids shown. Write the claims in Romanian, the language of the question.")
    assert build_repair_messages(CONVERSATION, "x", "y")[3].content.endswith("using only the sentence ids shown.")
