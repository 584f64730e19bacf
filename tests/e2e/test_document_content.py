"""One content through the real gateway and retriever: same chunks by either route, duplicate reported.

Issue 12, item 6: a Markdown file uploaded as multipart and the same text sent as JSON without an
``id`` were chunked differently (3 chunks as a file, 2 as JSON) and nothing said they were the same
content. Uses its own documents (deleted at the end), so the shared e2e corpus is untouched.
"""

from __future__ import annotations

import hashlib
import re
from urllib.parse import quote

import httpx

from .corpus import RETRIEVER_HEADERS

FILE_NAME = "e2e-pump-runbook.md"
RUNBOOK = """# Pump station runbook

This runbook covers the booster pump station that feeds the north district. It is written for the
on-call engineer and assumes access to the control room and the maintenance store.

## Daily checks

Walk the station once per shift. Read the suction and discharge pressures on both pumps and write
them in the log book; a difference of more than 0.5 bar from yesterday needs a note. Listen for
cavitation, which sounds like gravel in the casing. Check that the standby pump is in automatic
mode and that its isolation valves are open.

## Monthly maintenance

Swap the duty and standby pumps on the first Monday of the month so both wear evenly. Grease the
motor bearings with two shots of lithium grease each; more grease makes them run hot. Test the
low-level cut-out by lowering the float switch by hand: the duty pump must stop within five seconds.
"""


def chunks_of(retriever: str, doc_id: str) -> list[tuple[list[str], str]]:
    """``(section_path, text)`` of every chunk of ``doc_id`` in document order (the chunk index is the
    middle part of the chunk id)."""
    response = httpx.post(
        f"{retriever}/v1/search",
        json={"query": "pump", "top_k": 50, "mode": "dense", "filters": {"doc_id": doc_id}},
        timeout=60,
        headers=RETRIEVER_HEADERS,
    )
    response.raise_for_status()
    passages = sorted(response.json()["passages"], key=lambda p: int(p["chunk_id"].rsplit(":", 2)[1]))
    return [(passage["section_path"], passage["text"]) for passage in passages]


def test_an_upload_and_the_same_text_as_json_are_one_content_reported_as_duplicates(running_stack) -> None:
    gateway, retriever = running_stack.gateway, running_stack.urls["retriever"]
    # As a Windows editor saves the file (BOM, CRLF); the JSON text as a client would send it.
    file_bytes = b"\xef\xbb\xbf" + RUNBOOK.replace("\n", "\r\n").encode()
    uploaded = httpx.post(
        f"{gateway}/v1/documents", files=[("files", (FILE_NAME, file_bytes, "text/markdown"))], timeout=300
    )
    assert uploaded.status_code == 200, uploaded.text
    posted = httpx.post(f"{gateway}/v1/documents", json={"documents": [{"text": RUNBOOK}]}, timeout=300)
    assert posted.status_code == 200, posted.text
    [json_id] = posted.json()["doc_ids"]
    try:
        assert uploaded.json()["doc_ids"] == [FILE_NAME]
        # Reported, not refused; relayed by the gateway as the retriever wrote it. The hash shown is
        # the retriever's keyed digest (docs/security.md), never the plain sha256 of the text.
        assert posted.json()["documents"] == 1
        [duplicate] = posted.json()["duplicates"]
        content_hash = duplicate["content_hash"]
        assert duplicate == {"doc_id": json_id, "content_hash": content_hash, "duplicate_of": [FILE_NAME]}
        assert re.fullmatch("[0-9a-f]{64}", content_hash)
        assert content_hash != hashlib.sha256(RUNBOOK.strip().encode()).hexdigest()

        from_upload, from_json = chunks_of(retriever, FILE_NAME), chunks_of(retriever, json_id)
        assert from_json == from_upload
        assert [path for path, _ in from_upload] == [
            ["Pump station runbook"],
            ["Pump station runbook", "Daily checks"],
            ["Pump station runbook", "Monthly maintenance"],
        ]

        listed = {d["doc_id"]: d for d in httpx.get(f"{gateway}/v1/documents", timeout=30).json()["documents"]}
        assert listed[FILE_NAME]["content_hash"] == listed[json_id]["content_hash"] == content_hash

        again = httpx.post(f"{gateway}/v1/documents", json={"documents": [{"text": RUNBOOK}]}, timeout=300)
        assert (again.json()["skipped"], again.json()["duplicates"]) == (1, posted.json()["duplicates"])
    finally:
        for doc_id in (FILE_NAME, json_id):
            httpx.delete(f"{gateway}/v1/documents/{quote(doc_id, safe='')}", timeout=30)
