"""Sentence vectors at ingestion (``RETRIEVER_SENTENCE_VECTORS``): what is stored, what is embedded
(and what is not, on re-ingest), and what a search returns."""

from __future__ import annotations

import numpy as np
import pytest

from rag_common.identity import Identity
from rag_common.schemas import DocumentAcl, DocumentIn, SearchRequest
from rag_common.sentence_vectors import chunk_pools, scorable_spans, sentence_context, sentence_texts, unpack
from rag_retriever.backends.base import AccessFilter, FusionSettings
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import Ingestor
from rag_retriever.locking import ReadWriteLock
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from retriever_builders import embedded_ingestor

RUNBOOK = "\n\n".join(
    [
        "# Deployment",
        " ".join(f"Step {i} of the rollout moves replica {i} to the new image." for i in range(8)),
        "## Rollback",
        " ".join(f"Rollback rule {i} restores replica {i} from the previous image." for i in range(8)),
    ]
)


class RecordingEmbedder:
    """The real embedder, recording every document string it is given."""

    def __init__(self, inner) -> None:
        self._inner = inner
        self.dim, self.model_id, self.max_seq_length = inner.dim, inner.model_id, inner.max_seq_length
        self.documents: list[str] = []
        self.pooled: list[str] = []

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.documents.extend(texts)
        return self._inner.encode_documents(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._inner.encode_queries(texts)

    def encode_documents_pooled(self, texts: list[str], pools):
        self.pooled.extend(texts)
        return self._inner.encode_documents_pooled(texts, pools)

    def count_tokens(self, text: str) -> int:
        return self._inner.count_tokens(text)

    def warm_up(self) -> None:
        self._inner.warm_up()


@pytest.fixture
def recording(embedder) -> RecordingEmbedder:
    return RecordingEmbedder(embedder)


def ingestor_for(backend, embedder, tokenizer, mode: str, *, template: str = "{text}") -> Ingestor:
    chunker = Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=15, embed_template=template, sentence_vectors=mode)
    return embedded_ingestor(backend, embedder, chunker, sentence_vectors=mode)


async def test_each_chunk_stores_the_vectors_of_the_strings_the_answerer_embeds(backend, recording, embedder, tokenizer):
    result = await ingestor_for(backend, recording, tokenizer, "embedded").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    stored = await backend.document_sentence_vectors("rb")
    assert len(stored) == result.chunks > 2
    sections = set()
    for text, vectors in stored.values():
        spans = scorable_spans(text)
        assert vectors is not None and [tuple(span) for span in vectors.spans] == spans and spans
        sections.add(vectors.context)
        strings = sentence_texts(vectors.context, text, spans)
        # Embedded at ingestion in other batches than these: equal up to float noise.
        np.testing.assert_allclose(unpack(vectors), embedder.encode_documents(strings), atol=2e-6)
    # The context is the answerer's: title, then the section path below it.
    assert sections == {sentence_context("Runbook", ["Deployment"]), sentence_context("Runbook", ["Deployment", "Rollback"])}


async def test_every_string_is_embedded_once_in_length_sorted_batches(backend, recording, tokenizer):
    result = await ingestor_for(backend, recording, tokenizer, "embedded").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    stored = await backend.document_sentence_vectors("rb")
    strings = [s for text, v in stored.values() for s in sentence_texts(v.context, text, [tuple(x) for x in v.spans])]
    assert len(strings) > len(set(strings))  # the chunks overlap: some sentences are in two of them
    sentence_calls = [text for text in recording.documents if text in set(strings)]
    assert sorted(sentence_calls) == sorted(set(strings))  # ... and were embedded once
    assert len(recording.documents) == result.chunks + len(set(strings))


async def test_a_re_ingest_embeds_only_what_changed(backend, recording, tokenizer):
    ingestor = ingestor_for(backend, recording, tokenizer, "embedded")
    await ingestor.ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    before = await backend.document_sentence_vectors("rb")

    # An ACL change rewrites the chunks: nothing is embedded, the vectors are kept as they were.
    recording.documents.clear()
    second = await ingestor.ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook", acl=DocumentAcl(groups=["ops"]))])
    assert second.documents == 1 and recording.documents == []
    after = await backend.document_sentence_vectors("rb")
    assert {k: (t, v.model_dump()) for k, (t, v) in after.items()} == {k: (t, v.model_dump()) for k, (t, v) in before.items()}

    # One sentence edited: its string and the changed chunks' texts are embedded, no other sentence.
    edited = RUNBOOK.replace("Rollback rule 5 restores replica 5", "Rollback rule 5 drains replica 5")
    recording.documents.clear()
    await ingestor.ingest([DocumentIn(id="rb", text=edited, title="Runbook")])
    sentences = [text for text in recording.documents if text.startswith("Runbook > ")]
    assert sentences == ["Runbook > Deployment > Rollback: Rollback rule 5 drains replica 5 from the previous image."]


