"""One content, one set of chunks, whatever the route; the same content under two ids is reported.

Issue 12, item 6: the same Markdown file sent once as a multipart upload and once as JSON without an
``id`` became two documents chunked differently (the upload along its headings, the JSON text as
plain text with the ``#`` lines inside the chunks). Both routes go through the functions the app
calls: ``parse_upload`` (the parser registry) for a file, ``DocumentIn`` for JSON, then
``Ingestor.ingest``. Chunk sizes are the service defaults (200 tokens, 40 overlap).
"""

from __future__ import annotations

import hashlib

import pytest

from rag_common.schemas import DocumentIn, DuplicateContent
from rag_retriever.document_access import ContentDigest, DocumentAccess
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.ingestion import Ingestor, to_source_document
from rag_retriever.parsers import parse_upload
from retriever_builders import embedded_ingestor, settings_chunker

LIMIT = 10 * 1024 * 1024

RUNBOOK = """# Pump station runbook

This runbook covers the booster pump station that feeds the north district. It is written for the
on-call engineer and assumes access to the control room and the maintenance store.

## Daily checks

Walk the station once per shift. Read the suction and discharge pressures on both pumps and write
them in the log book; a difference of more than 0.5 bar from yesterday needs a note. Listen for
cavitation, which sounds like gravel in the casing. Check that the standby pump is in automatic
mode and that its isolation valves are open. Look for leaks at the mechanical seals and at the
flanges of the non-return valves.

## Monthly maintenance

Swap the duty and standby pumps on the first Monday of the month so both wear evenly. Grease the
motor bearings with two shots of lithium grease each; more grease makes them run hot. Clean the
strainer on the suction header after closing both isolation valves and draining the section.
Test the low-level cut-out by lowering the float switch by hand: the duty pump must stop within
five seconds and the alarm must reach the control room.

### Seal replacement

A seal that drips more than ten drops a minute is replaced at the next monthly visit. Order the
seal kit from the maintenance store two weeks before, and book a second engineer: the motor must
be lifted off the pump casing.
"""


@pytest.fixture
def service_ingestor(backend: EmbeddedBackend, embedder, tokenizer) -> Ingestor:
    """The ingestor with the service's default chunk sizes."""
    return embedded_ingestor(backend, embedder, settings_chunker(tokenizer), digest=DIGEST)


async def stored_chunks(backend: EmbeddedBackend, embedder, doc_id: str) -> list[tuple[list[str], str]]:
    """``(section_path, text)`` of every chunk of ``doc_id``, in order (a filtered dense search returns
    all of a document's chunks when ``k`` is large enough)."""
    vector = embedder.encode_queries(["pump"])[0]
    hits = await backend.search_dense(vector, 100, {"doc_id": [doc_id]})
    return [(hit.chunk.section_path, hit.chunk.text) for hit in sorted(hits, key=lambda h: h.chunk.chunk_index)]


#: (upload file name, the file's bytes, the JSON document's text). The second case is the file as a
#: Windows editor saves it (BOM, CRLF, final newline) and the text as a client reads it (LF, stripped).
ROUTES = [
    pytest.param("runbook.md", RUNBOOK.encode(), RUNBOOK, id="markdown-file"),
    pytest.param("runbook.txt", RUNBOOK.encode(), RUNBOOK, id="text-file"),
    pytest.param(
        "runbook.md", b"\xef\xbb\xbf" + RUNBOOK.replace("\n", "\r\n").encode(), RUNBOOK.strip(), id="bom-crlf-file"
    ),
]


@pytest.mark.parametrize(("filename", "data", "json_text"), ROUTES)
async def test_an_upload_and_the_same_text_as_json_get_the_same_chunks(
    service_ingestor, backend, embedder, filename, data, json_text
):
    uploaded = await service_ingestor.ingest(parse_upload(filename, data, LIMIT))
    posted = await service_ingestor.ingest([DocumentIn(text=json_text)])
    [upload_id], [json_id] = uploaded.doc_ids, posted.doc_ids
    assert upload_id == filename and json_id != upload_id  # two ids: the user may want both

    from_upload = await stored_chunks(backend, embedder, upload_id)
    from_json = await stored_chunks(backend, embedder, json_id)
    assert from_json == from_upload
    assert uploaded.chunks == posted.chunks == len(from_upload) == 4
    assert [path for path, _ in from_upload] == [
        ["Pump station runbook"],
        ["Pump station runbook", "Daily checks"],
        ["Pump station runbook", "Monthly maintenance"],
        ["Pump station runbook", "Monthly maintenance", "Seal replacement"],
    ]
    assert not any("#" in text or "\r" in text for _, text in from_upload)


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: The key of the shown hashes in these tests.
DIGEST = ContentDigest(b"content identity test key")


def shown(text: str, tenant: str = "default") -> str:
    """The ``content_hash`` the API shows for ``text`` in ``tenant``: a keyed digest, never the sha256."""
    digest = DIGEST.digest(tenant, sha256(text))
    assert digest is not None and digest != sha256(text)
    return digest


async def listed_hashes(backend: EmbeddedBackend) -> dict[str, str | None]:
    return {info.doc_id: info.content_hash for info in await backend.list_documents()}


