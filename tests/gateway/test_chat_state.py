"""The chat request as data (issue 30, item 3): one policy built from the settings alone, one typed
state, and one result that the stored turn, the response and the query-log record all come from."""

from __future__ import annotations

from dataclasses import MISSING, fields

import pytest
from fastapi.testclient import TestClient

from rag_common.identity import Identity
from rag_common.schemas import Citation, GenerateResponse, RefineResponse
from rag_gateway.chat_policy import ChatPolicy
from rag_gateway.chat_state import ChatInput, ChatResult, ChatState
from rag_gateway.query_log import turn_record
from rag_gateway.settings import GatewaySettings

ASKER = Identity(tenant="acme", user="ann")


def test_the_policy_is_built_from_the_settings_alone_and_has_no_defaults_of_its_own() -> None:
    settings = GatewaySettings(
        default_top_k=7, hyde_default=True, retrieval_candidates=12, search_mode="bm25", pass_embeddings=False,
        pass_sentence_vectors=False, history_turns=2, chitchat_reply="hi", thanks_reply="np", out_of_scope_reply="no",
    )
    policy = ChatPolicy.of(settings)
    assert all(field.default is MISSING and field.default_factory is MISSING for field in fields(ChatPolicy))
    assert (policy.default_top_k, policy.hyde_default, policy.retrieval_candidates) == (7, True, 12)
    assert (policy.search_mode, policy.pass_embeddings, policy.pass_sentence_vectors) == ("bm25", False, False)
    assert policy.history == settings.history_window()
    assert (policy.replies.chitchat, policy.replies.thanks, policy.replies.out_of_scope) == ("hi", "np", "no")
    # What a request does not say comes from the policy; what it says wins.
    assert (policy.top_k(None), policy.top_k(3)) == (7, 3)
    assert (policy.hyde(None), policy.hyde(False)) == (True, False)
    # The depth rule: the candidate depth, or more when more passages are wanted.
    assert (policy.search_depth(5), policy.search_depth(30)) == (12, 30)


def _finished_state(*, conversation_id: str | None = "c1") -> ChatState:
    citation = Citation(id=1, source="a.md", title="A", chunk_id="a:0:x", score=0.9, quote="Acme makes rockets.")
    request = ChatInput(
        identity=ASKER, conversation_id=conversation_id, message="what does it make?", top_k=3, hyde=False,
        stream=False, transcript=(),
    )
    return ChatState(
        request=request,
        refined=RefineResponse(query="what does Acme make?", rewritten=True, method="llm", intent="rag"),
        generation=GenerateResponse(
            answer="Rockets [1]", citations=[citation], abstained=False, mode="generative", answerability=0.8,
            citation_precision=1.0, claims_dropped=1,
        ),
        degraded=["reranker stage diffusion failed: x"],
        timings_ms={"refine": 1.0, "generate": 2.0},
    )


def test_the_turn_the_response_and_the_log_record_say_the_same_thing() -> None:
    state = _finished_state()
    result = ChatResult.of(state).stored_at(4)
    turn, response = result.to_turn(), result.to_response(state.timings_with_total(0.0))
    record = turn_record(result, endpoint="chat", timings_ms=response.timings_ms, salt="s")
    assert (turn.message, record.question) == ("what does it make?", "what does it make?")
    assert turn.refined_query == response.refined_query == record.refined_query == "what does Acme make?"
    assert turn.answer == response.answer == record.answer == "Rockets [1]"
    assert turn.citations == response.citations and record.citation_count == 1
    assert turn.intent == response.intent == record.intent == "rag"
    assert turn.abstained is response.abstained is record.abstained is False
    assert turn.turn_id == result.turn_id == record.turn_id == record.record_id
    assert response.degraded == record.degraded == ["reranker stage diffusion failed: x"]
    assert (response.conversation_id, record.conversation_id, record.turn_index) == ("c1", "c1", 4)
    assert (response.answer_mode, response.answerability, response.claims_dropped) == ("generative", 0.8, 1)
    assert record.stage_ms == response.timings_ms and "total" in response.timings_ms


def test_a_stateless_result_has_no_conversation_and_no_index() -> None:
    result = ChatResult.of(_finished_state(conversation_id=None))
    assert result.to_response({}).conversation_id == ""
    assert turn_record(result, endpoint="completions", timings_ms={}, salt="").turn_index is None


def test_a_state_read_before_its_node_ran_says_so() -> None:
    state = ChatState(request=_finished_state().request)
    with pytest.raises(RuntimeError, match="refine has not run"):
        state.refinement()
    with pytest.raises(RuntimeError, match="save_turn has not run"):
        state.finished()


@pytest.mark.parametrize("hyde", [True, False])
def test_hyde_is_decided_once_and_generation_gets_the_query_embedding_only_without_it(
    client: TestClient, fake_services, hyde: bool
) -> None:
    _, calls = fake_services
    calls.clear()
    assert client.post("/v1/chat", json={"message": "What is Acme?", "hyde": hyde}).status_code == 200
    by_name = dict(calls)
    assert by_name["search"]["query"].startswith("Hypothetical") is hyde
    # The reranker gets the search's embedding either way; the generator only when it is the query's.
    assert by_name["rerank"]["query_embedding"] == [1.0, 0.0]
    assert by_name["generate"]["query_embedding"] == (None if hyde else [1.0, 0.0])