async def test_off_stores_none_and_embeds_only_the_chunks(backend, recording, tokenizer):
    result = await ingestor_for(backend, recording, tokenizer, "off").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    assert len(recording.documents) == result.chunks
    assert all(vectors is None for _, vectors in (await backend.document_sentence_vectors("rb")).values())


async def test_turning_them_on_adds_them_on_re_ingest_without_re_embedding_the_chunks(backend, recording, tokenizer):
    first = await ingestor_for(backend, recording, tokenizer, "off").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    chunk_vectors = await backend.document_vectors("rb")
    recording.documents.clear()
    second = await ingestor_for(backend, recording, tokenizer, "embedded").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    assert (second.documents, second.skipped) == (1, 0)  # the fingerprint says: no sentence vectors yet
    assert recording.documents and all(text.startswith("Runbook > ") for text in recording.documents)
    after = await backend.document_vectors("rb")
    assert all(np.array_equal(after[k], chunk_vectors[k]) for k in chunk_vectors) and len(after) == first.chunks
    third = await ingestor_for(backend, recording, tokenizer, "embedded").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    assert third.skipped == 1


async def test_a_search_returns_them_exactly_and_only_when_asked(backend, embedder, tokenizer):
    await ingestor_for(backend, embedder, tokenizer, "embedded").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    stored = await backend.document_sentence_vectors("rb")
    settings = RetrieverSettings()
    service = SearchService(
        backend, embedder, ReadWriteLock(), fusion=FusionSettings.of(settings), default_top_k=settings.default_top_k,
        graph=GraphDefaults.of(settings), graph_searcher=backend,
    )
    access = AccessFilter.of(Identity(tenant="default", user="ann"))
    for mode in ("dense", "bm25", "hybrid"):
        plain = await service.search(SearchRequest(query="rollback replica", mode=mode), access)
        assert plain.passages and all(p.sentence_vectors is None for p in plain.passages)
        asked = await service.search(SearchRequest(query="rollback replica", mode=mode, include_sentence_vectors=True), access)
        for passage in asked.passages:
            assert passage.sentence_vectors is not None
            assert unpack(passage.sentence_vectors).tobytes() == unpack(stored[passage.chunk_id][1]).tobytes()


async def test_a_sentence_string_too_long_for_the_model_is_left_to_the_answerer(backend, recording, tokenizer):
    """A ~400-token title makes every "title: sentence" string longer than the model takes: none is
    stored (the model would cut the sentence itself out of its vector), none is embedded."""
    title = " ".join(["lighthouse keeper"] * 200)
    text = " ".join(f"Sentence {i} about the harbour." for i in range(12))
    result = await ingestor_for(backend, recording, tokenizer, "embedded").ingest([DocumentIn(id="t", text=text, title=title)])
    assert len(recording.documents) == result.chunks  # the chunks only
    assert all(v is not None and v.spans == [] for _, v in (await backend.document_sentence_vectors("t")).values())


def test_batches_are_length_sorted_and_cut_where_lengths_jump():
    from rag_retriever.ingestion import length_batches

    lengths = [900, 40, 45, 850, 60, 41, 880, 70]
    batches = length_batches(lengths, 3)
    assert [[lengths[i] for i in batch] for batch in batches] == [[40, 41, 45], [60, 70], [850, 880, 900]]
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    assert length_batches([], 64) == []


# --------------------------------------------------------------------------- pooled (the default)

TEMPLATE = "{title}\n{section_path}\n{text}"


async def test_pooled_vectors_come_from_each_chunks_own_pass(backend, recording, embedder, tokenizer):
    ingestor = ingestor_for(backend, recording, tokenizer, "pooled", template=TEMPLATE)
    result = await ingestor.ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    # One encoder pass per chunk, nothing embedded on its own.
    assert recording.documents == [] and len(recording.pooled) == result.chunks > 2
    stored = await backend.document_sentence_vectors("rb")
    chunk_vectors = await backend.document_vectors("rb")
    for chunk_id, (text, vectors) in stored.items():
        spans = scorable_spans(text)
        assert vectors is not None and vectors.method == "pooled" and [tuple(s) for s in vectors.spans] == spans
        [embedded] = [string for string in recording.pooled if string.endswith(text)]
        chunk_vector, [expected] = embedder.encode_documents_pooled([embedded], [chunk_pools(embedded, text, spans)])
        np.testing.assert_allclose(unpack(vectors), expected, atol=2e-6)
        np.testing.assert_allclose(chunk_vectors[chunk_id], chunk_vector[0], atol=2e-6)


