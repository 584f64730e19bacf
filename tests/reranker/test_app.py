"""The reranker's HTTP API through the real app (lifespan, real MiniLM, the tiny cross-encoder)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rag_common.embedders import ModelNotAvailableError
from rag_common.schemas import Passage, RerankResponse
from rag_common.settings import LLMSettings
from rag_reranker.app import create_app
from rag_reranker.batching import MicroBatcher, UnbatchedScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.settings import RerankerSettings
from ragctl.in_process import asgi_client

PASSAGES = [
    {"chunk_id": "a#0", "doc_id": "a", "text": "Invoices are emailed on the first business day of each month.", "score": 0.9},
    {"chunk_id": "b#0", "doc_id": "b", "text": "Rabbits are herbivores that eat grass, hay and leafy greens.", "title": "Rabbits", "score": 0.8},
    {"chunk_id": "c#0", "doc_id": "c", "text": "The museum opens at nine and closes at five on weekdays.", "score": 0.7},
    {"chunk_id": "d#0", "doc_id": "d", "text": "Rabbits need fresh water and hay every day.", "score": 0.6},
]
#: Nothing listens here, so adaptive λ (if asked for) falls back at once instead of reaching an LLM.
NO_LLM = LLMSettings(base_url="http://127.0.0.1:9/v1", timeout_s=2.0, max_retries=0)


@pytest.fixture(scope="module")
def client() -> Iterator[TestClient]:
    """The default configuration: no cross-encoder, the packaged MiniLM embedder."""
    with TestClient(create_app(RerankerSettings(cross_encoder_model=""), NO_LLM)) as client:
        yield client


def _rerank(client: TestClient, **body: object):  # noqa: ANN202
    return client.post("/v1/rerank", json={"query": "what do rabbits eat?", "passages": PASSAGES, **body})


def test_not_ready_before_the_lifespan_ran() -> None:
    client = TestClient(create_app(RerankerSettings(), NO_LLM))  # not entered: no model is loaded
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"] == {"runtime": "not started"}


def test_ready_after_start(client: TestClient) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"model": "ok"}
    assert client.get("/healthz").json()["service"] == "reranker"


def test_default_chain_skips_the_missing_cross_encoder(client: TestClient) -> None:
    response = _rerank(client, top_k=3)
    assert response.status_code == 200, response.text
    body = RerankResponse.model_validate(response.json())
    assert [p.chunk_id for p in body.ranking] == ["a#0", "b#0", "c#0"]  # retriever order kept
    assert body.stages == [] and not body.degraded
    (report,) = body.reports
    assert report.name == "cross_encoder" and report.status == "skipped"
    assert "RERANKER_CROSS_ENCODER_MODEL" in report.reason


def test_rerank_with_a_chain(client: TestClient) -> None:
    chain = [{"name": "diffusion", "alpha": 0.5}, {"name": "gmmr", "mmr_lambda": 1.0, "relevance": "cosine"}]
    response = _rerank(client, top_k=2, stages=chain)
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stages"] == ["diffusion", "gmmr"]
    assert [r["status"] for r in body["reports"]] == ["ran", "ran"]
    assert body["reports"][0]["detail"]["alpha"] == 0.5 and body["reports"][1]["detail"] == {"lambda": 1.0, "relevance": "cosine"}
    assert body["degraded"] is False
    ids = [p["chunk_id"] for p in body["ranking"]]
    # λ = 1 is pure relevance to the query: the two rabbit passages.
    assert sorted(ids) == ["b#0", "d#0"]
    # Only the decision travels back (no text, no embedding); the caller's passages keep every field.
    assert all(set(p) == {"chunk_id", "score"} for p in body["ranking"])
    ranked = RerankResponse.model_validate(body).ranked_passages([Passage.model_validate(p) for p in PASSAGES])
    assert ranked[ids.index("b#0")].title == "Rabbits"


def test_adaptive_lambda_without_a_reachable_llm_still_answers(client: TestClient) -> None:
    response = _rerank(client, top_k=2, stages=[{"name": "gmmr", "mmr_lambda": "adaptive"}])
    assert response.status_code == 200, response.text
    body = response.json()
    detail = body["reports"][0]["detail"]
    assert detail["lambda"] == RerankerSettings().mmr_lambda and detail["lambda_policy"] == "fixed" and "evaluator failed" in detail["fallback"]
    assert body["degraded"] is False and len(body["ranking"]) == 2


def test_request_embeddings_are_accepted(client: TestClient) -> None:
    passages = [{**p, "embedding": list(np.eye(384)[i])} for i, p in enumerate(PASSAGES)]
    query_embedding = list(np.eye(384)[2])
    response = _rerank(
        client, passages=passages, top_k=1, query_embedding=query_embedding, stages=[{"name": "gmmr", "mmr_lambda": 1.0, "relevance": "cosine"}]
    )
    assert response.status_code == 200, response.text
    assert [p["chunk_id"] for p in response.json()["ranking"]] == ["c#0"]


def test_embedding_of_the_wrong_dimension_is_422(client: TestClient) -> None:
    passages = [{**p, "embedding": [1.0, 0.0, 0.0]} for p in PASSAGES]
    response = _rerank(client, passages=passages, stages=[{"name": "diffusion"}])
    assert response.status_code == 422
    assert "dimension" in response.json()["error"]


def test_empty_passages(client: TestClient) -> None:
    response = client.post("/v1/rerank", json={"query": "anything", "passages": []})
    assert response.status_code == 200
    assert response.json()["ranking"] == []


@pytest.mark.parametrize(
    ("body", "mentions"),
    [
        ({"query": "q", "passages": PASSAGES, "stages": [{"name": "bi_encoder"}]}, "stages"),
        ({"query": "q", "passages": PASSAGES, "stages": [{"name": "gmmr", "mmr_lambda": 1.5}]}, "mmr_lambda"),
        ({"query": "q", "passages": PASSAGES, "stages": [{"name": "diffusion", "alpha": 1.0}]}, "alpha"),
        ({"query": "q", "passages": PASSAGES, "stages": [{"name": "gmmr", "lambda": 0.5}]}, "lambda"),
        ({"query": "q", "passages": PASSAGES, "topk": 2}, "topk"),
        ({"passages": PASSAGES}, "query"),
        ({"query": "q", "passages": PASSAGES, "top_k": 0}, "top_k"),
    ],
    ids=["unknown-stage", "mmr-lambda-1.5", "alpha-1", "unknown-stage-field", "unknown-field", "missing-query", "top-k-0"],
)
def test_invalid_requests_are_422(client: TestClient, body: dict, mentions: str) -> None:
    response = client.post("/v1/rerank", json=body)
    assert response.status_code == 422, response.text
    assert mentions in response.json()["error"]


def test_metrics_expose_the_reranker_series(client: TestClient) -> None:
    assert _rerank(client, top_k=2, stages=[{"name": "diffusion"}]).status_code == 200
    text = client.get("/metrics").text
    for name, kind in [
        ("rag_reranker_queue_pairs", "gauge"),
        ("rag_reranker_inflight_requests", "gauge"),
        ("rag_reranker_request_seconds", "histogram"),
        ("rag_reranker_batch_pairs", "histogram"),
        ("rag_reranker_stage_seconds", "histogram"),
    ]:
        assert f"# TYPE {name} {kind}" in text, name
    assert 'rag_reranker_stage_seconds_count{stage="diffusion"}' in text
    assert "rag_reranker_request_seconds_count" in text


# --------------------------------------------------------------------------- with the cross-encoder


def test_cross_encoder_configured(tiny_cross_encoder_dir: Path, tiny_cross_encoder: CrossEncoderScorer) -> None:
    settings = RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), cross_encoder_max_length=128, batch_max_wait_ms=5)
    with TestClient(create_app(settings, NO_LLM)) as client:
        assert client.get("/readyz").status_code == 200
        assert isinstance(client.app.state.runtime.pair_queue, MicroBatcher)
        response = client.post("/v1/rerank", json={"query": "opening hours", "passages": PASSAGES, "top_k": 4})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stages"] == ["cross_encoder"]
    assert body["reports"][0]["detail"] == {"model": str(tiny_cross_encoder_dir)}
    scores = [p["score"] for p in body["ranking"]]
    assert scores == sorted(scores, reverse=True) and all(0.0 < s < 1.0 for s in scores)
    expected = tiny_cross_encoder.score("opening hours", [p["text"] for p in PASSAGES])
    assert [p["chunk_id"] for p in body["ranking"]] == [PASSAGES[i]["chunk_id"] for i in np.argsort(-expected, kind="stable")]


async def test_concurrent_http_requests_share_cross_encoder_calls(
    tiny_cross_encoder_dir: Path, tiny_cross_encoder: CrossEncoderScorer
) -> None:
    settings = RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), batch_max_wait_ms=200)
    app = create_app(settings, NO_LLM)
    queries = ["opening hours", "rabbit food", "invoices", "museum", "hay", "water"]
    async with asgi_client(app, "http://reranker") as http:
        responses = await asyncio.gather(
            *(http.post("/v1/rerank", json={"query": q, "passages": PASSAGES, "top_k": 4}) for q in queries)
        )
        batcher = app.state.runtime.pair_queue
        assert isinstance(batcher, MicroBatcher)
        assert batcher.pairs_scored == len(queries) * len(PASSAGES)
        assert batcher.calls < len(queries)
    for query, response in zip(queries, responses):
        assert response.status_code == 200, response.text
        by_id = {p["chunk_id"]: p["score"] for p in response.json()["ranking"]}
        expected = tiny_cross_encoder.score(query, [p["text"] for p in PASSAGES])
        for passage, score in zip(PASSAGES, expected):
            assert by_id[passage["chunk_id"]] == pytest.approx(float(score), abs=1e-5)


def test_unbatched_app_gives_the_same_scores(tiny_cross_encoder_dir: Path, tiny_cross_encoder: CrossEncoderScorer) -> None:
    settings = RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), batch_max_wait_ms=0)
    with TestClient(create_app(settings, NO_LLM)) as client:
        assert isinstance(client.app.state.runtime.pair_queue, UnbatchedScorer)
        response = client.post("/v1/rerank", json={"query": "rabbit food", "passages": PASSAGES, "top_k": 4})
    assert response.status_code == 200, response.text
    expected = tiny_cross_encoder.score("rabbit food", [p["text"] for p in PASSAGES])
    by_id = {p["chunk_id"]: p["score"] for p in response.json()["ranking"]}
    assert [by_id[p["chunk_id"]] for p in PASSAGES] == pytest.approx([float(s) for s in expected], abs=1e-5)


def test_missing_cross_encoder_stops_start_up(tmp_path: Path) -> None:
    missing = str(tmp_path / "absent-reranker")
    with pytest.raises(ModelNotAvailableError) as excinfo:
        with TestClient(create_app(RerankerSettings(cross_encoder_model=missing), NO_LLM)):
            pass
    message = str(excinfo.value)
    assert "RERANKER_CROSS_ENCODER_MODEL" in message and "absent-reranker" in message
