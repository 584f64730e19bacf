"""ClaimWriter: one structured call, one repair, json_schema -> function_calling fallback, failures.

Replies the grammar-constrained server never writes (invalid JSON, cut-off replies, tool calls) are
scripted; everything else, including the HTTP 400 refusing a schema, comes from the real server.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, HumanMessage

import rag_generator.claim_writer as claim_writer_module
from rag_common.errors import DependencyFailed
from rag_common.llm import build_chat_model
from rag_common.schemas import HistoryTurn, Passage
from rag_common.service import status_for
from rag_common.settings import LLMSettings
from rag_generator.claim_prompt import build_claim_messages
from rag_generator.claim_writer import ClaimWriter
from rag_generator.evidence import build_evidence

from .conftest import FOUNDER_QUESTION, PASSAGES, ScriptedChatOpenAI, claims_reply, unresolvable_claim_schema

UNITS = build_evidence(PASSAGES, max_passages=6, max_passage_chars=1200)
IDS = [unit.id for unit in UNITS]
FOUNDER_CLAIM = ("Ingrid Halvorsen founded Zorblax Aerospace in 1987.", ["1.2"])
NOT_JSON = '{"claims": [{"text": "Ingrid Halvorsen founded it", "evidence": ["1.2"]'
Scripted = Callable[..., ScriptedChatOpenAI]


def writer_for(model: object, *, llm_timeout_s: float = 170.0, **kwargs: object) -> ClaimWriter:
    return ClaimWriter(model, max_claims=3, claim_max_chars=300, llm_timeout_s=llm_timeout_s, **kwargs)  # type: ignore[arg-type]


def tool_call_reply(*claims: tuple[str, list[str]], content: str = "") -> AIMessage:
    args = {"claims": [{"text": text, "evidence": ids} for text, ids in claims]}
    return AIMessage(content, tool_calls=[{"name": "grounded_claims", "args": args, "id": "call-1"}])


async def test_a_valid_reply_is_one_call_with_this_requests_prompt_and_schema(scripted_model: Scripted) -> None:
    model = scripted_model(claims_reply(FOUNDER_CLAIM, ("It is based in Tromsø.", ["1.1", "1.2"])))
    history = [HistoryTurn(question="Where is Zorblax based?", answer="In Tromsø [1].")]
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, history)
    assert draft.reply is not None and (draft.invalid_reason, draft.repaired) == ("", False)
    assert [(c.text, c.evidence) for c in draft.reply.claims] == [FOUNDER_CLAIM, ("It is based in Tromsø.", ["1.1", "1.2"])]
    assert model.methods == ["json_schema"]
    assert model.calls == [build_claim_messages(FOUNDER_QUESTION, UNITS, history)]
    schema = model.request_kwargs[0]["response_format"]["json_schema"]["schema"]
    claim_schema = schema["properties"]["claims"]
    assert claim_schema["maxItems"] == 3 and claim_schema["items"]["properties"]["text"]["maxLength"] == 300
    assert claim_schema["items"]["properties"]["evidence"]["items"]["enum"] == IDS


async def test_the_real_model_under_the_grammar_cites_only_shown_ids(scripted_model: Scripted) -> None:
    model = scripted_model()  # nothing scripted: SmolLM2 answers
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert len(model.calls) == 1, "the grammar keeps the reply valid: no repair"
    assert draft.reply is not None and not draft.repaired
    assert len(draft.reply.claims) <= 3
    assert all(1 <= len(c.evidence) <= 3 and set(c.evidence) <= set(IDS) for c in draft.reply.claims)


async def test_invalid_json_gets_exactly_one_repair_call(scripted_model: Scripted) -> None:
    model = scripted_model(AIMessage(NOT_JSON), claims_reply(FOUNDER_CLAIM))
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert draft.reply is not None and draft.repaired is True
    assert [(c.text, c.evidence) for c in draft.reply.claims] == [FOUNDER_CLAIM]
    first, repair = model.calls
    # The repair call replays the conversation, then shows the invalid reply and the error.
    assert repair[: len(first)] == first and len(repair) == len(first) + 2
    assert repair[len(first)] == AIMessage(NOT_JSON)
    assert isinstance(repair[-1], HumanMessage) and repair[-1].content.startswith("Your reply is not valid: not JSON")
    assert model.methods == ["json_schema", "json_schema"]  # same schema for the repair


async def test_a_schema_violation_is_repaired_and_the_error_names_it(scripted_model: Scripted) -> None:
    bad = json.dumps({"claims": [{"text": "Halvorsen founded it.", "evidence": ["1.2", "4.1"]}], "confidence": 0.9})
    model = scripted_model(AIMessage(bad), claims_reply(FOUNDER_CLAIM))
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert draft.reply is not None and draft.repaired is True
    error = model.calls[1][-1].content
    assert "confidence" in error


async def test_an_unknown_sentence_id_is_invalid_output(scripted_model: Scripted) -> None:
    model = scripted_model(claims_reply(("Halvorsen founded it.", ["1.2", "4.1"])), claims_reply(FOUNDER_CLAIM))
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert draft.repaired is True and "4.1" in model.calls[1][-1].content


async def test_invalid_twice_gives_no_claims_after_exactly_two_calls(scripted_model: Scripted) -> None:
    model = scripted_model(AIMessage(NOT_JSON), AIMessage("Sorry: Ingrid Halvorsen [1.2]"))
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert len(model.calls) == 2
    assert draft.reply is None and draft.repaired is True
    assert draft.invalid_reason.startswith("invalid output after repair: not JSON")


async def test_a_cut_off_reply_is_not_repaired(scripted_model: Scripted) -> None:
    cut = AIMessage('{"claims": [{"text": "Ingrid Halvorsen founded', response_metadata={"finish_reason": "length"})
    model = scripted_model(cut)
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert len(model.calls) == 1
    assert (draft.reply, draft.invalid_reason, draft.repaired) == (None, "reply cut off at max_tokens", False)


async def test_a_valid_looking_but_cut_off_reply_is_not_trusted(scripted_model: Scripted) -> None:
    model = scripted_model(claims_reply(FOUNDER_CLAIM, finish_reason="length"))
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert (draft.reply, draft.invalid_reason) == (None, "reply cut off at max_tokens")


async def test_a_cut_off_repair_gives_no_claims(scripted_model: Scripted) -> None:
    model = scripted_model(AIMessage(NOT_JSON), claims_reply(FOUNDER_CLAIM, finish_reason="length"))
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert (draft.reply, draft.invalid_reason, draft.repaired) == (None, "repair reply cut off at max_tokens", True)


async def test_a_failed_repair_call_gives_no_claims_not_an_outage(dead_llm_settings: LLMSettings) -> None:
    # First reply scripted, the repair call goes to a closed port.
    model = ScriptedChatOpenAI(
        base_url=dead_llm_settings.base_url, model="smollm2", api_key="x", max_retries=0, scripted=[AIMessage(NOT_JSON)]
    )
    draft = await writer_for(model).write(FOUNDER_QUESTION, UNITS, [])
    assert (draft.reply, draft.repaired) == (None, True)
    assert re.fullmatch(r"repair call failed: \w*ConnectionError", draft.invalid_reason), draft.invalid_reason


async def test_the_time_budget_covers_the_repair(hung_llm_settings: LLMSettings) -> None:
    model = ScriptedChatOpenAI(
        base_url=hung_llm_settings.base_url, model="smollm2", api_key="x", max_retries=0, timeout=30.0,
        scripted=[AIMessage(NOT_JSON)],
    )
    started = time.perf_counter()
    draft = await writer_for(model, llm_timeout_s=1.0).write(FOUNDER_QUESTION, UNITS, [])
    assert time.perf_counter() - started < 4
    assert (draft.reply, draft.invalid_reason, draft.repaired) == (None, "repair call failed: TimeoutError", True)


# ------------------------------------------------------------------ function calling


async def test_function_calling_reads_the_tool_call(scripted_model: Scripted) -> None:
    model = scripted_model(tool_call_reply(FOUNDER_CLAIM))
    writer = writer_for(model, structured_method="function_calling")
    draft = await writer.write(FOUNDER_QUESTION, UNITS, [])
    assert draft.reply is not None and [(c.text, c.evidence) for c in draft.reply.claims] == [FOUNDER_CLAIM]
    assert model.methods == ["function_calling"]
    [tool] = model.request_kwargs[0]["tools"]
    assert tool["function"]["name"] == "grounded_claims"
    assert tool["function"]["parameters"]["properties"]["claims"]["items"]["properties"]["evidence"]["items"]["enum"] == IDS


async def test_function_calling_repairs_broken_tool_arguments(scripted_model: Scripted) -> None:
    broken = AIMessage("", invalid_tool_calls=[
        {"name": "grounded_claims", "args": '{"claims": [{"text": "x"', "id": "call-1", "error": "bad json"}
    ])
    model = scripted_model(broken, tool_call_reply(FOUNDER_CLAIM))
    draft = await writer_for(model, structured_method="function_calling").write(FOUNDER_QUESTION, UNITS, [])
    assert draft.reply is not None and draft.repaired is True
    assert model.calls[1][-2] == AIMessage('{"claims": [{"text": "x"')


async def test_a_tool_call_with_a_content_preamble_is_read_from_the_tool_call(scripted_model: Scripted) -> None:
    # OpenAI-compatible servers may send text alongside a forced tool call; the call is the reply.
    model = scripted_model(tool_call_reply(FOUNDER_CLAIM, content="Here are the claims."), AIMessage("Still text."))
    draft = await writer_for(model, structured_method="function_calling").write(FOUNDER_QUESTION, UNITS, [])
    assert draft.reply is not None and not draft.repaired


async def test_a_refused_json_schema_is_retried_with_function_calling_for_good(
    scripted_model: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claim_writer_module, "build_claim_schema", unresolvable_claim_schema)
    # The first call really goes to the server (which answers 400); the retry's reply is scripted.
    model = scripted_model(None, tool_call_reply(FOUNDER_CLAIM))
    writer = writer_for(model)
    assert writer.structured_method == "json_schema"
    draft = await writer.write(FOUNDER_QUESTION, UNITS, [])
    assert draft.reply is not None and [(c.text, c.evidence) for c in draft.reply.claims] == [FOUNDER_CLAIM]
    assert not draft.repaired
    assert model.methods == ["json_schema", "function_calling"]
    assert model.calls[0] == model.calls[1]  # the same request, another method
    assert writer.structured_method == "function_calling"

    model.scripted.append(tool_call_reply(FOUNDER_CLAIM))
    await writer.write(FOUNDER_QUESTION, UNITS, [])
    assert model.methods == ["json_schema", "function_calling", "function_calling"]  # json_schema not tried again


async def test_a_refused_json_schema_falls_back_on_the_real_server(
    scripted_model: Scripted, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claim_writer_module, "build_claim_schema", unresolvable_claim_schema)
    # Nothing scripted; 60 tokens keep the free-text reply short (a cut-off one is not repaired).
    model = scripted_model(max_tokens=60)
    writer = writer_for(model)
    draft = await writer.write(FOUNDER_QUESTION, UNITS, [])  # no exception: the 200 reply was used
    assert model.methods[:2] == ["json_schema", "function_calling"]
    assert set(model.methods[2:]) <= {"function_calling"} and len(model.methods) <= 3
    assert writer.structured_method == "function_calling"
    assert draft.reply is None or all(set(c.evidence) <= set(IDS) for c in draft.reply.claims)


async def test_a_400_that_is_not_a_refusal_is_a_failure_not_a_fallback(llm_settings: LLMSettings) -> None:
    long_passage = Passage(chunk_id="long", doc_id="long", text="word " * 6000)
    units = build_evidence([long_passage], max_passages=1, max_passage_chars=40_000)
    writer = writer_for(build_chat_model(llm_settings))
    with pytest.raises(DependencyFailed) as raised:
        await writer.write("What is the word?", units, [])
    assert (raised.value.stage, raised.value.status_code) == ("llm", 400)
    assert "HTTP 400" in raised.value.message and "context" in raised.value.message
    assert writer.structured_method == "json_schema"


# ------------------------------------------------------------------ outages


async def test_a_dead_endpoint_is_dependency_failed_unavailable(dead_llm_settings: LLMSettings) -> None:
    writer = writer_for(build_chat_model(dead_llm_settings))
    with pytest.raises(DependencyFailed) as raised:
        await writer.write(FOUNDER_QUESTION, UNITS, [])
    assert (raised.value.stage, raised.value.kind, status_for(raised.value)) == ("llm", "unavailable", 503)
    assert re.match(r"llm unavailable: \w*ConnectionError: ", raised.value.message), raised.value.message
    assert writer.structured_method == "json_schema"


async def test_a_hung_endpoint_times_out_at_the_budget(hung_llm_settings: LLMSettings) -> None:
    writer = writer_for(build_chat_model(hung_llm_settings), llm_timeout_s=1.0)
    started = time.perf_counter()
    with pytest.raises(DependencyFailed) as raised:
        await writer.write(FOUNDER_QUESTION, UNITS, [])
    assert 0.9 < time.perf_counter() - started < 4
    assert (raised.value.kind, status_for(raised.value)) == ("timeout", 504)
    assert raised.value.message == "llm timed out: no answer within 1s"
