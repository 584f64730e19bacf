"""The claims prompt: numbered sentences ``[n.i]``, one worked example, the history block."""

from __future__ import annotations

import json

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage

from rag_common.languages import UnsupportedLanguageError
from rag_common.schemas import HistoryTurn, Passage
from rag_generator.claim_prompt import SYSTEM_INSTRUCTIONS, build_claim_messages
from rag_generator.claim_reply import ClaimReply, ReplyLimits
from rag_generator.evidence import build_evidence

from .conftest import FOUNDER_QUESTION, PASSAGES

UNITS = build_evidence(PASSAGES, max_passages=6, max_passage_chars=1200)


def test_shape_system_example_then_the_question() -> None:
    messages = build_claim_messages(FOUNDER_QUESTION, UNITS)
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, HumanMessage]
    assert messages[0].content == SYSTEM_INSTRUCTIONS
    assert "empty list of claims" in SYSTEM_INSTRUCTIONS and '"1.2"' in SYSTEM_INSTRUCTIONS


def test_the_sources_are_shown_as_numbered_sentences_under_their_headers() -> None:
    block = build_claim_messages(f"  {FOUNDER_QUESTION}\n", UNITS)[-1].content
    assert block == (
        "Sources:\n"
        "[1] Zorblax Aerospace — Company > History\n"
        "[1.1] Zorblax Aerospace is a maker of small satellite launchers headquartered in Tromsø, Norway.\n"
        "[1.2] The company was founded in 1987 by the engineer Ingrid Halvorsen.\n"
        "[1.3] Its best-known rocket, the Fjord-2, first flew in 2004.\n"
        "\n"
        "[2] Quillfeather Library — page 3\n"
        "[2.1] The Quillfeather Library is a public library in Dunedin that specialises in maritime maps.\n"
        "[2.2] It opened in 1923 and holds 40,000 charts.\n"
        "\n"
        "[3] Growing basil\n"
        "[3.1] Basil needs six hours of sun a day and soil kept moist but not wet.\n"
        "[3.2] Pinch the flowers off to keep the leaves tender.\n"
        "\n"
        f"Question: {FOUNDER_QUESTION}"
    )


def test_every_unit_id_given_is_shown_and_no_other() -> None:
    subset = [u for u in UNITS if u.id in {"1.2", "3.1"}]
    block = build_claim_messages(FOUNDER_QUESTION, subset)[-1].content
    shown = [line.split("]")[0] + "]" for line in block.splitlines() if line.startswith("[") and "." in line.split("]")[0]]
    assert shown == ["[1.2]", "[3.1]"]


def test_a_sentence_spanning_lines_is_shown_on_one_line() -> None:
    passage = Passage(chunk_id="c", doc_id="d", title="T", text="Keys   expire\tafter 30 days in Redis.")
    block = build_claim_messages("When do keys expire?", build_evidence([passage], max_passages=1, max_passage_chars=500))[-1].content
    assert "[1.1] Keys expire after 30 days in Redis.\n" in block


def test_without_history_there_is_no_conversation_block() -> None:
    messages = build_claim_messages(FOUNDER_QUESTION, UNITS, ())
    assert all("Conversation so far" not in str(m.content) for m in messages)


def test_history_is_shown_in_order_between_the_sources_and_the_question() -> None:
    history = [
        HistoryTurn(question="Where is Zorblax based?", answer="In Tromsø, Norway [1]."),
        HistoryTurn(question="What rocket did it build?", answer="The Fjord-2 [1]."),
    ]
    block = build_claim_messages("Who founded it?", UNITS, history)[-1].content
    sources, conversation, question = block.split("\n\n")[-3:]
    assert sources.startswith("[3] Growing basil")
    assert conversation == (
        "Conversation so far:\n"
        "User: Where is Zorblax based?\nAssistant: In Tromsø, Norway [1].\n"
        "User: What rocket did it build?\nAssistant: The Fjord-2 [1]."
    )
    assert question == "Question: Who founded it?"
    # The worked example never carries the history.
    assert "Conversation so far" not in build_claim_messages("Who founded it?", UNITS, history)[1].content


def test_the_worked_example_is_a_valid_reply_to_its_own_sources() -> None:
    example_block, example_reply = build_claim_messages(FOUNDER_QUESTION, UNITS)[1:3]
    shown_ids = {line[1:].split("]")[0] for line in example_block.content.splitlines() if line.startswith("[") and "." in line.split("]")[0]}
    assert shown_ids == {"1.1", "1.2", "2.1"}
    limits = ReplyLimits(max_claims=3, claim_max_chars=300, sentence_ids=frozenset(shown_ids))
    parsed = ClaimReply.from_model_output(example_reply.content, limits)
    assert parsed.claims and all(claim.evidence for claim in parsed.claims)
    assert json.loads(example_reply.content) == parsed.model_dump()
    assert example_block.content.endswith("Question: What causes tides?")


def test_a_known_language_asks_for_the_claims_in_it() -> None:
    system = build_claim_messages("Unde a fost fondată Zorblax?", UNITS, (), "ro")[0].content
    assert system == SYSTEM_INSTRUCTIONS + " Write the claims in Romanian, the language of the question."
    assert build_claim_messages(FOUNDER_QUESTION, UNITS, (), "de")[0].content.endswith("Write the claims in German, the language of the question.")
    # Unknown language: the instructions measured before languages existed, word for word.
    assert build_claim_messages(FOUNDER_QUESTION, UNITS)[0].content == SYSTEM_INSTRUCTIONS
    assert "Romanian" not in SYSTEM_INSTRUCTIONS


def test_the_language_changes_only_the_instructions() -> None:
    english, romanian = build_claim_messages(FOUNDER_QUESTION, UNITS), build_claim_messages(FOUNDER_QUESTION, UNITS, (), "ro")
    assert english[1:] == romanian[1:]


def test_an_unsupported_language_code_is_an_error() -> None:
    with pytest.raises(UnsupportedLanguageError):
        build_claim_messages(FOUNDER_QUESTION, UNITS, (), "xx")
