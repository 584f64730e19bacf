"""Intent branches, HyDE and the history token budget, through /v1/chat over real HTTP fakes and Redis."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from rag_common import messages
from rag_common.schemas import HistoryTurn
from rag_gateway.app import create_app
from rag_common.history import turn_tokens

from .support import gateway_settings


def _names(calls: list) -> list[str]:
    return [name for name, _ in calls]


@pytest.mark.parametrize(
    "message, intent, answer, abstained",
    [
        ("Hello there!", "chitchat", messages.message("chitchat", "en"), False),
        ("thanks a lot", "chitchat", messages.message("thanks", "en"), False),
        ("Will the weather be nice tomorrow?", "out_of_scope", messages.message("out_of_scope", "en"), True),
    ],
)
def test_non_rag_intents_answer_without_retrieval_and_are_stored(
    client: TestClient, fake_services, message: str, intent: str, answer: str, abstained: bool
) -> None:
    _, calls = fake_services
    response = client.post("/v1/chat", json={"message": message})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["intent"], body["answer"], body["abstained"], body["citations"]) == (intent, answer, abstained, [])
    assert _names(calls) == ["refine"]  # no search, rerank or generate
    turns = client.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"]
    assert [(t["message"], t["intent"], t["answer"], t["abstained"]) for t in turns] == [
        (message, intent, answer, abstained)
    ]


def test_rag_intent_goes_through_every_stage_and_stores_the_intent(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    body = client.post("/v1/chat", json={"message": "What is Acme?"}).json()
    assert body["intent"] == "rag" and body["citation_precision"] == 1.0
    assert _names(calls) == ["refine", "search", "rerank", "generate"]
    turn = client.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"][0]
    assert turn["intent"] == "rag"
    assert turn["refined_query"] == "What is Acme?"
    assert [c["chunk_id"] for c in turn["citations"]] == [c["chunk_id"] for c in body["citations"]]


def test_meta_lists_the_earlier_questions_from_the_store(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    cid = client.post("/v1/chat", json={"message": "What is Acme?"}).json()["conversation_id"]
    client.post("/v1/chat", json={"conversation_id": cid, "message": "hello"})
    client.post("/v1/chat", json={"conversation_id": cid, "message": "Who founded it?"})
    calls.clear()
    response = client.post("/v1/chat", json={"conversation_id": cid, "message": "What did I ask so far?"})
    body = response.json()
    assert body["intent"] == "meta"
    # Small talk is left out; the questions are the user's own words, in order.
    assert body["answer"] == "So far in this conversation you asked:\n1. What is Acme?\n2. Who founded it?"
    assert _names(calls) == ["readable", "refine"]  # the history's readable check, then no search
    turns = client.get(f"/v1/conversations/{cid}").json()["turns"]
    assert [t["intent"] for t in turns] == ["rag", "chitchat", "rag", "meta"]


def test_meta_on_a_new_conversation(client: TestClient) -> None:
    body = client.post("/v1/chat", json={"message": "What have I asked?"}).json()
    assert body["intent"] == "meta"
    assert body["answer"] == "You haven't asked me anything about the documents yet in this conversation."


def test_hyde_query_is_used_for_search_only(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    body = client.post("/v1/chat", json={"message": "What is Acme?", "hyde": True}).json()
    by_name = dict(calls)
    assert by_name["refine"]["hyde"] is True
    assert by_name["search"]["query"] == "Hypothetical passage answering: What is Acme?"
    assert by_name["rerank"]["query"] == "What is Acme?"
    assert by_name["generate"]["query"] == "What is Acme?"
    assert body["refined_query"] == "What is Acme?"


@pytest.mark.parametrize("default, requested, sent", [(False, None, False), (True, None, True), (True, False, False)])
def test_hyde_defaults_to_the_gateway_setting(redis_url, fake_services, default, requested, sent) -> None:
    url, calls = fake_services
    calls.clear()
    with TestClient(create_app(gateway_settings(redis_url, url, hyde_default=default))) as client:
        payload = {"message": "What is Acme?"} | ({} if requested is None else {"hyde": requested})
        assert client.post("/v1/chat", json=payload).status_code == 200
    by_name = dict(calls)
    assert by_name["refine"]["hyde"] is sent
    assert by_name["search"]["query"].startswith("Hypothetical") is sent


def _history_sent(calls: list, stage: str) -> list[dict]:
    return [payload["history"] for name, payload in calls if name == stage][-1]


def test_history_is_cut_to_the_token_budget(redis_url, fake_services) -> None:
    url, calls = fake_services
    questions = ["What is Acme?", "Who founded Acme " + "and why " * 30 + "?", "Where is it?"]

    def run(budget: int, turns: int = 3) -> tuple[list[dict], list[dict]]:
        calls.clear()
        settings = gateway_settings(
                redis_url, url, history_token_budget=budget, history_turns=turns,
                history_question_chars=100_000, history_answer_chars=100_000,  # only the token budget cuts here
            )
        with TestClient(create_app(settings)) as client:
            cid = None
            for q in questions:
                cid = client.post("/v1/chat", json={"conversation_id": cid, "message": q}).json()["conversation_id"]
            stored = client.get(f"/v1/conversations/{cid}").json()["turns"]
            calls.clear()
            client.post("/v1/chat", json={"conversation_id": cid, "message": "And then?"})
        history = [HistoryTurn(question=t["refined_query"], answer=t["answer"]) for t in stored]
        return _history_sent(calls, "refine"), history

    sent, history = run(budget=100_000)
    assert len(sent) == 3  # GATEWAY_HISTORY_TURNS stays the upper bound
    last_two = turn_tokens(history[1]) + turn_tokens(history[2])
    # Exactly the last two fit; one token less and the long middle turn (and all before it) goes.
    assert len(run(budget=last_two)[0]) == 2
    sent, _ = run(budget=last_two - 1)
    assert [t["question"] for t in sent] == [history[2].question]
    assert run(budget=turn_tokens(history[2]) - 1)[0] == []
    sent, _ = run(budget=100_000, turns=1)
    assert len(sent) == 1
    # The generator gets the same cut history as the refiner.
    run(budget=last_two)
    assert _history_sent(calls, "generate") == _history_sent(calls, "refine")
