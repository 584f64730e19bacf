"""Uploading real PDF, HTML and Markdown files to the retriever's HTTP API: pages, tables and
per-file failures survive the whole path (parse → chunk → embed → index → search)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_retriever.app import create_app
from rag_retriever.settings import RetrieverSettings
from retriever_sample_files import (
    ARTICLE_HTML,
    HTML_BOILERPLATE,
    PDF_TABLE_MARKDOWN,
    big_table_markdown,
    encrypted_pdf,
    manual_pdf,
    scanned_pdf,
)

CHUNK_TOKENS = 80


@pytest.fixture(scope="module")
def client(tmp_path_factory, embedder) -> Iterator[TestClient]:
    settings = RetrieverSettings(
        index_dir=str(tmp_path_factory.mktemp("uploads") / "index"),
        max_upload_mb=0.5,
        chunk_tokens=CHUNK_TOKENS,
        chunk_overlap_tokens=20,
    )
    identity = encode_identity(Identity(tenant="acme", user="ann", scopes=["ingest"]))
    with TestClient(create_app(settings, embedder=embedder), headers={IDENTITY_HEADER: identity}) as test_client:
        yield test_client


def upload_files() -> list[tuple[str, tuple[str, bytes, str]]]:
    manual = manual_pdf()
    return [
        ("files", ("manual.pdf", manual, "application/pdf")),
        ("files", ("guide.html", ARTICLE_HTML.encode(), "text/html")),
        ("files", ("catalogue.md", big_table_markdown(60).encode(), "text/markdown")),
        ("files", ("locked.pdf", encrypted_pdf("s3cret"), "application/pdf")),
        ("files", ("scan.pdf", scanned_pdf(), "application/pdf")),
        ("files", ("broken.pdf", manual[: len(manual) // 2], "application/pdf")),
        ("files", ("memo.docx", b"PK\x03\x04 not really", "application/octet-stream")),
        ("files", ("empty.txt", b"", "text/plain")),
        ("files", ("huge.txt", b"word " * 120_000, "text/plain")),
    ]


def test_a_mixed_batch_ingests_the_good_files_and_names_each_bad_one(client):
    response = client.post("/v1/documents/upload", files=upload_files())
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["doc_ids"] == ["manual.pdf", "guide.html", "catalogue.md"]
    assert (body["documents"], body["skipped"]) == (3, 0)
    reasons = {failure["name"]: failure["reason"] for failure in body["failed"]}
    assert set(reasons) == {"locked.pdf", "scan.pdf", "broken.pdf", "memo.docx", "empty.txt", "huge.txt"}
    assert reasons["locked.pdf"].startswith("encrypted PDF")
    assert reasons["scan.pdf"].startswith("no extractable text (scanned?)")
    assert reasons["broken.pdf"].startswith("corrupt PDF")
    assert reasons["memo.docx"].startswith("unsupported file type '.docx'")
    assert reasons["empty.txt"] == "file is empty"
    assert "larger than the upload limit" in reasons["huge.txt"]
    # Nothing of the rejected files reached the index.
    listed = {document["doc_id"] for document in client.get("/v1/documents").json()["documents"]}
    assert listed == {"manual.pdf", "guide.html", "catalogue.md"}

    again = client.post("/v1/documents/upload", files=upload_files()[:3]).json()
    assert (again["documents"], again["chunks"], again["skipped"], again["failed"]) == (0, 0, 3, [])


def search(client, query, **extra):
    body = {"query": query, "mode": "bm25", "top_k": 10, **extra}
    response = client.post("/v1/search", json=body)
    assert response.status_code == 200, response.text
    return response.json()["passages"]


def test_pdf_passages_carry_their_page(client):
    hit = search(client, "withdraw the rotating assembly", filters={"doc_id": "manual.pdf"})[0]
    assert (hit["page"], hit["title"]) == (2, "Pump maintenance manual")
    assert "withdraw the rotating assembly" in hit["text"]
    first = search(client, "worn seal leaks fluid along the shaft", filters={"doc_id": "manual.pdf"})[0]
    assert first["page"] == 1
    table = search(client, "Grease check vibration", filters={"doc_id": "manual.pdf"})[0]
    assert (table["page"], table["text"], table["metadata"]["table_id"]) == (2, PDF_TABLE_MARKDOWN, "manual.pdf:t0")


def test_html_passages_have_no_boilerplate_and_keep_their_sections(client):
    passages = search(client, "pump seal bearings impeller cookies copyright", filters={"doc_id": "guide.html"})
    assert passages
    for passage in passages:
        assert not any(phrase in passage["text"] for phrase in HTML_BOILERPLATE)
        assert passage["section_path"][0] == "Pump maintenance"
    [table] = [p for p in passages if "table_id" in p["metadata"]]
    assert table["section_path"] == ["Pump maintenance", "Inspection intervals"]


def test_big_table_parts_share_a_table_id_and_repeat_the_header(client, tokenizer):
    passages = search(client, "replacement seal kit size", filters={"doc_id": "catalogue.md"}, top_k=50)
    parts = [p for p in passages if p["metadata"].get("table_id") == "catalogue.md:t0"]
    assert len(parts) > 3
    for part in parts:
        assert part["text"].startswith("| Part number | Description | Price | Stock |\n| --- | --- | --- | --- |\n")
        assert tokenizer.count(part["text"]) <= CHUNK_TOKENS
        assert part["section_path"] == ["Parts catalogue", "Spare parts"]
