"""The Ingestor against a real index: unchanged documents are skipped, changed ones replaced exactly."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from rag_common.schemas import DocumentIn, IngestFailure
from rag_retriever.ingestion import default_doc_id

LONG_TEXT = " ".join(f"Paragraph sentence {i} describes step {i} of the deployment runbook." for i in range(30))


async def test_reingesting_an_unchanged_document_is_skipped(ingestor, backend):
    document = DocumentIn(id="runbook", text=LONG_TEXT, title="Runbook", source="runbook.txt")
    first = await ingestor.ingest([document])
    assert (first.documents, first.skipped, first.doc_ids) == (1, 0, ["runbook"])
    assert first.chunks > 2
    chunk_ids = await backend.document_chunk_ids("runbook")
    assert len(chunk_ids) == first.chunks == await backend.count()

    second = await ingestor.ingest([document])
    assert (second.documents, second.chunks, second.skipped, second.doc_ids) == (0, 0, 1, ["runbook"])
    assert await backend.document_chunk_ids("runbook") == chunk_ids


async def test_a_changed_document_replaces_exactly_its_old_chunks(ingestor, backend):
    await ingestor.ingest(
        [
            DocumentIn(id="runbook", text=LONG_TEXT, source="runbook.txt"),
            DocumentIn(id="other", text="An unrelated note about coffee machines.", source="other.txt"),
        ]
    )
    other_ids = await backend.document_chunk_ids("other")
    old_ids = await backend.document_chunk_ids("runbook")

    shorter = LONG_TEXT.split(" Paragraph sentence 10 ")[0] + " A brand new closing sentence about rollbacks."
    result = await ingestor.ingest([DocumentIn(id="runbook", text=shorter, source="runbook.txt")])

    new_ids = await backend.document_chunk_ids("runbook")
    assert result.documents == 1 and result.chunks == len(new_ids)
    assert new_ids != old_ids
    assert await backend.count() == len(new_ids) + len(other_ids)
    assert await backend.document_chunk_ids("other") == other_ids
    assert await backend.search_bm25("25", k=50) == []  # only the removed sentences mention 25
    texts = [hit.chunk.text for hit in await backend.search_bm25("rollbacks", k=5)]
    assert any("brand new closing sentence" in text for text in texts)


async def test_a_metadata_only_change_is_not_skipped(ingestor, backend):
    await ingestor.ingest([DocumentIn(id="memo", text="Quarterly memo.", metadata={"tenant": "acme"})])
    result = await ingestor.ingest([DocumentIn(id="memo", text="Quarterly memo.", metadata={"tenant": "globex"})])
    assert (result.documents, result.skipped) == (1, 0)
    assert await backend.search_bm25("memo", k=5, filters={"tenant": "acme"}) == []
    assert len(await backend.search_bm25("memo", k=5, filters={"tenant": "globex"})) == 1


async def test_documents_without_id_get_a_content_hash(ingestor, backend):
    result = await ingestor.ingest([DocumentIn(text="Hash me.", source="wiki")])
    assert result.doc_ids == [default_doc_id("wiki", "Hash me.")]
    assert len(result.doc_ids[0]) == 16


async def test_bad_documents_fail_alone(ingestor, backend):
    result = await ingestor.ingest(
        [
            DocumentIn(id="good", text="Good text."),
            DocumentIn(id="good", text="Same id again."),
            DocumentIn(id="bad-tenant", text="Text.", metadata={"tenant": 7}),
            DocumentIn(id="headings", text="# Only\n## Headings", metadata={"content_type": "text/markdown"}),
        ],
        failures=[IngestFailure(name="x.pdf", reason="unsupported")],
    )
    assert result.doc_ids == ["good"]
    assert [(f.name, f.reason) for f in result.failed] == [
        ("x.pdf", "unsupported"),
        ("good", "duplicate document id in this request"),
        ("bad-tenant", "metadata.tenant must be a string, got int"),
        ("headings", "no indexable text (only headings?)"),
    ]
    assert await backend.count() == 1
    assert [hit.chunk.text for hit in await backend.search_bm25("text", k=5)] == ["Good text."]


def test_a_blank_id_is_refused_at_the_edge_not_in_the_batch():
    # Ids are validated by the wire schema (rag_common.schemas.DocumentId), so a blank id is a 422
    # for the request, before any document of the batch is written.
    with pytest.raises(ValidationError, match="document id is blank"):
        DocumentIn(id="   ", text="Text.")


async def test_delete_goes_through_the_write_lock(ingestor, backend):
    result = await ingestor.ingest([DocumentIn(id="temp", text=LONG_TEXT)])
    assert await ingestor.delete("temp") == result.chunks > 1
    assert await backend.count() == 0
    assert await ingestor.delete("temp") == 0
