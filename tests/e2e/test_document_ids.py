"""Document ids through the real gateway and retriever: an id is one path segment end to end.

Issue 12: ``DELETE /v1/documents/json-gamma.md%23not-this-one`` deleted ``json-gamma.md``, and control
characters in an id were a 500. Uses its own documents, so the shared e2e corpus is untouched.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx

from .corpus import RETRIEVER_HEADERS, chunk_ids_of

GAMMA = {"id": "json-gamma.md", "title": "Gamma", "text": "Gamma rays are the most energetic photons."}
HASH_ID = {"id": "notes#2?v=1/final", "title": "Notes", "text": "The second notes file is about comets."}


def test_an_id_with_url_syntax_deletes_exactly_that_document(running_stack) -> None:
    gateway, retriever = running_stack.gateway, running_stack.urls["retriever"]
    ingested = httpx.post(f"{gateway}/v1/documents", json={"documents": [GAMMA, HASH_ID]}, timeout=300)
    assert ingested.status_code == 200, ingested.text
    assert sorted(ingested.json()["doc_ids"]) == sorted([GAMMA["id"], HASH_ID["id"]])
    gamma_chunks = chunk_ids_of(retriever, GAMMA["id"])
    assert gamma_chunks

    # Before the fix: 200, and json-gamma.md was gone.
    response = httpx.delete(f"{gateway}/v1/documents/json-gamma.md%23not-this-one", timeout=30)
    assert response.status_code == 404, response.text
    assert "json-gamma.md#not-this-one" in response.json()["error"]
    assert chunk_ids_of(retriever, GAMMA["id"]) == gamma_chunks

    # Before the fix: DELETE /v1/search on the retriever (405), relayed.
    response = httpx.delete(f"{gateway}/v1/documents/..%2Fsearch", timeout=30)
    assert response.status_code == 404, response.text

    response = httpx.delete(f"{gateway}/v1/documents/{quote(HASH_ID['id'], safe='')}", timeout=30)
    assert response.status_code == 200, response.text
    assert response.json()["doc_id"] == HASH_ID["id"]
    assert response.json()["deleted_chunks"] >= 1
    assert chunk_ids_of(retriever, HASH_ID["id"]) == set()
    assert chunk_ids_of(retriever, GAMMA["id"]) == gamma_chunks

    response = httpx.delete(f"{gateway}/v1/documents/{GAMMA['id']}", timeout=30)
    assert response.status_code == 200, response.text


def test_control_characters_in_an_id_are_a_422_on_both_services(running_stack) -> None:
    for base in (running_stack.gateway, running_stack.urls["retriever"]):
        for encoded in ("%01", "%09", "%0D", "%7F"):
            response = httpx.delete(f"{base}/v1/documents/{encoded}", timeout=30, headers=RETRIEVER_HEADERS)
            assert response.status_code == 422, (base, encoded, response.text)
            assert "control character" in response.json()["error"]
