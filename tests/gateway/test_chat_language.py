"""The user's language through the chat endpoints (issue 31, item 5): named once per turn (the
conversation's last language when the message cannot tell), sent to the refiner, retriever and
generator, stored with the turn, said in the response, and the language of every text the service
writes itself.

The refiner (its intent rules; its LLM is a closed port) and the generator (extractive) are the real
services served over HTTP in this process; the retriever and reranker are the contract fakes
(tests/gateway/fake_services.py: "nowhere"/"nicăieri" finds no passage), Redis is real.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import rag_generator.runtime as generator_runtime
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.messages import message
from rag_common.schemas import Passage
from rag_common.settings import LLMSettings
from rag_gateway.app import create_app
from rag_gateway.chat_graph import describe_conversation
from rag_gateway.chat_models import Turn
from rag_gateway.stage_fallbacks import answer_without_generator
from rag_generator.app import create_app as create_generator
from rag_generator.settings import GeneratorSettings
from rag_refiner.app import create_app as create_refiner
from rag_refiner.settings import RefinerSettings
from ragctl.in_process import serve_in_thread
from ragctl.stack import free_port

from .support import gateway_settings, sse_events

ROMANIAN_UNANSWERABLE = "Unde sunt stocate conversațiile? Nu le găsesc nicăieri."
ENGLISH_UNANSWERABLE = "Where are the conversations stored? I can find them nowhere."
#: A follow-up too short to tell its language by itself (py3langid is unsure of it).
UNSURE_FOLLOW_UP = "Și la master?"


@pytest.fixture(scope="module")
def real_stages(fake_services) -> Iterator[dict[str, str]]:
    """The real refiner (no LLM behind it: intent rules only) and the real generator (extractive),
    each on its own port: the gateway settings that point at them."""
    dead_llm = LLMSettings(base_url=f"http://127.0.0.1:{free_port()}/v1", max_retries=0, timeout_s=5.0)
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(generator_runtime, "build_embedder", lambda settings: embedder)
        with (
            serve_in_thread(create_refiner(RefinerSettings(intent_llm=False), dead_llm)) as refiner,
            serve_in_thread(create_generator(GeneratorSettings(mode="extractive"), dead_llm)) as generator,
        ):
            yield {"refiner_url": refiner, "generator_url": generator}


@pytest.fixture
def chat(redis_url: str, fake_services, real_stages: dict[str, str]) -> Iterator[TestClient]:
    url, calls = fake_services
    calls.clear()
    with TestClient(create_app(gateway_settings(redis_url, url, **real_stages))) as client:
        yield client


def _sent_languages(calls: list, stage: str) -> list[str | None]:
    return [body["language"] for name, body in calls if name == stage]


@pytest.mark.parametrize(
    "question, language, abstention",
    [
        (ROMANIAN_UNANSWERABLE, "ro", "Nu am găsit informația în documente."),
        (ENGLISH_UNANSWERABLE, "en", "I could not find this in the documents."),
    ],
)
def test_a_question_the_documents_do_not_answer_gets_the_abstention_in_its_language(
    chat: TestClient, fake_services, question: str, language: str, abstention: str
) -> None:
    _, calls = fake_services
    body = chat.post("/v1/chat", json={"message": question}).json()
    assert (body["answer"], body["abstained"], body["abstain_reason"], body["language"]) == (
        abstention, True, "no_passages", language,
    )
    assert _sent_languages(calls, "search") == [language]
    [turn] = chat.get(f"/v1/conversations/{body['conversation_id']}").json()["turns"]
    assert (turn["answer"], turn["language"]) == (abstention, language)


def test_an_unsure_follow_up_takes_the_conversations_language_and_each_turn_stores_its_own(
    chat: TestClient, fake_services
) -> None:
    _, calls = fake_services
    first = chat.post("/v1/chat", json={"message": ROMANIAN_UNANSWERABLE}).json()
    calls.clear()
    follow_up = chat.post(
        "/v1/chat", json={"conversation_id": first["conversation_id"], "message": UNSURE_FOLLOW_UP}
    ).json()
    assert follow_up["language"] == "ro"
    assert _sent_languages(calls, "search") == ["ro"]
    turns = chat.get(f"/v1/conversations/{first['conversation_id']}").json()["turns"]
    assert [(t["message"], t["language"]) for t in turns] == [(ROMANIAN_UNANSWERABLE, "ro"), (UNSURE_FOLLOW_UP, "ro")]
    # Without a conversation to fall back on, a message as short has no language: the texts are then
    # RAG_DEFAULT_LANGUAGE's (English), and the search is the neutral one.
    calls.clear()
    alone = chat.post("/v1/chat", json={"message": "Nicaieri?"}).json()  # "nowhere?", typed without diacritics
    assert (alone["language"], alone["answer"]) == (None, "I could not find this in the documents.")
    assert _sent_languages(calls, "search") == [None]


@pytest.mark.parametrize(
    "greeting, reply",
    [
        ("Bună ziua!", message("chitchat", "ro")),
        ("Mulțumesc!", message("thanks", "ro")),
        ("Mulțumesc frumos!", message("thanks", "ro")),
        ("Hello there!", message("chitchat", "en")),
    ],
)
def test_small_talk_is_answered_in_its_language(chat: TestClient, greeting: str, reply: str) -> None:
    # The refiner's own intent rules classify it (H-f3's Romanian rules for the Romanian ones).
    body = chat.post("/v1/chat", json={"message": greeting}).json()
    assert (body["intent"], body["answer"], body["abstained"]) == ("chitchat", reply, False)


def test_the_openai_compatible_endpoint_names_the_language_from_the_transcript(
    chat: TestClient, fake_services
) -> None:
    _, calls = fake_services
    messages = [
        {"role": "user", "content": ROMANIAN_UNANSWERABLE},
        {"role": "assistant", "content": "Nu am găsit informația în documente."},
        {"role": "user", "content": "Și nicăieri la master?"},
    ]
    response = chat.post("/v1/chat/completions", json={"model": "rag", "messages": messages})
    assert response.status_code == 200, response.text
    assert response.json()["choices"][0]["message"]["content"] == "Nu am găsit informația în documente."
    calls.clear()
    messages[-1] = {"role": "user", "content": UNSURE_FOLLOW_UP}
    assert chat.post("/v1/chat/completions", json={"model": "rag", "messages": messages}).status_code == 200
    assert _sent_languages(calls, "search") == ["ro"]


# ------------------------------------------------------------------ every stage a fake


def test_the_language_reaches_the_refiner_the_retriever_and_the_generator(client: TestClient, fake_services) -> None:
    _, calls = fake_services
    body = client.post("/v1/chat", json={"message": "Care este taxa de școlarizare la licență?"}).json()
    assert body["language"] == "ro"
    assert [(name, payload["language"]) for name, payload in calls if name != "rerank"] == [
        ("refine", "ro"), ("search", "ro"), ("generate", "ro"),
    ]


def test_the_stream_names_the_language_and_tells_a_failure_in_it(client: TestClient) -> None:
    events = sse_events(client, "/v1/chat/stream", {"message": "Care este taxa de școlarizare la licență?"})
    assert events[0][0] == "meta" and events[0][1]["language"] == "ro"
    assert events[-1][0] == "final" and events[-1][1]["language"] == "ro"
    failed = sse_events(client, "/v1/chat/stream", {"message": "Unde sunt stocate conversațiile din arhivă? search down"})
    name, data = failed[-1]
    assert (name, data["status"], data["stage"]) == ("error", 503, "retriever")
    assert data["message"] == message("error_unavailable", "ro") != message("error_unavailable", "en")
    assert data["error"].startswith("retriever unavailable")  # the operator's text stays as it was


def test_replies_set_in_the_settings_replace_the_catalogs_in_every_language(redis_url: str, fake_services) -> None:
    url, _ = fake_services
    settings = gateway_settings(redis_url, url, chitchat_reply="Hi.", thanks_reply="Welcome.")
    with TestClient(create_app(settings)) as client:
        for greeting, reply in [("hello", "Hi."), ("thanks", "Welcome."), ("hello, mulțumesc", "Welcome.")]:
            assert client.post("/v1/chat", json={"message": greeting}).json()["answer"] == reply
        # The one not set is still the catalog's.
        declined = client.post("/v1/chat", json={"message": "Will the weather be nice?"}).json()
        assert declined["answer"] == message("out_of_scope", "en")


# ------------------------------------------------------------------ the texts themselves


def test_the_meta_answer_and_the_generators_stand_in_are_written_in_the_texts_language() -> None:
    turns = [
        Turn(message="Unde e secretariatul?", refined_query="Unde e secretariatul?", answer="-", created_at=0.0),
        Turn(message="Bună ziua!", refined_query="Bună ziua!", answer="-", intent="chitchat", created_at=1.0),
    ]
    assert describe_conversation(turns, "ro") == "Până acum, în această conversație, ați întrebat:\n1. Unde e secretariatul?"
    assert describe_conversation([], "ro") == message("meta_no_questions", "ro")
    unrelated = Passage(chunk_id="a:0:x", doc_id="a", text="Biblioteca are 40.000 de volume.", score=0.5)
    stand_in = answer_without_generator("Cine conduce facultatea?", [unrelated], texts="ro")
    assert (stand_in.answer, stand_in.abstain_reason) == (message("generator_unavailable", "ro"), "generator_unavailable")
