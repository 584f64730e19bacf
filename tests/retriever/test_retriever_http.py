"""The HTTP API end to end in-process: real lifespan, real model, real index in a temp directory."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator

import numpy as np
import pytest
from fastapi.testclient import TestClient

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_common.schemas import DocumentIn
from rag_retriever.app import create_app
from rag_retriever.embed_template import EmbedTemplate
from rag_retriever.runtime import content_digest
from rag_retriever.settings import RetrieverSettings

UPLOAD_LIMIT_MB = 0.01  # 10 KiB, so the size check is cheap to exercise


def identity_header(tenant: str = "acme", user: str = "ann", groups: tuple[str, ...] = ()) -> dict[str, str]:
    """``X-RAG-Identity`` as the gateway sends it."""
    identity = Identity(tenant=tenant, user=user, groups=list(groups), scopes=["chat", "ingest"])
    return {IDENTITY_HEADER: encode_identity(identity)}


def corpus_payload(corpus_documents: list[DocumentIn]) -> dict:
    """The corpus as one caller of tenant ``acme`` sends it: its documents state no tenant of their own."""
    documents = [document.model_copy(update={"metadata": {}}) for document in corpus_documents]
    return {"documents": [document.model_dump(mode="json") for document in documents]}


@pytest.fixture(scope="module")
def client(tmp_path_factory, embedder, corpus_documents: list[DocumentIn]) -> Iterator[TestClient]:
    settings = RetrieverSettings(
        index_dir=str(tmp_path_factory.mktemp("http") / "index"), max_upload_mb=UPLOAD_LIMIT_MB
    )
    # Every request carries the identity of ann (tenant acme) unless a test sends another.
    with TestClient(create_app(settings, embedder=embedder), headers=identity_header()) as test_client:
        yield test_client


def test_ready_after_startup(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json()["checks"] == {"embedder": "ok", "index": "ok"}


def test_ingest_json_then_search(client, corpus_documents):
    payload = corpus_payload(corpus_documents)
    response = client.post("/v1/documents", json=payload)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["documents"], body["chunks"], body["skipped"], body["failed"]) == (12, 12, 0, [])

    again = client.post("/v1/documents", json=payload).json()
    assert (again["documents"], again["skipped"]) == (0, 12)

    response = client.post("/v1/search", json={"query": "mountain spewing molten rock", "top_k": 3})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["mode"] == "hybrid"
    assert body["passages"][0]["doc_id"] == "volcanoes"
    assert len(body["passages"]) == 3
    assert set(body["timings_ms"]) == {"embed", "search", "total"}


@pytest.mark.parametrize("mode", ["dense", "bm25", "hybrid"])
def test_search_with_include_embeddings_returns_unit_vectors(client, corpus_documents, embedder, mode):
    payload = corpus_payload(corpus_documents)
    assert client.post("/v1/documents", json=payload).status_code == 200  # no-op if already ingested
    query = "the volcano and its lava crust"  # "the", "and": every document has a BM25 hit
    request = {"query": query, "mode": mode, "top_k": 5}

    body = client.post("/v1/search", json={**request, "include_embeddings": True}).json()
    plain = client.post("/v1/search", json=request).json()

    # The query's own embedding, in every mode (bm25 embeds it just for this).
    query_embedding = np.asarray(body["query_embedding"], dtype=np.float64)
    assert query_embedding.shape == (384,)
    assert np.linalg.norm(query_embedding) == pytest.approx(1.0, abs=1e-5)
    np.testing.assert_allclose(query_embedding, embedder.encode_queries([query])[0], rtol=0, atol=1e-6)
    assert "embed" in body["timings_ms"]

    passages = body["passages"]
    assert len(passages) == 5
    for passage in passages:
        embedding = np.asarray(passage["embedding"], dtype=np.float64)
        assert embedding.shape == (384,)
        assert np.linalg.norm(embedding) == pytest.approx(1.0, abs=1e-5)
        # Full float32 precision on the wire: every value is a float32 exactly, none rounded.
        assert np.array_equal(embedding.astype(np.float32).astype(np.float64), embedding)
        # It is the stored embedding of what the embedder saw of this passage: its own text in the
        # default template (title and section path first; RETRIEVER_EMBED_TEMPLATE).
        seen = EmbedTemplate(RetrieverSettings().embed_template).render(
            passage["text"], passage["title"], passage["section_path"]
        )
        assert passage["text"] in seen
        np.testing.assert_allclose(embedding, embedder.encode_documents([seen])[0], rtol=0, atol=1e-5)
        if mode == "dense":
            # Dense score = (1 + cosine) / 2, and both vectors are unit length: cosine = dot product.
            assert passage["score"] == pytest.approx((1.0 + float(embedding @ query_embedding)) / 2.0, abs=1e-5)

    # Without the flag: the same passages, and no vectors on the wire.
    assert plain["query_embedding"] is None
    assert [p["embedding"] for p in plain["passages"]] == [None] * 5
    assert [(p["chunk_id"], p["score"]) for p in plain["passages"]] == [(p["chunk_id"], p["score"]) for p in passages]


def test_upload_ingests_good_files_and_reports_bad_ones(client):
    files = [
        ("files", ("kites.md", b"# Kites\n\n## Flying\n\nKites need steady wind and a long line.", "text/markdown")),
        ("files", ("scan.pdf", b"%PDF-1.7 binary", "application/pdf")),
        ("files", ("empty.txt", b"", "text/plain")),
        ("files", ("huge.txt", b"word " * 3000, "text/plain")),
        ("files", ("faq.jsonl", b'{"id": "faq-1", "text": "Reset the router."}\n', "application/json")),
    ]
    response = client.post("/v1/documents/upload", files=files)
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["documents"], body["doc_ids"]) == (2, ["kites.md", "faq-1"])
    reasons = {failure["name"]: failure["reason"] for failure in body["failed"]}
    assert set(reasons) == {"scan.pdf", "empty.txt", "huge.txt"}
    assert "corrupt PDF" in reasons["scan.pdf"]
    assert "larger than the upload limit" in reasons["huge.txt"]

    hit = client.post("/v1/search", json={"query": "steady wind", "mode": "bm25", "top_k": 1}).json()["passages"][0]
    assert (hit["doc_id"], hit["title"], hit["section_path"]) == ("kites.md", "Kites", ["Kites", "Flying"])


def test_an_upload_acl_limits_who_finds_its_files_and_a_json_files_own_acl_wins(client):
    files = [
        ("files", ("payroll.md", b"# Payroll\n\nThe quokkafund bonus is paid in March.", "text/markdown")),
        ("files", ("board.jsonl", b'{"id": "board-1", "text": "The quokkafund board meets in May.", '
                   b'"acl": {"users": ["bob"]}}\n', "application/json")),
    ]
    acl = json.dumps({"groups": ["finance"], "users": []})
    response = client.post("/v1/documents/upload", files=files, data={"acl": acl})
    assert response.status_code == 200, response.text
    assert response.json()["doc_ids"] == ["payroll.md", "board-1"]

    def readable(**who) -> set[str]:
        body = {"query": "quokkafund", "mode": "bm25", "top_k": 10}
        found = client.post("/v1/search", json=body, headers=identity_header(**who))
        assert found.status_code == 200, found.text
        return {passage["doc_id"] for passage in found.json()["passages"]}

    assert readable(user="ann", groups=("finance",)) == {"payroll.md"}
    assert readable(user="bob") == {"board-1"}
    assert readable(user="carl", groups=("sales",)) == set()
    assert readable(tenant="globex", user="ann", groups=("finance",)) == set()

    # Uploaded again without the field: everyone in the tenant reads it, nothing re-embedded.
    # (By a reader: only one may replace it.)
    again = client.post("/v1/documents/upload", files=files[:1], headers=identity_header(user="ann", groups=("finance",)))
    assert again.json()["documents"] == 1
    assert readable(user="carl", groups=("sales",)) == {"payroll.md"}


@pytest.mark.parametrize("acl", ['{"groups": "finance"}', "finance", '{"roles": ["x"]}', '{"users": ["a\\u0001"]}'])
def test_a_malformed_upload_acl_is_422_and_nothing_is_written(client, acl):
    files = [("files", ("secret.md", b"# Secret\n\nThe zebrafund balance.", "text/markdown"))]
    response = client.post("/v1/documents/upload", files=files, data={"acl": acl})
    assert response.status_code == 422, response.text
    assert "acl form field" in response.json()["error"]
    found = client.post("/v1/search", json={"query": "zebrafund", "mode": "bm25"}).json()["passages"]
    assert found == []


def test_upload_without_files_is_422(client):
    response = client.post("/v1/documents/upload", data={"other": "x"})
    assert response.status_code == 422
    assert "files" in response.json()["error"]


def test_list_and_delete_documents(client, corpus):
    listed = client.get("/v1/documents").json()["documents"]
    [jazz_text] = [text for doc_id, _, _, text in corpus if doc_id == "jazz"]
    plain = hashlib.sha256(jazz_text.encode()).hexdigest()
    # Shown keyed by the retriever's key file (created in the index directory), never the plain sha256.
    content_hash = content_digest(client.app.state.runtime.settings).digest("acme", plain)
    assert content_hash != plain
    jazz = {"doc_id": "jazz", "title": "Jazz improvisation", "source": "jazz.txt", "chunks": 1, "content_hash": content_hash}
    assert jazz in listed

    response = client.delete("/v1/documents/jazz")
    assert response.status_code == 200
    assert response.json() == {"doc_id": "jazz", "deleted_chunks": 1}
    assert all(document["doc_id"] != "jazz" for document in client.get("/v1/documents").json()["documents"])

    response = client.delete("/v1/documents/jazz")
    assert response.status_code == 404
    assert response.json()["error"] == "no document with id 'jazz'"


@pytest.mark.parametrize(
    ("payload", "status", "message"),
    [
        ({"query": ""}, 422, "query"),
        ({"query": "x", "mode": "fuzzy"}, 422, "mode"),
        ({"query": "x", "top_k": 0}, 422, "top_k"),
        ({"query": "x", "filters": {"author": "me"}}, 422, "'doc_id', 'source', 'tenant' or 'content_type'"),
        ({"query": "x", "include_sentence_vectors": "yes"}, 422, "include_sentence_vectors"),
        ({"query": "x", "include_sentence_vectors": 1}, 422, "include_sentence_vectors"),
    ],
)
def test_bad_search_requests_are_4xx_with_a_message(client, payload, status, message):
    response = client.post("/v1/search", json=payload)
    assert response.status_code == status
    assert message in response.json()["error"]


def test_bad_ingest_request_is_422_and_writes_nothing(client):
    before = client.get("/v1/documents").json()
    response = client.post("/v1/documents", json={"documents": [{"id": "ok", "text": "fine"}, {"text": " "}]})
    assert response.status_code == 422
    assert "document text is empty" in response.json()["error"]
    assert client.get("/v1/documents").json() == before


ROUTES = [
    ("POST", "/v1/search", {"json": {"query": "lava"}}),
    ("POST", "/v1/documents", {"json": {"documents": [{"id": "x", "text": "Text."}]}}),
    ("POST", "/v1/documents/upload", {"files": [("files", ("x.txt", b"Text.", "text/plain"))]}),
    ("GET", "/v1/documents", {}),
    ("DELETE", "/v1/documents/jazz", {}),
]


@pytest.mark.parametrize(("method", "path", "request_kwargs"), ROUTES)
def test_every_route_refuses_a_call_without_an_identity(client, method, path, request_kwargs):
    before = client.get("/v1/documents").json()
    response = client.request(method, path, headers={IDENTITY_HEADER: ""}, **request_kwargs)
    assert response.status_code == 401
    assert "missing X-RAG-Identity header" in response.json()["error"]
    assert response.headers["www-authenticate"]
    response = client.request(method, path, headers={IDENTITY_HEADER: "not base64 json"}, **request_kwargs)
    assert response.status_code == 422
    assert response.json()["error"] == "malformed X-RAG-Identity header"
    assert client.get("/v1/documents").json() == before  # nothing written, nothing deleted


def test_the_openapi_document_declares_the_identity_and_the_401(client):
    document = client.get("/openapi.json").json()
    assert document["components"]["securitySchemes"]["RagIdentity"] == {
        "type": "apiKey",
        "in": "header",
        "name": "X-RAG-Identity",
        "description": document["components"]["securitySchemes"]["RagIdentity"]["description"],
    }
    for method, path, _ in ROUTES:
        operation = document["paths"][path.replace("/jazz", "/{doc_id}")][method.lower()]
        assert operation["security"] == [{"RagIdentity": []}]
        assert "401" in operation["responses"]


def test_tenants_do_not_see_or_touch_each_others_documents(client, corpus_documents):
    assert client.post("/v1/documents", json=corpus_payload(corpus_documents)).status_code == 200
    globex = identity_header("globex", "bob")
    # The same id in another tenant is another document.
    response = client.post("/v1/documents", json={"documents": [{"id": "jazz", "text": "Globex jazz club minutes."}]}, headers=globex)
    assert response.status_code == 200 and response.json()["duplicates"] == []
    assert [d["doc_id"] for d in client.get("/v1/documents", headers=globex).json()["documents"]] == ["jazz"]
    assert "photosynthesis" in [d["doc_id"] for d in client.get("/v1/documents").json()["documents"]]

    for mode in ("dense", "bm25", "hybrid"):
        request = {"query": "saxophonist solo over a twelve-bar blues jazz", "mode": mode, "top_k": 5}
        theirs = client.post("/v1/search", json=request, headers=globex).json()["passages"]
        assert [p["text"] for p in theirs] == ["Globex jazz club minutes."]
        mine = client.post("/v1/search", json=request).json()["passages"]
        assert "Globex jazz club minutes." not in [p["text"] for p in mine] and len(mine) == 5

    # Another tenant's id is the 404 of an unknown one, and deleting one's own leaves the other's.
    assert client.delete("/v1/documents/photosynthesis", headers=globex).status_code == 404
    assert client.delete("/v1/documents/jazz", headers=globex).json() == {"doc_id": "jazz", "deleted_chunks": 1}
    assert any(d["doc_id"] == "jazz" for d in client.get("/v1/documents").json()["documents"])


def test_a_document_with_an_acl_is_found_only_by_its_readers(client):
    secret = {"id": "salaries", "text": "The salary bands of the oceanography department.", "acl": {"groups": ["hr"]}}
    assert client.post("/v1/documents", json={"documents": [secret]}).status_code == 200
    request = {"query": "oceanography salary bands", "mode": "bm25", "top_k": 5}
    hr = identity_header("acme", "carol", groups=("hr",))
    assert [p["doc_id"] for p in client.post("/v1/search", json=request, headers=hr).json()["passages"]] == ["salaries"]
    assert "salaries" not in [p["doc_id"] for p in client.post("/v1/search", json=request).json()["passages"]]
    named = {**secret, "acl": {"users": ["ann"]}}  # the ACL changes, the text does not
    # Only a reader may change it (ann cannot read it yet: tests/retriever/test_retriever_document_access.py).
    assert client.post("/v1/documents", json={"documents": [named]}, headers=hr).json()["documents"] == 1
    assert [p["doc_id"] for p in client.post("/v1/search", json=request).json()["passages"]] == ["salaries"]
    assert client.post("/v1/search", json=request, headers=hr).json()["passages"] == []


def test_a_document_claiming_another_tenant_is_422(client):
    document = {"id": "planted", "text": "Planted.", "metadata": {"tenant": "globex"}}
    response = client.post("/v1/documents", json={"documents": [document]})
    assert response.status_code == 422
    assert "not the caller's tenant 'acme'" in response.json()["error"]


def test_more_files_than_the_limit_is_a_413_before_any_is_read(tmp_path, embedder):
    settings = RetrieverSettings(index_dir=str(tmp_path / "index"), max_upload_files=3)
    with TestClient(create_app(settings, embedder=embedder), headers=identity_header()) as limited:
        files = [("files", (f"f{i}.txt", b"Some text.", "text/plain")) for i in range(4)]
        response = limited.post("/v1/documents/upload", files=files)
        assert response.status_code == 413
        assert response.json()["error"] == "4 files in one request; at most 3"
        assert limited.get("/v1/documents").json()["documents"] == []
        assert limited.post("/v1/documents/upload", files=files[:3]).json()["documents"] == 3
