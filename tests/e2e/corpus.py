"""The documents every e2e test asks about, and helpers to ingest them and check citations."""

from __future__ import annotations

import httpx

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity

#: What a test that asks the retriever directly sends: the identity the gateway passes on for the
#: stack's caller (auth off: tenant ``default``, user ``local``), so it sees what that caller ingested.
RETRIEVER_HEADERS = {
    IDENTITY_HEADER: encode_identity(Identity(tenant="default", user="local", scopes=["chat", "ingest", "admin"]))
}

DOCUMENTS = [
    {
        "id": "zorblax",
        "title": "Zorblax Aerospace",
        "source": "handbook/zorblax.md",
        "text": "Zorblax Aerospace is a maker of small satellite launchers headquartered in Tromsø, Norway. "
        "The company was founded in 1987 by the engineer Ingrid Halvorsen. "
        "Its best-known rocket, the Fjord-2, first flew in 2004.",
    },
    {
        "id": "quillfeather",
        "title": "Quillfeather Library",
        "source": "handbook/quillfeather.md",
        "text": "The Quillfeather Library is a public library in Dunedin that specialises in maritime maps. "
        "It opened in 1923 and holds 40,000 charts.",
    },
    {
        "id": "basil",
        "title": "Growing basil",
        "source": "garden/basil.md",
        "text": "Basil needs six hours of sun a day and soil kept moist but not wet. Pinch the flowers off "
        "to keep the leaves tender.",
    },
    {
        "id": "tides",
        "title": "Tides",
        "source": "science/tides.md",
        "text": "Tides are caused mainly by the gravitational pull of the Moon on the oceans. "
        "Spring tides happen when the Sun and Moon are aligned.",
    },
]

#: A document question whose answer is in DOCUMENTS.
ZORBLAX_QUESTION = "Where is Zorblax Aerospace headquartered?"


def ingest_documents(gateway: str, api_key: str | None = None) -> None:
    """Ingest DOCUMENTS through the gateway (idempotent: unchanged documents are skipped)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    response = httpx.post(f"{gateway}/v1/documents", json={"documents": DOCUMENTS}, timeout=600, headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    assert not body["failed"], body
    assert body["documents"] + body["skipped"] >= len(DOCUMENTS), body


def chunk_ids_of(retriever: str, doc_id: str) -> set[str]:
    """Every chunk id the retriever holds for ``doc_id``."""
    response = httpx.post(
        f"{retriever}/v1/search",
        json={"query": "the", "top_k": 200, "mode": "bm25", "filters": {"doc_id": doc_id}},
        timeout=30,
        headers=RETRIEVER_HEADERS,
    )
    response.raise_for_status()
    hits = response.json()["passages"]
    assert all(hit["doc_id"] == doc_id for hit in hits)
    return {hit["chunk_id"] for hit in hits}


def assert_citations_are_ingested_chunks(retriever: str, citations: list[dict]) -> None:
    """Each citation names a chunk the retriever really holds (not an invented id)."""
    for citation in citations:
        doc_id = citation["chunk_id"].rsplit(":", 2)[0]  # "<doc_id>:<index>:<hash>"
        assert citation["chunk_id"] in chunk_ids_of(retriever, doc_id), citation
