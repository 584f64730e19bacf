"""A narrow ACL at scale (issue 13): a user who may read 3 of 10,000 chunks gets exactly those 3 back.

Adversarial on purpose: the 9,997 unreadable chunks sit nearer the query in vector space (the query's
vector plus small noise) and hold the query's words more often than the readable ones, so without
the ACL every mode's top 10 is unreadable. A filter applied after a short candidate list would come
back empty; the filter inside the search (hnswlib's label filter, tantivy's boolean query) does not.
Only the 3 readable texts and the query go through the real embedder: the other vectors are made
near the query directly, which is both cheaper and harder than embedding 9,997 texts.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from rag_retriever.backends.base import AccessFilter, FusionSettings
from rag_retriever.records import ChunkRecord

CHUNKS = 10_000
QUERY = "pump seal maintenance report"
READABLE = {
    17: "Maintenance report of the pump in hall 3: the seal was replaced.",
    4_242: "The pump seal in the boiler room leaked; maintenance fitted a new seal.",
    9_001: "Seal maintenance for the cooling pump is due every six months.",
}
NEEDLE = AccessFilter("acme", ("*", "user:needle"))


def record(i: int, text: str, readers: list[str]) -> ChunkRecord:
    return ChunkRecord(chunk_id=f"c{i}", doc_id=f"doc-{i}", text=text, chunk_index=0, tenant="acme", readers=readers)


async def test_a_user_who_may_read_3_of_10000_chunks_gets_those_3_in_every_mode(backend, embedder):
    rng = np.random.default_rng(13)
    query_vector = embedder.encode_queries([QUERY])[0]
    noise = rng.normal(scale=0.02, size=(CHUNKS, query_vector.shape[0])).astype(np.float32)
    vectors = query_vector[None, :] + noise
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    readable_vectors = embedder.encode_documents(list(READABLE.values()))
    for row, i in enumerate(READABLE):
        vectors[i] = readable_vectors[row]
    chunks = [
        record(i, READABLE[i], ["user:needle"]) if i in READABLE
        else record(i, f"Pump seal maintenance report {i}: pump seal maintenance, pump seal, maintenance report.", ["group:crew"])
        for i in range(CHUNKS)
    ]
    await backend.upsert(chunks, vectors)
    readable_ids = {f"doc-{i}" for i in READABLE}

    def ids(hits) -> set[str]:
        return {hit.chunk.doc_id for hit in hits}

    crew = AccessFilter("acme", ("*", "group:crew"))
    unfiltered = {
        "dense": await backend.search_dense(query_vector, 10, access=crew),
        "bm25": await backend.search_bm25(QUERY, 10, access=crew),
        "hybrid": await backend.search_hybrid(QUERY, query_vector, 10, None, FusionSettings("min_max", 0.5), access=crew),
    }
    for mode, hits in unfiltered.items():
        assert len(hits) == 10 and not ids(hits) & readable_ids, mode  # the neighbours crowd them out

    narrow = {
        "dense": await backend.search_dense(query_vector, 10, access=NEEDLE),
        "bm25": await backend.search_bm25(QUERY, 10, access=NEEDLE),
        "hybrid": await backend.search_hybrid(QUERY, query_vector, 10, None, FusionSettings("min_max", 0.5), access=NEEDLE),
    }
    for mode, hits in narrow.items():
        assert ids(hits) == readable_ids and len(hits) == 3, mode

    # With a field filter as well: the two filters AND inside the search.
    only = {"doc_id": ["doc-17", "doc-9001", "doc-18"]}
    assert ids(await backend.search_dense(query_vector, 10, only, access=NEEDLE)) == {"doc-17", "doc-9001"}
    assert ids(await backend.search_bm25(QUERY, 10, only, access=NEEDLE)) == {"doc-17", "doc-9001"}
    # Another tenant's needle reads nothing here.
    assert await backend.search_dense(query_vector, 10, access=dataclasses.replace(NEEDLE, tenant="globex")) == []
