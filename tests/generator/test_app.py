"""POST /v1/generate and /v1/generate/stream over HTTP, in-process, with the real runtime behind them.

The app runs on the test's own event loop (ASGITransport + lifespan) rather than TestClient's
private loop: langchain-openai shares one cached async HTTP client per endpoint, which must not
cross event loops. The runtime loads its embedder through ``runtime.build_embedder``; most tests
hand it the session's already-loaded model there, one test lets it load its own.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse

import rag_generator.runtime as runtime_module
from rag_common.embedders.onnx_runtime import OnnxEmbedder
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.errors import DependencyFailed
from rag_common.messages import message
from rag_common.schemas import MAX_TOP_K, GenerateResponse, Passage
from rag_common.settings import LLMSettings
from rag_generator.app import create_app, to_server_sent_event
from rag_generator.settings import GeneratorSettings
from rag_generator.stream_events import ErrorEvent, FinalEvent, TokenEvent
from ragctl.in_process import asgi_client

from .conftest import FOUNDER_QUESTION, FOUNDER_SENTENCE, OFF_TOPIC_QUESTION, assert_citations_are_source_spans

EXTRACTIVE_FOUNDER_ANSWER = f"{FOUNDER_SENTENCE} [1]"
#: The questions here are English: so is the abstention.
ABSTAIN_MESSAGE = message("abstain", "en")


@pytest.fixture(autouse=True)
def loaded_embedder(monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder) -> None:
    """The runtime gets the session's model instead of loading one per app."""
    monkeypatch.setattr(runtime_module, "build_embedder", lambda settings: embedder)


def client_for(settings: GeneratorSettings, llm_settings: LLMSettings) -> AbstractAsyncContextManager[httpx.AsyncClient]:
    return asgi_client(create_app(settings, llm_settings), "http://generator")


def body(passages: list[Passage], query: str = FOUNDER_QUESTION, **extra: Any) -> dict[str, Any]:
    return {"query": query, "passages": [p.model_dump() for p in passages], **extra}


async def sse(client: httpx.AsyncClient, payload: dict[str, Any]) -> tuple[httpx.Response, list[tuple[str, Any]]]:
    async with aconnect_sse(client, "POST", "/v1/generate/stream", json=payload) as source:
        events = [(event.event, event.json()) async for event in source.aiter_sse()]
    return source.response, events


def joined_tokens_and_final(events: list[tuple[str, Any]]) -> tuple[str, GenerateResponse]:
    names = [name for name, _ in events]
    assert names[-1] == "final" and names.count("final") == 1 and set(names[:-1]) == {"token"}, names
    tokens = [data["text"] for name, data in events[:-1]]
    assert all(isinstance(text, str) and text for text in tokens)
    assert all(set(data) == {"text"} for _, data in events[:-1])
    return "".join(tokens), GenerateResponse.model_validate(events[-1][1])


# ------------------------------------------------------------------ /v1/generate


async def test_extractive_route_answers_without_the_llm(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="extractive"), dead_llm_settings) as client:
        response = await client.post("/v1/generate", json=body(passages))
        assert response.status_code == 200, response.text
        generated = GenerateResponse.model_validate(response.json())
        assert (generated.answer, generated.mode, generated.abstained) == (EXTRACTIVE_FOUNDER_ANSWER, "extractive", False)
        [citation] = response.json()["citations"]
        start = passages[0].text.index(FOUNDER_SENTENCE)
        assert (citation["start"], citation["end"], citation["quote"]) == (start, start + len(FOUNDER_SENTENCE), FOUNDER_SENTENCE)
        assert citation["section_path"] == ["Company", "History"]

        ready = await client.get("/readyz")  # the LLM is dead, and extractive mode does not need it
        assert ready.status_code == 200 and ready.json()["checks"] == {"embedder": "ok"}
        assert (await client.get("/healthz")).json() == {"status": "ok", "service": "generator"}


