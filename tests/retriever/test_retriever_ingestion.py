"""The Ingestor against a real index: unchanged documents are skipped, changed ones replaced exactly."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError
from rag_common.errors import InvalidInput
from rag_common.schemas import DocumentAcl, DocumentIn, IngestFailure
from rag_retriever.document_access import DocumentAccess
from rag_retriever.backends.base import AccessFilter, normalise_filters
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import Ingestor, default_doc_id
from retriever_builders import embedded_ingestor

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
    await ingestor.ingest([DocumentIn(id="memo", text="Quarterly memo.", metadata={"content_type": "text/x-memo"})])
    result = await ingestor.ingest([DocumentIn(id="memo", text="Quarterly memo.", metadata={"content_type": "text/x-note"})])
    assert (result.documents, result.skipped) == (1, 0)
    assert await backend.search_bm25("memo", k=5, filters=normalise_filters({"content_type": "text/x-memo"})) == []
    assert len(await backend.search_bm25("memo", k=5, filters=normalise_filters({"content_type": "text/x-note"}))) == 1


async def test_an_acl_only_change_updates_the_readers_without_re_embedding(backend, counting_embedder, tokenizer):
    counting = counting_embedder
    ingestor = embedded_ingestor(backend, counting, Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=15))
    first = await ingestor.ingest([DocumentIn(id="runbook", text=LONG_TEXT)], access=DocumentAccess.managing("acme"))
    assert counting.texts == first.chunks > 2
    before = await backend.document_vectors("runbook", tenant="acme")
    ops, others = AccessFilter("acme", ("*", "user:ann", "group:ops")), AccessFilter("acme", ("*", "user:bob"))
    assert len(await backend.search_bm25("deployment runbook", k=50, access=others)) == first.chunks

    acl = DocumentAcl(groups=["ops"])
    second = await ingestor.ingest([DocumentIn(id="runbook", text=LONG_TEXT, acl=acl)], access=DocumentAccess.managing("acme"))
    assert (second.documents, second.chunks, second.skipped) == (1, first.chunks, 0)
    assert counting.texts == first.chunks  # nothing embedded again
    after = await backend.document_vectors("runbook", tenant="acme")
    assert after.keys() == before.keys()
    assert all(np.array_equal(after[chunk_id], before[chunk_id]) for chunk_id in before)
    assert await backend.search_bm25("deployment runbook", k=50, access=others) == []
    readable = await backend.search_bm25("deployment runbook", k=50, access=ops)
    assert len(readable) == first.chunks
    assert {tuple(hit.chunk.readers) for hit in readable} == {("group:ops",)}
    # The same ACL again is unchanged; dropping it makes the document everyone's again.
    assert (await ingestor.ingest([DocumentIn(id="runbook", text=LONG_TEXT, acl=acl)], access=DocumentAccess.managing("acme"))).skipped == 1
    await ingestor.ingest([DocumentIn(id="runbook", text=LONG_TEXT)], access=DocumentAccess.managing("acme"))
    assert len(await backend.search_bm25("deployment runbook", k=50, access=others)) == first.chunks
    assert counting.texts == first.chunks


async def test_documents_are_identified_by_tenant_and_id(ingestor, backend):
    await ingestor.ingest([DocumentIn(id="README.md", text="Acme builds rockets.")], access=DocumentAccess.managing("acme"))
    await ingestor.ingest([DocumentIn(id="README.md", text="Acme builds rockets.")], access=DocumentAccess.managing("globex"))
    acme, globex = AccessFilter("acme", ("*",)), AccessFilter("globex", ("*",))
    assert await backend.document_chunk_ids("README.md", tenant="acme") != await backend.document_chunk_ids(
        "README.md", tenant="globex"
    )
    # Changing one tenant's document leaves the other's alone.
    await ingestor.ingest([DocumentIn(id="README.md", text="Acme builds anvils.")], access=DocumentAccess.managing("acme"))
    assert [hit.chunk.text for hit in await backend.search_bm25("acme", k=5, access=globex)] == ["Acme builds rockets."]
    assert [hit.chunk.text for hit in await backend.search_bm25("acme", k=5, access=acme)] == ["Acme builds anvils."]
    assert [hit.chunk.tenant for hit in await backend.search_bm25("acme", k=5, access=acme)] == ["acme"]
    # Deleting is within the tenant: another tenant's id is not found.
    assert await ingestor.delete("README.md", access=DocumentAccess.managing("initech")) == 0
    assert await ingestor.delete("README.md", access=DocumentAccess.managing("acme")) == 1
    assert await backend.search_bm25("acme", k=5, access=acme) == []
    assert len(await backend.search_bm25("acme", k=5, access=globex)) == 1
    assert [info.doc_id for info in await backend.list_documents(tenant="globex")] == ["README.md"]
    assert await backend.list_documents(tenant="acme") == []


async def test_a_document_claiming_another_tenant_refuses_the_request(ingestor, backend):
    documents = [
        DocumentIn(id="fine", text="Fine."),
        DocumentIn(id="mine", text="Mine.", metadata={"tenant": "acme"}),
        DocumentIn(id="theirs", text="Theirs.", metadata={"tenant": "globex"}),
    ]
    with pytest.raises(InvalidInput, match="metadata.tenant of theirs is not the caller's tenant 'acme'"):
        await ingestor.ingest(documents, access=DocumentAccess.managing("acme"))
    assert await backend.count() == 0
    result = await ingestor.ingest(documents[:2], access=DocumentAccess.managing("acme"))
    assert result.doc_ids == ["fine", "mine"]


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


async def test_a_changed_document_embeds_only_its_new_chunks(backend, counting_embedder, tokenizer):
    ingestor = embedded_ingestor(backend, counting_embedder, Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=15))
    first = await ingestor.ingest([DocumentIn(id="runbook", text=LONG_TEXT)])
    assert counting_embedder.texts == first.chunks
    longer = LONG_TEXT + " A closing sentence about the rollback plan."
    second = await ingestor.ingest([DocumentIn(id="runbook", text=longer)])
    assert second.documents == 1
    # Only the chunks whose text changed (the last one or two) were embedded again.
    assert 1 <= counting_embedder.texts - first.chunks <= 2 < second.chunks
    hits = await backend.search_bm25("rollback plan", k=1)
    assert "rollback plan" in hits[0].chunk.text
