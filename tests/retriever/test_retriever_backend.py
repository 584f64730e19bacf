"""The embedded index (the engine under EmbeddedBackend) on disk: real tantivy, real hnswlib, real MiniLM vectors."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest

from rag_retriever.backends import embedded
from rag_retriever.backends.embedded import HNSW_FILE, EmbeddedBackend, EmbeddedIndex, IndexMismatchError
from rag_retriever.entity_graph_store import SIDE_FILES
from rag_common.schemas import DocumentIn
from rag_retriever.backends.base import AccessFilter, normalise_filters
from rag_retriever.ingestion import to_source_document
from rag_retriever.records import ChunkRecord
from retriever_builders import HNSW, embedded_ingestor, settings_chunker

CORPUS_SIZE = 12


def query_vector(embedder, text: str) -> np.ndarray:
    return embedder.encode_queries([text])[0]


def doc_ids(hits) -> list[str]:
    return [hit.chunk.doc_id for hit in hits]


def test_upsert_same_chunk_twice_keeps_one_copy(loaded_index, corpus_chunks, embedder):
    chunks, vectors = corpus_chunks
    loaded_index.upsert(chunks[:3], vectors[:3])
    loaded_index.upsert(chunks[:1], vectors[:1])

    assert loaded_index.count() == CORPUS_SIZE
    bm25 = loaded_index.search_bm25("chlorophyll chloroplasts", k=10)
    assert [hit.chunk.chunk_id for hit in bm25] == [chunks[0].chunk_id]
    dense = loaded_index.search_dense(vectors[0], k=CORPUS_SIZE)
    assert [hit.chunk.chunk_id for hit in dense].count(chunks[0].chunk_id) == 1
    assert len(dense) == CORPUS_SIZE


def test_upsert_of_existing_chunk_id_replaces_its_text(loaded_index, corpus_chunks, embedder):
    chunks, _ = corpus_chunks
    replacement = dataclasses.replace(chunks[0], text="Mitochondria are the powerhouse of the cell.")
    loaded_index.upsert([replacement], embedder.encode_documents([replacement.text]))

    assert loaded_index.count() == CORPUS_SIZE
    assert loaded_index.search_bm25("chlorophyll", k=10) == []
    assert doc_ids(loaded_index.search_bm25("mitochondria powerhouse", k=10)) == ["photosynthesis"]
    top = loaded_index.search_dense(query_vector(embedder, "what organelle produces energy in cells"), k=1)
    assert top[0].chunk.text == replacement.text


def test_delete_document_removes_every_chunk_from_bm25_and_dense(index, embedder):
    texts = ["Glaciers carve U-shaped valleys.", "Moraines are ridges of glacial debris.", "Icebergs calve from glaciers."]
    chunks = [_chunk("glaciers", i, text) for i, text in enumerate(texts)]
    chunks.append(_chunk("deserts", 0, "Sand dunes migrate with the prevailing wind."))
    vectors = embedder.encode_documents([chunk.text for chunk in chunks])
    index.upsert(chunks, vectors)
    assert index.document_chunk_ids("glaciers") == {chunk.chunk_id for chunk in chunks[:3]}

    assert index.delete_document("glaciers") == 3

    assert index.count() == 1
    assert index.document_chunk_ids("glaciers") == set()
    assert index.search_bm25("glaciers moraines icebergs", k=10) == []
    for vector in vectors[:3]:
        assert doc_ids(index.search_dense(vector, k=10)) == ["deserts"]
    assert index.delete_document("glaciers") == 0
    assert [info.doc_id for info in index.list_documents()] == ["deserts"]


@pytest.mark.parametrize("tenant", ["acme", "globex"])
def test_tenant_filter_is_exact_in_dense_and_bm25(loaded_index, embedder, corpus, tenant):
    tenant_of = {doc_id: doc_tenant for doc_id, doc_tenant, _, _ in corpus}
    other = "globex" if tenant == "acme" else "acme"
    # Each query's best match overall belongs to the other tenant.
    query = "volcano lava magma eruption" if other == "globex" else "sourdough starter wild yeast bread"
    best = "volcanoes" if other == "globex" else "sourdough"
    assert doc_ids(loaded_index.search_bm25(query, k=1)) == [best]
    assert doc_ids(loaded_index.search_dense(query_vector(embedder, query), k=1)) == [best]

    filters = {"tenant": [tenant]}
    dense = loaded_index.search_dense(query_vector(embedder, query), k=CORPUS_SIZE, filters=filters)
    bm25 = loaded_index.search_bm25(query + " the and of", k=CORPUS_SIZE, filters=filters)

    assert len(dense) == CORPUS_SIZE // 2
    assert bm25, "common words should still match documents of the requested tenant"
    assert {tenant_of[doc_id] for doc_id in doc_ids(dense) + doc_ids(bm25)} == {tenant}


def test_filter_applies_inside_the_ann_search(loaded_index, embedder):
    # Post-filtering the global top 1 would return nothing; filtering inside the search returns the
    # best chunk among the allowed ones.
    vector = query_vector(embedder, "black hole event horizon")
    hits = loaded_index.search_dense(vector, k=1, filters={"doc_id": ["jazz"]})
    assert doc_ids(hits) == ["jazz"]
    # Filters reach a backend normalised (the search service's one step): a single value is a list.
    hits = loaded_index.search_dense(vector, k=3, filters=normalise_filters({"source": ["jazz.txt", "chess.txt"], "tenant": "acme"}))
    assert doc_ids(hits) == ["jazz"]
    assert loaded_index.search_dense(vector, k=3, filters={"tenant": ["nobody"]}) == []


def test_unknown_filter_field_is_rejected(loaded_index, embedder):
    with pytest.raises(ValueError, match="allowed: doc_id, source, tenant, content_type"):
        # Checked where filters are normalised, once, before any backend call.
        loaded_index.search_bm25("lava", k=3, filters=normalise_filters({"author": ["x"]}))


def test_scores_are_in_their_documented_ranges(loaded_index, embedder):
    dense = loaded_index.search_dense(query_vector(embedder, "honeybee waggle dance"), k=CORPUS_SIZE)
    bm25 = loaded_index.search_bm25("honeybees dance flowers", k=CORPUS_SIZE)
    assert dense and bm25
    assert all(0.0 <= hit.score <= 1.0 for hit in dense)
    assert [hit.score for hit in dense] == sorted((hit.score for hit in dense), reverse=True)
    assert dense[0].chunk.doc_id == "honeybees" and dense[0].score > 0.7
    assert all(hit.score >= 0.0 for hit in bm25)
    assert [hit.score for hit in bm25] == sorted((hit.score for hit in bm25), reverse=True)


def test_dense_score_is_one_plus_cosine_over_two(loaded_index, corpus_chunks, embedder):
    chunks, vectors = corpus_chunks
    query = query_vector(embedder, "coral bleaching")
    for hit in loaded_index.search_dense(query, k=CORPUS_SIZE):
        row = next(i for i, chunk in enumerate(chunks) if chunk.chunk_id == hit.chunk.chunk_id)
        assert hit.score == pytest.approx((1.0 + float(vectors[row] @ query)) / 2.0, abs=1e-4)
    # A chunk's own vector: cosine 1, score 1.
    assert loaded_index.search_dense(vectors[3], k=1)[0].score == pytest.approx(1.0, abs=1e-5)


def test_bm25_stems_english(loaded_index, corpus_chunks):
    # Stemmed in the chunks' own language (a chunk of no language is in the neutral fields only).
    chunks, vectors = corpus_chunks
    loaded_index.upsert([dataclasses.replace(chunk, language="en") for chunk in chunks], vectors)
    assert doc_ids(loaded_index.search_bm25("erupting volcano", k=1)) == ["volcanoes"]
    assert doc_ids(loaded_index.search_bm25("RUNNER runs", k=1)) == ["marathon"]
    assert loaded_index.search_bm25("?!", k=5) == []


def test_reopening_the_directory_keeps_everything(tmp_path, open_index, corpus_chunks, embedder):
    chunks, vectors = corpus_chunks
    first = open_index(tmp_path / "index")
    first.upsert(chunks, vectors)
    first.delete_document("jazz")
    query = query_vector(embedder, "three-way handshake")
    before = ([h.chunk for h in first.search_dense(query, k=5)], first.search_bm25("handshake", k=5), first.list_documents())
    first.close()

    reopened = open_index(tmp_path / "index")
    try:
        assert reopened.count() == CORPUS_SIZE - 1
        assert [h.chunk for h in reopened.search_dense(query, k=5)] == before[0]
        assert reopened.search_bm25("handshake", k=5) == before[1]
        assert reopened.list_documents() == before[2]
        assert reopened.search_bm25("saxophonist", k=5) == []
        # Writing after a reopen must not collide with the labels already on disk.
        reopened.upsert(chunks[6:7], vectors[6:7])
        assert doc_ids(reopened.search_dense(vectors[6], k=1)) == ["jazz"]
        assert reopened.count() == CORPUS_SIZE
    finally:
        reopened.close()


def test_lost_vector_graph_is_rebuilt_from_the_stored_vectors(tmp_path, open_index, corpus_chunks):
    chunks, vectors = corpus_chunks
    first = open_index(tmp_path / "index")
    first.upsert(chunks, vectors)
    first.close()
    os.remove(tmp_path / "index" / HNSW_FILE)

    reopened = open_index(tmp_path / "index")
    try:
        assert doc_ids(reopened.search_dense(vectors[4], k=1)) == ["tcp"]
        assert len(reopened.search_dense(vectors[4], k=100)) == CORPUS_SIZE
    finally:
        reopened.close()


def test_index_built_for_other_vectors_is_refused(tmp_path: Path, open_index, corpus_chunks):
    chunks, vectors = corpus_chunks
    first = open_index(tmp_path / "index")
    first.upsert(chunks[:1], vectors[:1])
    first.close()
    with pytest.raises(IndexMismatchError, match="384-dimensional"):
        EmbeddedIndex(tmp_path / "index", dim=768, hnsw=HNSW)
    with pytest.raises(IndexMismatchError, match="built with model"):
        EmbeddedIndex(tmp_path / "index", dim=384, hnsw=HNSW, model_id="another-model")


def test_graph_grows_past_its_initial_capacity(index):
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(1500, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    chunks = [_chunk(f"doc{i % 10}", i, f"random chunk {i}") for i in range(1500)]
    index.upsert(chunks, vectors)
    assert index.count() == 1500
    assert doc_ids(index.search_dense(vectors[1234], k=1)) == ["doc4"]
    assert index.delete_document("doc4") == 150
    assert all(hit.chunk.doc_id != "doc4" for hit in index.search_dense(vectors[1234], k=50))


def test_wrong_vector_shape_is_rejected_before_writing(index, corpus_chunks):
    chunks, vectors = corpus_chunks
    with pytest.raises(ValueError, match="shape"):
        index.upsert(chunks, vectors[:-1])
    assert index.count() == 0


def _chunk(doc_id: str, index: int, text: str) -> ChunkRecord:
    return ChunkRecord(chunk_id=f"{doc_id}:{index}", doc_id=doc_id, text=text, chunk_index=index, source=f"{doc_id}.txt")


# --------------------------------------------------------------------------- stored vectors (with_vectors)


def _assert_stored_vectors(hits, stored: dict[str, np.ndarray]) -> None:
    assert hits
    for hit in hits:
        assert hit.vector is not None, hit.chunk.chunk_id
        assert hit.vector.dtype == np.float32 and hit.vector.shape == (384,)
        np.testing.assert_allclose(hit.vector, stored[hit.chunk.chunk_id], rtol=0, atol=1e-6)
        # Read from tantivy's stored copy: the very float32 values upserted, not hnswlib's normalised one.
        assert hit.vector.tobytes() == np.asarray(stored[hit.chunk.chunk_id], dtype=np.float32).tobytes()


async def test_backend_returns_the_upserted_vectors_in_every_mode(backend, corpus_chunks, embedder):
    from rag_retriever.backends.base import FusionSettings

    chunks, vectors = corpus_chunks
    await backend.upsert(chunks, vectors)
    stored = {chunk.chunk_id: vector for chunk, vector in zip(chunks, vectors, strict=True)}
    query = "volcanic eruption"
    vector = query_vector(embedder, query)

    dense = await backend.search_dense(vector, CORPUS_SIZE, with_vectors=True)
    bm25 = await backend.search_bm25(query + " the and of", CORPUS_SIZE, with_vectors=True)
    hybrid = {
        method: await backend.search_hybrid(query, vector, 5, None, FusionSettings(method, 0.5), with_vectors=True)
        for method in ("min_max", "rrf")
    }
    assert len(dense) == CORPUS_SIZE and len(bm25) > 1
    for hits in (dense, bm25, *hybrid.values()):
        _assert_stored_vectors(hits, stored)
    for hit in dense:
        assert hit.score == pytest.approx((1.0 + float(hit.vector @ vector)) / 2.0, abs=1e-5)

    # Without the flag: the same hits, no vectors.
    plain = [
        await backend.search_dense(vector, CORPUS_SIZE),
        await backend.search_bm25(query + " the and of", CORPUS_SIZE),
        *[await backend.search_hybrid(query, vector, 5, None, FusionSettings(m, 0.5)) for m in ("min_max", "rrf")],
    ]
    for with_vectors, without in zip((dense, bm25, *hybrid.values()), plain, strict=True):
        assert without == with_vectors  # chunks and scores (vectors are not part of ==)
        assert all(hit.vector is None for hit in without)


def test_vectors_follow_replacements_filters_and_reopening(tmp_path, open_index, corpus_chunks, embedder):
    chunks, vectors = corpus_chunks
    first = open_index(tmp_path / "index")
    first.upsert(chunks, vectors)
    replacement = dataclasses.replace(chunks[0], text="Mitochondria are the powerhouse of the cell.")
    new_vector = embedder.encode_documents([replacement.text])
    first.upsert([replacement], new_vector)
    first.close()
    os.remove(tmp_path / "index" / HNSW_FILE)  # the graph is rebuilt; the stored vectors stay the truth

    reopened = open_index(tmp_path / "index")
    try:
        stored = {chunk.chunk_id: vector for chunk, vector in zip(chunks, vectors, strict=True)}
        stored[replacement.chunk_id] = new_vector[0]
        _assert_stored_vectors(reopened.search_bm25("mitochondria", k=3, with_vectors=True), stored)
        filtered = reopened.search_dense(new_vector[0], k=3, filters={"tenant": ["acme"]}, with_vectors=True)
        assert filtered[0].chunk.text == replacement.text
        _assert_stored_vectors(filtered, stored)
    finally:
        reopened.close()


# --------------------------------------------------------------------------- format upgrade


def fingerprint_before_content_hashes(chunk: ChunkRecord) -> str:
    """``doc_fingerprint`` as format-1 code wrote it: title, source and metadata, no content hash."""
    fields = {"title": chunk.title, "source": chunk.source, "metadata": chunk.metadata}
    return hashlib.sha1(json.dumps(fields, sort_keys=True, ensure_ascii=False).encode("utf-8")).hexdigest()


def pre_tenant_corpus(corpus_documents) -> list[DocumentIn]:
    """The corpus as a caller of the default tenant sends it (no ``metadata.tenant``)."""
    return [
        document.model_copy(update={"metadata": {k: v for k, v in document.metadata.items() if k != "tenant"}})
        for document in corpus_documents
    ]


def write_old_index(path: Path, open_index, documents, tokenizer, embedder, monkeypatch, old_format: int) -> list:
    """An index as the code of ``old_format`` wrote it: no tenant or readers in the payload or the
    schema (format < 3), no content hash (format 1). Returns the chunks (as the current code makes them)."""
    chunker = settings_chunker(tokenizer)
    chunks = [chunk for document in documents for chunk in chunker.chunk_document(to_source_document(document))]
    vectors = embedder.encode_documents([chunk.text for chunk in chunks])
    old_chunks = [
        dataclasses.replace(c, content_hash=None, doc_fingerprint=fingerprint_before_content_hashes(c), readers=[])
        if old_format == 1
        else dataclasses.replace(c, readers=[])
        for c in chunks
    ]
    payload = ChunkRecord.to_payload

    def old_payload(chunk: ChunkRecord) -> dict:
        return {k: v for k, v in payload(chunk).items() if k not in ("tenant", "readers")}

    with monkeypatch.context() as patch:
        patch.setattr(embedded.on_disk, "FORMAT_VERSION", old_format)
        patch.setattr(ChunkRecord, "to_payload", old_payload)
        old = open_index(path)
        old.upsert(old_chunks, vectors)
        old.close()
    assert json.loads((path / "meta.json").read_text())["format"] == old_format
    return chunks


def write_format_1_index(path: Path, open_index, corpus_chunks, monkeypatch) -> None:
    """An index as the code before content hashes wrote it (schema without ``content_hash``)."""
    chunks, vectors = corpus_chunks
    old_chunks = [
        dataclasses.replace(c, content_hash=None, doc_fingerprint=fingerprint_before_content_hashes(c), readers=[])
        for c in chunks
    ]
    with monkeypatch.context() as patch:
        patch.setattr(embedded.on_disk, "FORMAT_VERSION", 1)
        old = open_index(path)
        old.upsert(old_chunks, vectors)
        old.close()
    assert json.loads((path / "meta.json").read_text())["format"] == 1


async def test_a_format_1_index_is_upgraded_in_place_and_reingesting_adds_the_hashes(
    tmp_path, open_index, corpus_documents, embedder, counting_embedder, tokenizer, monkeypatch
):
    path = tmp_path / "index"
    documents = pre_tenant_corpus(corpus_documents)
    chunks = write_old_index(path, open_index, documents, tokenizer, embedder, monkeypatch, old_format=1)
    vectors = embedder.encode_documents([chunks[4].text])

    upgraded = EmbeddedBackend(path, dim=384, hnsw=HNSW, model_id="all-MiniLM-L6-v2")
    try:
        assert json.loads((path / "meta.json").read_text())["format"] == embedded.FORMAT_VERSION == 4
        assert sorted(p.name for p in path.iterdir() if p.name not in SIDE_FILES) == ["graph.sqlite", "meta.json", "tantivy", "vectors.hnsw"]
        assert await upgraded.count() == CORPUS_SIZE
        assert doc_ids(await upgraded.search_dense(vectors[0], 1)) == ["tcp"]  # labels kept: the graph still fits
        assert doc_ids(await upgraded.search_bm25("handshake", 1)) == ["tcp"]
        assert {info.content_hash for info in await upgraded.list_documents()} == {None}
        assert await upgraded.documents_with_content([chunks[4].content_hash]) == {}

        # Re-ingesting the same documents is not skipped: their chunks lack the hash. Nothing is
        # embedded again: the chunk ids are those of the old chunks, whose vectors are reused.
        ingestor = embedded_ingestor(upgraded, counting_embedder, settings_chunker(tokenizer))
        result = await ingestor.ingest(documents)
        assert (result.documents, result.skipped, result.duplicates) == (CORPUS_SIZE, 0, [])
        assert counting_embedder.texts == 0
        listed = {info.doc_id: info.content_hash for info in await upgraded.list_documents(tenant="default")}
        assert listed["tcp"] == chunks[4].content_hash is not None
        assert await upgraded.documents_with_content([chunks[4].content_hash]) == {chunks[4].content_hash: ["tcp"]}
        assert (await ingestor.ingest(documents)).skipped == CORPUS_SIZE
    finally:
        await upgraded.close()


async def test_a_format_2_index_is_upgraded_to_tenant_default_readable_by_all_of_it(
    tmp_path, open_index, corpus_documents, embedder, counting_embedder, tokenizer, monkeypatch
):
    path = tmp_path / "index"
    documents = pre_tenant_corpus(corpus_documents)
    chunks = write_old_index(path, open_index, documents, tokenizer, embedder, monkeypatch, old_format=2)
    vector = embedder.encode_documents([chunks[4].text])[0]

    upgraded = EmbeddedBackend(path, dim=384, hnsw=HNSW, model_id="all-MiniLM-L6-v2")
    try:
        assert json.loads((path / "meta.json").read_text())["format"] == 4
        anyone = AccessFilter("default", ("*", "user:someone"))
        assert doc_ids(await upgraded.search_dense(vector, 1, access=anyone)) == ["tcp"]
        assert doc_ids(await upgraded.search_bm25("handshake", 1, access=anyone)) == ["tcp"]
        hits = await upgraded.search_dense(vector, CORPUS_SIZE, access=anyone)
        assert len(hits) == CORPUS_SIZE
        assert {(hit.chunk.tenant, tuple(hit.chunk.readers)) for hit in hits} == {("default", ("*",))}
        other = AccessFilter("acme", ("*",))
        assert await upgraded.search_dense(vector, 3, access=other) == []
        assert await upgraded.search_bm25("handshake", 3, access=other) == []
        # The content hashes of format 2 are kept; the documents are those of the default tenant.
        listed = {info.doc_id: info.content_hash for info in await upgraded.list_documents(tenant="default")}
        assert listed["tcp"] == chunks[4].content_hash
        assert await upgraded.list_documents(tenant="acme") == []
        # Languages left unnamed, as the format-2 chunks were: the same documents are then unchanged.
        ingestor = embedded_ingestor(upgraded, counting_embedder, settings_chunker(tokenizer), languages=None)
        assert (await ingestor.ingest(documents)).skipped == CORPUS_SIZE
        assert counting_embedder.texts == 0
    finally:
        await upgraded.close()


def test_an_interrupted_upgrade_starts_again_from_the_kept_old_index(tmp_path, open_index, corpus_chunks, monkeypatch):
    path = tmp_path / "index"
    write_format_1_index(path, open_index, corpus_chunks, monkeypatch)
    # A crash after the old index was moved aside and a half-built new one moved in, before meta.json
    # said format 2: the old index is whole in tantivy.previous.
    (path / "tantivy").rename(path / "tantivy.previous")
    (path / "tantivy").mkdir()
    (path / "tantivy" / "half-written").write_bytes(b"\0")
    (path / "tantivy.upgrading").mkdir()

    reopened = open_index(path)
    try:
        assert reopened.count() == CORPUS_SIZE
        assert doc_ids(reopened.search_dense(corpus_chunks[1][4], k=1)) == ["tcp"]
        assert sorted(p.name for p in path.iterdir() if p.name not in SIDE_FILES) == ["graph.sqlite", "meta.json", "tantivy", "vectors.hnsw"]
    finally:
        reopened.close()


def test_an_index_of_an_unknown_format_is_refused(tmp_path, open_index):
    open_index(tmp_path / "index").close()
    meta = tmp_path / "index" / "meta.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "format": 99}))
    with pytest.raises(IndexMismatchError, match="has format 99, this code reads format 4 and upgrades formats 1, 2, 3"):
        open_index(tmp_path / "index")


def test_documents_with_content_looks_up_many_hashes_in_batches(index, monkeypatch):
    monkeypatch.setattr(embedded.catalog, "_LOOKUP_BATCH", 2)
    chunks = [dataclasses.replace(_chunk(f"doc{i}", 0, f"text {i}"), content_hash=f"h{i % 3}") for i in range(5)]
    vectors = np.eye(5, 384, dtype=np.float32)
    index.upsert(chunks, vectors)
    assert index.documents_with_content(["h2", "h0", "h1", "h9"]) == {
        "h0": ["doc0", "doc3"], "h1": ["doc1", "doc4"], "h2": ["doc2"],
    }