async def test_off_topic_question_over_http_abstains_not_answerable(
    dead_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    # Generative mode behind a dead LLM: the gate abstains before any call, so no 503.
    async with client_for(GeneratorSettings(mode="generative"), dead_llm_settings) as client:
        response = await client.post("/v1/generate", json=body(passages, OFF_TOPIC_QUESTION))
    assert response.status_code == 200
    assert (response.json()["abstained"], response.json()["abstain_reason"]) == (True, "not_answerable")


async def test_generative_route_with_the_real_llm(llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="generative"), llm_settings) as client:
        response = await client.post("/v1/generate", json=body(passages))
        assert response.status_code == 200, response.text
        generated = GenerateResponse.model_validate(response.json())
        if generated.abstained:
            assert generated.abstain_reason in {"model_abstained", "no_supported_claim", "invalid_output"}
        else:
            assert generated.mode == "generative"
            assert_citations_are_source_spans(generated, passages)

        ready = await client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["checks"] == {"embedder": "ok", "llm": "ok"}


async def test_retriever_vectors_in_the_body_are_accepted(
    embedder: SentenceTransformerEmbedder, dead_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    vectors = embedder.encode_documents([p.text for p in passages])
    with_vectors = [p.model_copy(update={"embedding": v.tolist()}) for p, v in zip(passages, vectors)]
    query_vector = embedder.encode_queries([FOUNDER_QUESTION])[0].tolist()
    async with client_for(GeneratorSettings(mode="extractive"), dead_llm_settings) as client:
        plain = (await client.post("/v1/generate", json=body(passages))).json()
        reused = await client.post("/v1/generate", json=body(with_vectors, query_embedding=query_vector))
    assert reused.status_code == 200, reused.text
    assert (reused.json()["answer"], reused.json()["citations"]) == (plain["answer"], plain["citations"])
    assert reused.json()["answerability"] == pytest.approx(plain["answerability"], abs=1e-3)


async def test_stored_sentence_vectors_in_the_body_give_the_same_answer(
    embedder: SentenceTransformerEmbedder, dead_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    from rag_common.sentence_vectors import pack, sentence_inputs

    stored = []
    for p in passages:
        context, spans, texts = sentence_inputs(p.text, p.title, p.section_path)
        stored.append(p.model_copy(update={"sentence_vectors": pack(context, spans, embedder.encode_documents(texts))}))
    async with client_for(GeneratorSettings(mode="extractive"), dead_llm_settings) as client:
        plain = (await client.post("/v1/generate", json=body(passages))).json()
        reused = await client.post("/v1/generate", json=body(stored))
    assert reused.status_code == 200, reused.text
    assert (reused.json()["answer"], reused.json()["citations"]) == (plain["answer"], plain["citations"])
    assert reused.json()["answerability"] == pytest.approx(plain["answerability"], abs=1e-4)


async def test_well_formed_vectors_no_embedder_made_are_ignored_not_a_500(
    dead_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    import numpy as np

    from rag_common.sentence_vectors import pack, sentence_inputs

    context, spans, _ = sentence_inputs(passages[0].text, passages[0].title, passages[0].section_path)
    huge = passages[0].model_copy(update={"sentence_vectors": pack(context, spans, np.full((len(spans), 384), 3e38))})
    async with client_for(GeneratorSettings(mode="extractive"), dead_llm_settings) as client:
        plain = (await client.post("/v1/generate", json=body(passages))).json()
        odd = await client.post("/v1/generate", json=body([huge, *passages[1:]]))
    assert odd.status_code == 200, odd.text
    assert (odd.json()["answer"], odd.json()["citations"]) == (plain["answer"], plain["citations"])


BAD_SENTENCE_VECTORS = [
    {"context": "", "spans": [[0, 4]], "dim": 2, "vectors": "AAAA"},  # 3 bytes for 8
    {"context": "", "spans": [[0, 10**6]], "dim": 1, "vectors": "AAAAAA=="},  # past the text
    {"context": "", "spans": [[3, 1]], "dim": 1, "vectors": "AAAAAA=="},
    {"context": "", "spans": [[0, 4]], "dim": 1, "vectors": "%%%%"},
    {"context": "", "spans": [[0, 4]], "dim": 1},
    {"context": "", "spans": [[0, 4]], "dim": 1, "vectors": "AAAAAA==", "extra": 1},
    "AAAAAA==",
]


@pytest.mark.parametrize("bad", BAD_SENTENCE_VECTORS)
async def test_malformed_sentence_vectors_are_422_never_500(
    dead_llm_settings: LLMSettings, passages: list[Passage], bad: Any
) -> None:
    broken = [{**passages[0].model_dump(), "sentence_vectors": bad}]
    async with client_for(GeneratorSettings(mode="extractive"), dead_llm_settings) as client:
        for route in ("/v1/generate", "/v1/generate/stream"):
            response = await client.post(route, json={**body(passages), "passages": broken})
            assert response.status_code == 422, (route, response.text)
            assert "sentence_vectors" in response.json()["error"]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"query": ""}, "query"),
        ({"query": "x" * 8001}, "query"),
        ({"temperature": 0.2}, "temperature"),
        ({"passages": None}, "passages"),
        ({"passages": [{"chunk_id": "c", "doc_id": "d", "text": "t", "score": 1, "extra": 1}] * 1}, "extra"),
        ({"passages": [{"chunk_id": f"c{i}", "doc_id": "d", "text": "t"} for i in range(MAX_TOP_K + 1)]}, "passages"),
    ],
)
async def test_invalid_bodies_are_422_on_both_routes(
    dead_llm_settings: LLMSettings, passages: list[Passage], change: dict[str, Any], named: str
) -> None:
    async with client_for(GeneratorSettings(mode="extractive"), dead_llm_settings) as client:
        for route in ("/v1/generate", "/v1/generate/stream"):
            response = await client.post(route, json={**body(passages), **change})
            assert response.status_code == 422, (route, response.text)
            assert response.json()["error"].startswith("invalid request:") and named in response.json()["error"]