async def test_the_listing_carries_the_sha256_of_the_normalised_text(service_ingestor, backend):
    windows_file = b"\xef\xbb\xbf" + RUNBOOK.replace("\n", "\r\n").encode()
    await service_ingestor.ingest(parse_upload("runbook.md", windows_file, LIMIT))
    await service_ingestor.ingest([DocumentIn(id="json-copy", text="  " + RUNBOOK + "\n\n")])
    # Decomposed "é" (e + U+0301) as macOS file names and some editors write it: NFC makes it one.
    await service_ingestor.ingest([DocumentIn(id="cafe", text="Cafe\u0301 opening hours: 8 to 18.")])
    assert await listed_hashes(backend) == {
        "runbook.md": sha256(RUNBOOK.strip()),
        "json-copy": sha256(RUNBOOK.strip()),
        "cafe": sha256("Caf\u00e9 opening hours: 8 to 18."),
    }


async def test_the_same_content_under_another_id_is_reported_not_refused(service_ingestor, backend):
    uploaded = await service_ingestor.ingest(parse_upload("runbook.md", RUNBOOK.encode(), LIMIT))
    assert uploaded.duplicates == []

    posted = await service_ingestor.ingest([DocumentIn(text=RUNBOOK, title="Runbook (copy)")])
    [json_id] = posted.doc_ids
    assert posted.documents == 1  # written all the same: a user may want two ids
    assert posted.duplicates == [
        DuplicateContent(doc_id=json_id, content_hash=shown(RUNBOOK.strip()), duplicate_of=["runbook.md"])
    ]
    assert set(await listed_hashes(backend)) == {"runbook.md", json_id}


async def test_duplicates_within_one_request_are_reported_for_each(service_ingestor):
    text = "The cooling tower fan runs at 1450 rpm. Its belt is checked every week."
    result = await service_ingestor.ingest(
        [
            DocumentIn(id="a", text=text),
            DocumentIn(id="unrelated", text="Something else entirely."),
            DocumentIn(id="b", text=text + "\n"),  # same content: outer whitespace is not content
            DocumentIn(id="c", text=text, metadata={"team": "acme"}),
        ]
    )
    assert result.doc_ids == ["a", "unrelated", "b", "c"]
    digest = shown(text)
    assert result.duplicates == [
        DuplicateContent(doc_id="a", content_hash=digest, duplicate_of=["b", "c"]),
        DuplicateContent(doc_id="b", content_hash=digest, duplicate_of=["a", "c"]),
        DuplicateContent(doc_id="c", content_hash=digest, duplicate_of=["a", "b"]),
    ]


async def test_duplicates_are_found_within_the_callers_tenant_only(service_ingestor):
    text = "The cooling tower fan runs at 1450 rpm. Its belt is checked every week."
    await service_ingestor.ingest([DocumentIn(id="theirs", text=text)], access=DocumentAccess.managing("globex"))
    result = await service_ingestor.ingest([DocumentIn(id="mine", text=text)], access=DocumentAccess.managing("acme"))
    assert result.duplicates == []
    again = await service_ingestor.ingest([DocumentIn(id="mine-too", text=text)], access=DocumentAccess.managing("acme"))
    assert again.duplicates == [DuplicateContent(doc_id="mine-too", content_hash=shown(text, "acme"), duplicate_of=["mine"])]


async def test_reingesting_a_document_is_not_its_own_duplicate(service_ingestor):
    document = DocumentIn(id="runbook", text=RUNBOOK, source="runbook.md")
    first = await service_ingestor.ingest([document])
    again = await service_ingestor.ingest([document])
    retitled = await service_ingestor.ingest([document.model_copy(update={"title": "Pump runbook"})])
    assert (first.documents, again.skipped, retitled.documents) == (1, 1, 1)
    assert first.duplicates == again.duplicates == retitled.duplicates == []


async def test_a_document_whose_content_changed_no_longer_counts_under_its_old_hash(service_ingestor, backend):
    text = "Backups run at 02:00 and are kept for thirty days."
    await service_ingestor.ingest([DocumentIn(id="old", text=text)])
    # In one request: "old" gets new text, "new" gets the text "old" had.
    result = await service_ingestor.ingest(
        [DocumentIn(id="old", text="Backups now run at 03:00."), DocumentIn(id="new", text=text)]
    )
    assert result.duplicates == []
    assert await listed_hashes(backend) == {"old": sha256("Backups now run at 03:00."), "new": sha256(text)}
    # A document that failed keeps its old content, and is found under it.
    failed = await service_ingestor.ingest(
        [DocumentIn(id="new", text="# Only a heading"), DocumentIn(id="third", text=text)]
    )
    assert [f.name for f in failed.failed] == ["new"]
    assert failed.duplicates == [DuplicateContent(doc_id="third", content_hash=shown(text), duplicate_of=["new"])]


def test_normalising_keeps_the_page_breaks_of_a_pdf_with_an_empty_first_page(tokenizer):
    # PDF text is pages separated by form feeds; a first page without text (a cover) starts the text
    # with "\f". Stripping it as whitespace would put page 2's text on page 1.
    document = to_source_document(
        DocumentIn(id="r.pdf", text="\fThe pump runs at 1450 rpm.\n\f", metadata={"content_type": "application/pdf"})
    )
    [chunk] = settings_chunker(tokenizer).chunk_document(document)
    assert (chunk.page, chunk.text) == (2, "The pump runs at 1450 rpm.")
    assert document.content_hash == sha256("\fThe pump runs at 1450 rpm.\n\f")
