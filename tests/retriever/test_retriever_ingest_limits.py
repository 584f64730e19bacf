"""The per-document and per-request ingest limits through the retriever's HTTP app (real model, real
index): a request over one is a 413 naming the limit, its setting and its value, and nothing of it is
embedded or written, by the JSON route and by uploads alike (issue 29)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rag_common.errors import PayloadTooLarge
from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_common.schemas import DocumentIn
from rag_retriever.app import create_app
from rag_retriever.ingest_limits import IngestLimits
from rag_retriever.settings import RetrieverSettings

MAX_CHARS = 2_000
MAX_CHUNKS = 3
#: A sentence of about 25 tokens: 40 of them are far over 3 chunks of 200 tokens, 2 of them one chunk.
SENTENCE = "The pump in hall seven needs new bearings every twelve months, and its seals every six months. "


def identity_header() -> dict[str, str]:
    identity = Identity(tenant="acme", user="ann", groups=[], scopes=["chat", "ingest"])
    return {IDENTITY_HEADER: encode_identity(identity)}


class CountingEmbedder:
    """The real embedder, counting the documents it is asked to embed (the limits come before any)."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self.documents = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.documents += len(texts)
        return self._embedder.encode_documents(texts)

    def encode_documents_pooled(self, texts: list[str], pools: list[Any]) -> tuple[np.ndarray, list[np.ndarray]]:
        self.documents += len(texts)
        return self._embedder.encode_documents_pooled(texts, pools)


@pytest.fixture(scope="module")
def counting(embedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


@pytest.fixture(scope="module")
def client(tmp_path_factory, counting: CountingEmbedder) -> Iterator[TestClient]:
    settings = RetrieverSettings(
        index_dir=str(tmp_path_factory.mktemp("limits") / "index"),
        max_document_chars=MAX_CHARS,
        max_chunks_per_request=MAX_CHUNKS,
    )
    with TestClient(create_app(settings, embedder=counting), headers=identity_header()) as test_client:
        yield test_client


def listed(client: TestClient) -> list[str]:
    response = client.get("/v1/documents")
    assert response.status_code == 200, response.text
    return [document["doc_id"] for document in response.json()["documents"]]


def assert_refused(response, setting: str, value: int, counting: CountingEmbedder, embedded_before: int) -> dict:
    assert response.status_code == 413, response.text
    body = response.json()
    assert setting in body["error"] and f"{value:,}" in body["error"] and f"={value}" in body["error"]
    assert body["detail"]["setting"] == setting and body["detail"]["value"] == value
    assert counting.documents == embedded_before, "a refused request embedded something"
    return body


def test_a_document_over_the_character_limit_is_refused_whole_before_anything_is_written(client, counting):
    before = counting.documents
    documents = [
        {"id": "fits", "text": SENTENCE},
        {"id": "too-long", "text": "x" * (MAX_CHARS + 1)},
    ]
    body = assert_refused(
        client.post("/v1/documents", json={"documents": documents}), "RETRIEVER_MAX_DOCUMENT_CHARS", MAX_CHARS,
        counting, before,
    )
    assert body["detail"]["limit"] == "max_document_chars" and body["detail"]["document"] == "too-long"
    assert body["detail"]["characters"] == MAX_CHARS + 1
    assert listed(client) == []


def test_a_document_of_exactly_the_limit_is_accepted(client):
    text = (SENTENCE * (MAX_CHARS // len(SENTENCE) + 1))[:MAX_CHARS]
    response = client.post("/v1/documents", json={"documents": [{"id": "at-limit", "text": text}]})
    assert response.status_code == 200, response.text
    assert response.json()["doc_ids"] == ["at-limit"]
    assert client.delete("/v1/documents/at-limit").status_code == 200


def test_a_request_over_the_chunk_limit_is_refused_before_embedding(client, counting):
    before = counting.documents
    # Each document is under the character limit; together they make more chunks than allowed.
    documents = [{"id": f"part-{i}", "text": SENTENCE * 18} for i in range(3)]
    body = assert_refused(
        client.post("/v1/documents", json={"documents": documents}), "RETRIEVER_MAX_CHUNKS_PER_REQUEST", MAX_CHUNKS,
        counting, before,
    )
    assert body["detail"]["limit"] == "max_chunks_per_request" and body["detail"]["chunks"] > MAX_CHUNKS
    assert listed(client) == []
    # The same documents in requests within the limit go in.
    for document in documents:
        response = client.post("/v1/documents", json={"documents": [document]})
        assert response.status_code == 200, response.text
        assert 1 <= response.json()["chunks"] <= MAX_CHUNKS
    assert sorted(listed(client)) == ["part-0", "part-1", "part-2"]
    for document in documents:
        assert client.delete(f"/v1/documents/{document['id']}").status_code == 200


def test_an_uploaded_file_over_the_character_limit_is_refused(client, counting):
    before = counting.documents
    files = [
        ("files", ("small.txt", SENTENCE.encode(), "text/plain")),
        ("files", ("large.txt", ("word " * (MAX_CHARS // 5 + 10)).encode(), "text/plain")),
    ]
    body = assert_refused(
        client.post("/v1/documents/upload", files=files), "RETRIEVER_MAX_DOCUMENT_CHARS", MAX_CHARS, counting, before
    )
    assert body["detail"]["document"] == "large.txt"
    assert listed(client) == []


def test_an_upload_over_the_chunk_limit_is_refused(client, counting):
    before = counting.documents
    markdown = "".join(f"# Part {i}\n\n{SENTENCE}\n\n" for i in range(MAX_CHUNKS + 2))  # one chunk per section
    files = [("files", ("manual.md", markdown.encode(), "text/markdown"))]
    assert_refused(
        client.post("/v1/documents/upload", files=files), "RETRIEVER_MAX_CHUNKS_PER_REQUEST", MAX_CHUNKS, counting, before
    )
    assert listed(client) == []


def test_limits_unit():
    limits = IngestLimits(max_document_chars=10, max_chunks_per_request=2)
    limits.check_documents([DocumentIn(text="x" * 10)])
    limits.check_chunks(2)
    with pytest.raises(PayloadTooLarge, match=r"documents\[1\] has 11 characters.*RETRIEVER_MAX_DOCUMENT_CHARS=10"):
        limits.check_documents([DocumentIn(text="short"), DocumentIn(text="x" * 11)])
    with pytest.raises(PayloadTooLarge, match=r"3 chunks.*RETRIEVER_MAX_CHUNKS_PER_REQUEST=2"):
        limits.check_chunks(3)
    IngestLimits.unlimited().check_documents([DocumentIn(text="x" * 100_000)])  # no limits: tools and tests
    IngestLimits.unlimited().check_chunks(10**9)
    defaults = IngestLimits.of(RetrieverSettings())
    # The default accepts the 8 MiB documents of bench/ingest_scaling.py.
    assert defaults.max_document_chars is not None and defaults.max_document_chars >= 8 * 1024 * 1024