async def test_dead_llm_is_a_503_with_a_clear_body(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="generative"), dead_llm_settings) as client:
        response = await client.post("/v1/generate", json=body(passages))
        assert response.status_code == 503
        assert response.json()["error"].startswith("llm unavailable:") and response.json()["stage"] == "llm"

        ready = await client.get("/readyz")
        assert ready.status_code == 503
        checks = ready.json()["checks"]
        assert checks["embedder"] == "ok" and checks["llm"].startswith("llm unreachable")


async def test_dead_llm_in_auto_mode_is_a_degraded_200(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="auto"), dead_llm_settings) as client:
        response = await client.post("/v1/generate", json=body(passages))
    assert response.status_code == 200
    generated = GenerateResponse.model_validate(response.json())
    assert (generated.answer, generated.mode) == (EXTRACTIVE_FOUNDER_ANSWER, "extractive")
    assert generated.degraded[0].startswith("generator: extractive answer, the LLM failed (llm unavailable:")


async def test_hung_llm_is_a_504_within_the_budget(hung_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="generative", llm_timeout_s=1), hung_llm_settings) as client:
        started = time.perf_counter()
        response = await client.post("/v1/generate", json=body(passages))
        elapsed = time.perf_counter() - started
    assert response.status_code == 504 and elapsed < 4
    assert response.json() == {"error": "llm timed out: no answer within 1s", "stage": "llm"}


async def test_hung_llm_in_auto_mode_answers_extractively_within_the_budget(
    hung_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    async with client_for(GeneratorSettings(mode="auto", llm_timeout_s=1), hung_llm_settings) as client:
        started = time.perf_counter()
        response = await client.post("/v1/generate", json=body(passages))
        elapsed = time.perf_counter() - started
    assert response.status_code == 200 and elapsed < 4
    assert response.json()["answer"] == EXTRACTIVE_FOUNDER_ANSWER
    assert response.json()["degraded"] == ["generator: extractive answer, the LLM failed (llm timed out: no answer within 1s)"]


async def test_the_app_loads_its_own_embedder(
    monkeypatch: pytest.MonkeyPatch, embedder: SentenceTransformerEmbedder, dead_llm_settings: LLMSettings,
    passages: list[Passage],
) -> None:
    monkeypatch.undo()  # the real build_embedder: this app loads all-MiniLM-L6-v2 itself
    app = create_app(GeneratorSettings(mode="extractive"), dead_llm_settings)
    async with asgi_client(app, "http://generator") as client:
        response = await client.post("/v1/generate", json=body(passages))
        loaded = app.state.runtime.embedder
    assert response.status_code == 200 and response.json()["answer"] == EXTRACTIVE_FOUNDER_ANSWER
    # EMBEDDER_BACKEND's default: ONNX Runtime (tests/common/embedders covers the torch choice).
    assert isinstance(loaded, OnnxEmbedder) and loaded is not embedder
    assert "all-MiniLM-L6-v2" in loaded.model_id


# ------------------------------------------------------------------ /v1/generate/stream


async def test_extractive_stream_sends_tokens_then_one_final(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="extractive"), dead_llm_settings) as client:
        response, events = await sse(client, body(passages))
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
    streamed, final = joined_tokens_and_final(events)
    assert streamed == final.answer == EXTRACTIVE_FOUNDER_ANSWER
    assert final.citations[0].quote == FOUNDER_SENTENCE


