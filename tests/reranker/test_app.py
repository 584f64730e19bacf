from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from rag_common.embedders import ModelNotAvailableError
from rag_common.schemas import RerankResponse
from rag_reranker.app import create_app
from rag_reranker.settings import RerankerSettings

PASSAGES = [
    {"chunk_id": "a#0", "doc_id": "a", "text": "Invoices are emailed on the first business day of each month."},
    {"chunk_id": "b#0", "doc_id": "b", "text": "Rabbits are herbivores that eat grass, hay and leafy greens.", "title": "Rabbits"},
    {"chunk_id": "c#0", "doc_id": "c", "text": "The museum opens at nine and closes at five on weekdays."},
]


@pytest.fixture(scope="module")
def bi_encoder_client() -> Iterator[TestClient]:
    """The default configuration: no cross-encoder, the packaged MiniLM bi-encoder."""
    with TestClient(create_app(RerankerSettings(cross_encoder_model=""))) as client:
        yield client


def test_ready_after_start(bi_encoder_client: TestClient) -> None:
    response = bi_encoder_client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"model": "ok"}


def test_not_ready_before_the_model_is_loaded() -> None:
    app = create_app(RerankerSettings())
    client = TestClient(app)  # not entered: the lifespan has not run, so no model is loaded
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["model"] != "ok"


def test_rerank_orders_by_relevance(bi_encoder_client: TestClient) -> None:
    response = bi_encoder_client.post(
        "/v1/rerank", json={"query": "what do rabbits eat?", "passages": PASSAGES, "top_k": 2}
    )
    assert response.status_code == 200, response.text
    body = RerankResponse.model_validate(response.json())
    assert [p.chunk_id for p in body.passages][0] == "b#0"
    assert len(body.passages) == 2
    assert body.passages[0].title == "Rabbits"
    assert body.passages[0].score > body.passages[1].score
    assert body.stages == ["bi_encoder"]


def test_empty_passages(bi_encoder_client: TestClient) -> None:
    response = bi_encoder_client.post("/v1/rerank", json={"query": "anything", "passages": []})
    assert response.status_code == 200
    assert response.json()["passages"] == []


def test_missing_query_is_422(bi_encoder_client: TestClient) -> None:
    response = bi_encoder_client.post("/v1/rerank", json={"passages": PASSAGES})
    assert response.status_code == 422
    assert "query" in response.json()["error"]


def test_unknown_field_is_422(bi_encoder_client: TestClient) -> None:
    response = bi_encoder_client.post("/v1/rerank", json={"query": "q", "passages": PASSAGES, "topk": 2})
    assert response.status_code == 422


def test_cross_encoder_configured(tiny_cross_encoder_dir: Path) -> None:
    settings = RerankerSettings(cross_encoder_model=str(tiny_cross_encoder_dir), cross_encoder_max_length=128)
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200
        response = client.post("/v1/rerank", json={"query": "opening hours", "passages": PASSAGES, "top_k": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["stages"] == ["cross_encoder"]
    scores = [p["score"] for p in body["passages"]]
    assert scores == sorted(scores, reverse=True) and all(0.0 < s < 1.0 for s in scores)


def test_missing_cross_encoder_stops_start_up(tmp_path: Path) -> None:
    missing = str(tmp_path / "absent-reranker")
    with pytest.raises(ModelNotAvailableError, match="absent-reranker"):
        with TestClient(create_app(RerankerSettings(cross_encoder_model=missing))):
            pass