async def test_pooled_vectors_are_kept_when_the_chunk_is_and_redone_when_it_changes(backend, recording, tokenizer):
    ingestor = ingestor_for(backend, recording, tokenizer, "pooled", template=TEMPLATE)
    await ingestor.ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    before = await backend.document_sentence_vectors("rb")

    recording.pooled.clear()  # an ACL change: chunks rewritten, nothing through the encoder
    await ingestor.ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook", acl=DocumentAcl(groups=["ops"]))])
    assert recording.pooled == [] and recording.documents == []
    after = await backend.document_sentence_vectors("rb")
    assert {k: v.model_dump() for k, (_, v) in after.items()} == {k: v.model_dump() for k, (_, v) in before.items()}

    edited = RUNBOOK.replace("Rollback rule 5 restores replica 5", "Rollback rule 5 drains replica 5")
    recording.pooled.clear()  # one sentence edited: only the chunks holding it go through the encoder
    await ingestor.ingest([DocumentIn(id="rb", text=edited, title="Runbook")])
    assert recording.pooled and all("drains replica 5" in text for text in recording.pooled)
    assert len(recording.pooled) < len(after)


async def test_switching_from_embedded_to_pooled_rewrites_the_vectors_and_keeps_the_chunk_vectors(backend, recording, tokenizer):
    await ingestor_for(backend, recording, tokenizer, "embedded", template=TEMPLATE).ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    chunk_vectors = await backend.document_vectors("rb")
    second = await ingestor_for(backend, recording, tokenizer, "pooled", template=TEMPLATE).ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    assert (second.documents, second.skipped) == (1, 0)  # the fingerprint names the mode
    stored = await backend.document_sentence_vectors("rb")
    assert {v.method for _, v in stored.values()} == {"pooled"}
    after = await backend.document_vectors("rb")
    assert after.keys() == chunk_vectors.keys() and all(np.array_equal(after[k], chunk_vectors[k]) for k in after)


class ShortWindow:
    """The real embedder behind a model window of 40 tokens: sentences past it get no token."""

    def __init__(self, inner) -> None:
        self._inner, self.documents = inner, []
        self.dim, self.model_id, self.max_seq_length = inner.dim, inner.model_id, inner.max_seq_length

    def encode_documents(self, texts):
        self.documents.extend(texts)
        return self._inner.encode_documents(texts)

    def encode_queries(self, texts):
        return self._inner.encode_queries(texts)

    def count_tokens(self, text):
        return self._inner.count_tokens(text)

    def warm_up(self) -> None:
        self._inner.warm_up()

    def encode_documents_pooled(self, texts, pools):
        vectors, rows = self._inner.encode_documents_pooled(texts, pools)
        for text, matrix, text_pools in zip(texts, rows, pools):
            offsets = self._inner.token_offsets(text)
            window_end = offsets[38][1] if len(offsets) > 38 else len(text)
            for k, pool in enumerate(text_pools):
                if pool[-1][0] >= window_end:
                    matrix[k] = np.nan
        return vectors, rows


async def test_a_sentence_past_the_models_window_is_embedded_on_its_own(backend, embedder, tokenizer):
    window = ShortWindow(embedder)
    await ingestor_for(backend, window, tokenizer, "pooled").ingest([DocumentIn(id="rb", text=RUNBOOK, title="Runbook")])
    assert window.documents  # some sentences were past the window ...
    stored = await backend.document_sentence_vectors("rb")
    rows: dict[str, list[np.ndarray]] = {}
    for text, vectors in stored.values():
        for string, row in zip(sentence_texts(vectors.context, text, [tuple(x) for x in vectors.spans]), unpack(vectors)):
            rows.setdefault(string, []).append(row)
    for string in window.documents:  # ... and each is stored with its own vector (in the chunk it was past)
        alone = embedder.encode_documents([string])[0]
        assert any(np.allclose(row, alone, atol=2e-6) for row in rows[string])
    assert all(np.isfinite(row).all() for found in rows.values() for row in found)


def test_the_setting_reads_the_old_switch_as_pooled_or_off():
    assert RetrieverSettings().sentence_vectors == "pooled"
    assert [RetrieverSettings(sentence_vectors=value).sentence_vectors for value in (True, "true", False, "0", "embedded")] == [
        "pooled", "pooled", "off", "off", "embedded",
    ]


def test_pooled_mode_refuses_an_embedder_that_cannot_pool(backend, embedder, tokenizer):
    with pytest.raises(ValueError, match="pools token spans"):
        ingestor_for(backend, NoPooling(embedder), tokenizer, "pooled")


class NoPooling:
    """An embedder with only the base protocol (a third-party one, say)."""

    def __init__(self, inner) -> None:
        self.dim, self.model_id, self.max_seq_length = inner.dim, inner.model_id, inner.max_seq_length
        self.encode_documents, self.encode_queries, self.count_tokens = inner.encode_documents, inner.encode_queries, inner.count_tokens

    def warm_up(self) -> None:
        pass