async def test_generative_stream_with_the_real_llm(llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="generative"), llm_settings) as client:
        response, events = await sse(client, body(passages))
    assert response.status_code == 200
    streamed, final = joined_tokens_and_final(events)
    assert streamed == final.answer
    assert '"claims"' not in streamed  # answer text only, never the model's JSON
    if not final.abstained:
        assert_citations_are_source_spans(final, passages)


@pytest.mark.parametrize("mode", ["generative", "auto"])
async def test_abstentions_stream_as_one_token_and_a_final(
    dead_llm_settings: LLMSettings, passages: list[Passage], mode: str
) -> None:
    # Behind a dead LLM: any model call would end in an error event (or a degraded answer) instead.
    async with client_for(GeneratorSettings(mode=mode), dead_llm_settings) as client:
        _, no_passages = await sse(client, {"query": FOUNDER_QUESTION, "passages": []})
        _, off_topic = await sse(client, body(passages, OFF_TOPIC_QUESTION))
    assert no_passages == [
        ("token", {"text": ABSTAIN_MESSAGE}),
        ("final", {
            "answer": ABSTAIN_MESSAGE, "citations": [], "abstained": True, "abstain_reason": "no_passages",
            "mode": None, "answerability": None, "citation_precision": None, "claims_dropped": 0, "repaired": False,
            "degraded": [], "answer_span": None, "conflict": None,
        }),
    ]
    streamed, final = joined_tokens_and_final(off_topic)
    assert streamed == ABSTAIN_MESSAGE and final.abstain_reason == "not_answerable"


async def test_dead_llm_is_one_error_event(dead_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="generative"), dead_llm_settings) as client:
        response, events = await sse(client, body(passages))
    assert response.status_code == 200  # the stream had started; the failure is reported in-band
    [(name, error)] = events
    assert name == "error" and set(error) == {"error", "status"}
    assert error["status"] == 503 and error["error"].startswith("llm unavailable:")


async def test_hung_llm_is_one_504_error_event(hung_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="generative", llm_timeout_s=1), hung_llm_settings) as client:
        started = time.perf_counter()
        _, events = await sse(client, body(passages))
        elapsed = time.perf_counter() - started
    assert events == [("error", {"error": "llm timed out: no answer within 1s", "status": 504})]
    assert elapsed < 4


async def test_hung_llm_in_auto_mode_streams_the_fallback(hung_llm_settings: LLMSettings, passages: list[Passage]) -> None:
    async with client_for(GeneratorSettings(mode="auto", llm_timeout_s=1), hung_llm_settings) as client:
        _, events = await sse(client, body(passages))
    streamed, final = joined_tokens_and_final(events)
    assert streamed == final.answer == EXTRACTIVE_FOUNDER_ANSWER and final.degraded


class ExplodingGenerator:
    """Stands in for the runtime's generator: fails after the stream has started."""

    async def stream(self, request: object) -> AsyncIterator[TokenEvent]:
        yield TokenEvent("partial")
        raise RuntimeError("boom")


async def test_an_unexpected_failure_mid_stream_is_an_in_band_500(
    dead_llm_settings: LLMSettings, passages: list[Passage]
) -> None:
    app = create_app(GeneratorSettings(mode="extractive"), dead_llm_settings)
    async with asgi_client(app, "http://generator") as client:
        app.state.runtime.generator = ExplodingGenerator()
        _, events = await sse(client, body(passages))
    assert events == [("token", {"text": "partial"}), ("error", {"error": "internal error: RuntimeError", "status": 500})]


def test_stream_events_map_to_server_sent_events() -> None:
    token = to_server_sent_event(TokenEvent("Ingrid"))
    assert (token.event, token.data) == ("token", {"text": "Ingrid"})
    response = GenerateResponse(answer="a", citations=[], abstained=False)
    final = to_server_sent_event(FinalEvent(response))
    assert (final.event, final.data) == ("final", response)
    for error, status in [
        (DependencyFailed("llm", "timeout", "no answer within 1s"), 504),
        (DependencyFailed("llm", "unavailable", "HTTP 500: boom", 500), 503),
    ]:
        event = to_server_sent_event(ErrorEvent(error))
        assert (event.event, event.data) == ("error", {"error": error.message, "status": status})
