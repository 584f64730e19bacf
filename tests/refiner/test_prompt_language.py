"""The refiner's prompts name the message's language when it is known (issue 31), and only then."""

from __future__ import annotations

import pytest

from rag_common.languages import UnsupportedLanguageError
from rag_common.schemas import HistoryTurn, RefineRequest
from rag_common.settings import LLMSettings
from rag_refiner.hyde_writer import SYSTEM_INSTRUCTIONS as HYDE_INSTRUCTIONS
from rag_refiner.hyde_writer import build_hyde_messages
from rag_refiner.query_refiner import QueryRefiner
from rag_refiner.rewrite_prompt import build_rewrite_messages
from rag_refiner.settings import RefinerSettings

from .llm_calls import counted_chat_model

STORAGE = HistoryTurn(
    question="Unde sunt stocate conversațiile?",
    answer="Conversațiile sunt stocate în baza de date PostgreSQL a serviciului.",
)

#: The rewrite instructions as they were before languages: an unknown language must still get them.
ENGLISH_ONLY_REWRITE = (
    "Rewrite the user's last message as one standalone question. Keep the user's words. "
    "Replace words like it, they, that with the thing they refer to in the conversation, "
    "and add the missing subject from the conversation if the message is incomplete. "
    "Add nothing else and do not answer the question. "
    'Reply in JSON: {"query": "..."}'
)


def test_rewrite_prompt_without_a_language_is_unchanged() -> None:
    assert build_rewrite_messages("And in 2019?", [STORAGE])[0].content == ENGLISH_ONLY_REWRITE


def test_rewrite_prompt_asks_for_the_question_in_the_messages_language() -> None:
    messages = build_rewrite_messages("Și cât timp sunt păstrate?", [STORAGE], "ro")
    assert messages[0].content == ENGLISH_ONLY_REWRITE.replace(
        " Reply in JSON", " Write the question in Romanian. Reply in JSON"
    )
    # The few-shot examples stay as they are; only the instruction changes.
    assert messages[1:-1] == build_rewrite_messages("x", [STORAGE])[1:-1]
    assert messages[-1].content.endswith("Last message: Și cât timp sunt păstrate?")


def test_hyde_prompt_names_the_language_only_when_known() -> None:
    assert build_hyde_messages("Cât costă cazarea?")[0].content == HYDE_INSTRUCTIONS
    assert build_hyde_messages("Wie viel kostet das Wohnheim?", "de")[0].content == (
        HYDE_INSTRUCTIONS + " Write the passage in German."
    )


def test_an_unsupported_language_code_is_an_error() -> None:
    with pytest.raises(UnsupportedLanguageError):
        build_hyde_messages("query", "xx")


async def test_romanian_thanks_are_chitchat_by_rule_without_a_model_call(llm_settings: LLMSettings) -> None:
    model, counter = counted_chat_model(llm_settings)
    refiner = QueryRefiner.of(RefinerSettings(), model)
    for message in ("Mulțumesc frumos!", "multumesc", "Ce te-am întrebat?"):
        response = await refiner.refine(RefineRequest(message=message, history=[STORAGE], hyde=True, language="ro"))
        assert response.intent_method == "rules"
        assert response.intent == ("meta" if message.startswith("Ce") else "chitchat")
    assert counter.calls == 0


async def test_a_romanian_follow_up_asks_the_model_in_romanian(llm_settings: LLMSettings) -> None:
    # SmolLM2-135M writes poor Romanian: what is checked is that both calls carried the instruction.
    model, counter = counted_chat_model(llm_settings)
    response = await QueryRefiner.of(RefinerSettings(), model).refine(
        RefineRequest(message="Și cât timp sunt păstrate?", history=[STORAGE], hyde=True, language="ro")
    )
    assert response.intent == "rag"
    assert response.method in ("llm", "context_append"), response
    assert counter.calls == 2  # rewrite + HyDE
    rewrite_system, hyde_system = counter.systems
    assert "Write the question in Romanian." in rewrite_system
    assert hyde_system.endswith("Write the passage in Romanian.")
