"""The embedded index's per-language lexical analysis (``backends/embedded/analyzers.py``) on real
tantivy: a neutral field pair for every chunk, a stemmed, stop-worded field pair for its language,
queries read with each field's own analyzer, and the re-analysis of an index made before languages
(format 3) or for another set of them, its vectors reused."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import unicodedata
from pathlib import Path

import numpy as np
import pytest
import tantivy

from rag_common.languages import identifier_of
from rag_common.schemas import DocumentIn
from rag_common.settings import LanguageSettings
from rag_retriever.backends import embedded
from rag_retriever.backends.base import FusionSettings
from rag_retriever.backends.embedded import HNSW_FILE, EmbeddedBackend, EmbeddedIndex
from rag_retriever.backends.embedded.analyzers import LexicalFields, language_analyzer, neutral_analyzer
from rag_retriever.document_language import DocumentLanguages
from rag_retriever.records import ChunkRecord
from retriever_builders import HNSW, embedded_ingestor, settings_chunker

DIM = 8
IDENTIFIER = identifier_of(LanguageSettings())

#: (doc_id, language, title, text): the same two topics in three languages, and one more each.
CORPUS = [
    ("ro-conv", "ro", "Păstrarea datelor",
     "Conversațiile sunt stocate pe serverul universității timp de un an, apoi sunt șterse."),
    ("ro-exam", "ro", "Examene",
     "Examenele de licență au loc în luna iulie, în sala mare a facultății de științe naţionale."),
    ("de-conv", "de", "Datenhaltung",
     "Die Gespräche werden ein Jahr lang auf dem Server der Universität gespeichert und danach gelöscht."),
    ("de-lib", "de", "Bibliothek", "Die Bibliothek ist montags bis freitags geöffnet, samstags nur vormittags."),
    ("en-conv", "en", "Data retention",
     "Conversations are stored on the university's server for one year and deleted afterwards."),
    ("en-lib", "en", "Library", "The library opens on weekdays; on Saturdays it closes at noon."),
]
LANGUAGES = ["de", "en", "ro"]


def vector_of(text: str) -> np.ndarray:
    """A deterministic unit vector per text: the dense side plays no part in these tests."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


def chunks_of(corpus=CORPUS, *, with_language: bool = True) -> tuple[list[ChunkRecord], np.ndarray]:
    chunks = [
        ChunkRecord(chunk_id=f"{doc_id}:0", doc_id=doc_id, text=text, chunk_index=0, title=title, source=f"{doc_id}.txt",
                    language=language if with_language else None)
        for doc_id, language, title, text in corpus
    ]
    return chunks, np.stack([vector_of(chunk.text) for chunk in chunks])


def open_at(path: Path, languages=LANGUAGES, identifier=None) -> EmbeddedIndex:
    return EmbeddedIndex(path, dim=DIM, hnsw=HNSW, languages=languages, identifier=identifier)


@pytest.fixture
def mixed(tmp_path):
    index = open_at(tmp_path / "index")
    index.upsert(*chunks_of())
    yield index
    index.close()


def ranked(index: EmbeddedIndex, query: str, language: str | None, k: int = 10) -> list[str]:
    return [hit.chunk.doc_id for hit in index.search_bm25(query, k, language=language)]


# --------------------------------------------------------------------------- analyzers


def test_the_chains_stem_then_fold_and_drop_stop_words_before_stemming():
    romanian = language_analyzer("ro")
    # Comma-below, cedilla and a decomposed ț (the index normalises text first) are the same letters.
    assert romanian.analyze("conversațiile") == romanian.analyze("conversaţiile") == ["convers"]
    assert romanian.analyze("conversația stocată") == ["convers", "stocat"]
    assert romanian.analyze("naţionale naționale nationale") == ["national"] * 3
    assert romanian.analyze("care sunt de la pe si") == []  # stop words only
    assert language_analyzer("de").analyze("Gespräche Gesprächen über") == ["gesprach", "gesprach"]
    assert neutral_analyzer().analyze("Conversațiile SUNT stocate") == ["conversatiile", "sunt", "stocate"]


def test_each_field_is_queried_with_its_own_analyzer_and_only_its_languages():
    lexical = LexicalFields.of(["ro", "de"])
    schema_builder = tantivy.SchemaBuilder()
    lexical.add_to_schema(schema_builder)
    schema = schema_builder.build()
    assert [group.tokenizer for group in lexical.groups()] == ["rag_neutral_v1", "rag_de_v1", "rag_ro_v1"]
    both = {"de", "ro"}

    ro_clauses = lexical.clauses(schema, "conversațiile", "ro", both)
    assert len(ro_clauses) == 4  # one term in text and title, neutral and ro
    assert all(occur == tantivy.Occur.Should for occur, _ in ro_clauses)
    assert len(lexical.clauses(schema, "conversațiile", None, both)) == 6  # neutral, de and ro
    assert len(lexical.clauses(schema, "conversațiile", "fr", both)) == 6  # not configured: as unsure
    # Stop words alone leave the language field nothing to match: only the neutral clauses remain.
    assert len(lexical.clauses(schema, "care sunt", "ro", both)) == 4
    assert lexical.clauses(schema, "?!", None, both) == []
    # A language no chunk is in has empty fields: not queried.
    assert [group.key for group in lexical.query_groups(None, {"ro"})] == ["neutral", "ro"]
    assert [group.key for group in lexical.query_groups("de", {"ro"})] == ["neutral"]


# --------------------------------------------------------------------------- searches


@pytest.mark.parametrize(
    "query",
    [
        "Unde este stocată conversația?",  # singular, the document has the plural
        "unde sunt stocate conversatiile",  # typed without diacritics
        "Unde sunt stocate conversaţiile?",  # cedilla
        unicodedata.normalize("NFD", "Unde sunt stocate conversațiile?"),  # decomposed
    ],
)
def test_a_romanian_query_finds_the_romanian_document_in_every_spelling(mixed, query):
    assert ranked(mixed, query, "ro")[0] == "ro-conv"
    assert ranked(mixed, query, None)[0] == "ro-conv"


def test_stemming_comes_from_the_chunks_language_field(tmp_path, mixed):
    # "conversația" shares no neutral term with "Conversațiile": only the Romanian field matches.
    assert ranked(mixed, "conversația", "ro") == ["ro-conv"]
    neutral_only = open_at(tmp_path / "neutral")
    try:
        neutral_only.upsert(*chunks_of(with_language=False))
        assert ranked(neutral_only, "conversația", "ro") == []
        assert ranked(neutral_only, "conversațiile", "ro") == ["ro-conv"]  # the neutral field: same word
    finally:
        neutral_only.close()


def test_cedilla_in_a_document_is_found_by_comma_below_and_by_no_diacritics(mixed):
    assert ranked(mixed, "științe naționale", "ro")[0] == "ro-exam"
    assert ranked(mixed, "stiinte nationale", None)[0] == "ro-exam"


def test_each_language_finds_its_own_translation_first_in_a_mixed_index(mixed):
    assert ranked(mixed, "Wo werden die Gespräche gespeichert?", "de")[0] == "de-conv"
    assert ranked(mixed, "Where are the conversations stored?", "en")[0] == "en-conv"
    assert ranked(mixed, "Când au loc examenele de licență?", "ro")[0] == "ro-exam"
    assert ranked(mixed, "Wann ist die Bibliothek geöffnet?", "de")[0] == "de-lib"
    # Scores add up across the fields: the language's own field lifts its document above neutral alone.
    with_field = mixed.search_bm25("conversațiile stocate", 1, language="ro")[0]
    unsure = mixed.search_bm25("conversațiile stocate", 1, language=None)[0]
    assert with_field.chunk.doc_id == unsure.chunk.doc_id == "ro-conv"
    assert with_field.score == pytest.approx(unsure.score)  # the de and en fields add nothing here


QUERIES = [
    ("Unde este stocată conversația?", "ro-conv"),
    ("când au loc examenele", "ro-exam"),
    ("Wo werden Gespräche gespeichert?", "de-conv"),
    ("Bibliotheken montags geöffnet", "de-lib"),
    ("where is a conversation stored", "en-conv"),
    ("when does the library open", "en-lib"),
]


def test_an_unsure_query_ranks_never_below_the_neutral_field_alone(tmp_path, mixed):
    neutral_only = open_at(tmp_path / "neutral", languages=[])
    try:
        neutral_only.upsert(*chunks_of())
        for query, gold in QUERIES:
            unsure, neutral = ranked(mixed, query, None), ranked(neutral_only, query, None)
            rank_unsure = unsure.index(gold) if gold in unsure else len(CORPUS)
            rank_neutral = neutral.index(gold) if gold in neutral else len(CORPUS)
            assert rank_unsure <= rank_neutral, (query, unsure, neutral)
            assert rank_unsure == 0, (query, unsure)
    finally:
        neutral_only.close()


def test_a_chunk_of_a_language_not_configured_is_neutral_only(tmp_path):
    index = open_at(tmp_path / "index", languages=["en", "ro"])
    try:
        index.upsert(*chunks_of())
        # German is not configured: its chunks are in the neutral fields only (no stemming) ...
        assert ranked(index, "Gespräche", "de") == ["de-conv"]
        assert ranked(index, "Gesprächen", "de") == []
        # ... and a German query is searched as an unsure one.
        assert index.search_bm25("Bibliothek Server", 5, language="de") == index.search_bm25("Bibliothek Server", 5)
        assert [hit.chunk.language for hit in index.search_bm25("Gespräche", 1)] == ["de"]  # kept in the payload
    finally:
        index.close()


def test_hybrid_and_filters_analyse_the_query_in_its_language(mixed):
    vector = vector_of("unrelated")
    fusion = FusionSettings(method="min_max", dense_weight=0.3)
    hits = mixed.search_hybrid("conversația stocată", vector, 3, None, fusion, language="ro")
    assert hits[0].chunk.doc_id == "ro-conv"
    filtered = mixed.search_bm25("conversația", 5, {"doc_id": ["en-conv"]}, language="ro")
    assert filtered == []


def test_a_reopened_index_registers_its_analyzers_before_any_commit(tmp_path):
    path = tmp_path / "index"
    chunks, vectors = chunks_of()
    first = open_at(path)
    first.upsert(chunks[:3], vectors[:3])
    first.close()
    # Without registration, tantivy accepts the document and fails at the commit: what the open prevents.
    bare = tantivy.Index.open(str(path / embedded.TANTIVY_DIR))
    writer = bare.writer(heap_size=15_000_000, num_threads=1)
    document = tantivy.Document()
    document.add_text("text_ro", "conversațiile")
    writer.add_document(document)
    with pytest.raises(ValueError, match="tokenizer"):
        writer.commit()
    writer.rollback()
    del writer, bare

    reopened = open_at(path)
    try:
        reopened.upsert(chunks[3:], vectors[3:])
        assert reopened.count() == len(CORPUS)
        assert ranked(reopened, "Gesprächen", "de") == ["de-conv"]
        assert ranked(reopened, "conversația", "ro") == ["ro-conv"]
    finally:
        reopened.close()


# --------------------------------------------------------------------------- re-analysis on open


def write_format_3_index(path: Path, monkeypatch, chunks, vectors) -> None:
    """An index as the code before languages wrote it: ``text``/``title`` in ``en_stem``, no language."""
    with monkeypatch.context() as patch:
        patch.setattr(embedded.on_disk, "FORMAT_VERSION", 3)
        old = open_at(path)
        old.upsert([dataclasses.replace(chunk, language=None) for chunk in chunks], vectors)
        old.close()
    assert json.loads((path / "meta.json").read_text())["format"] == 3


def test_a_format_3_index_is_re_analysed_with_identified_languages_and_its_vectors_kept(tmp_path, monkeypatch):
    path = tmp_path / "index"
    chunks, vectors = chunks_of()
    write_format_3_index(path, monkeypatch, chunks, vectors)
    graph_bytes = (path / HNSW_FILE).read_bytes()

    upgraded = open_at(path, identifier=IDENTIFIER)
    try:
        meta = json.loads((path / "meta.json").read_text())
        assert (meta["format"], meta["languages"]) == (4, LANGUAGES)
        assert sorted(p.name for p in path.iterdir() if not p.name.startswith("graph.")) == [
            "meta.json", "tantivy", "vectors.hnsw"
        ]
        assert (path / HNSW_FILE).read_bytes() == graph_bytes  # the graph untouched
        for chunk, vector in zip(chunks, vectors, strict=True):
            stored = upgraded.document_vectors(chunk.doc_id)[chunk.chunk_id]
            assert stored.tobytes() == vector.astype("<f4").tobytes()
        # Each document's language identified from its text, as a fresh ingest would.
        languages = {hit.chunk.doc_id: hit.chunk.language for hit in upgraded.search_dense(vectors[0], len(CORPUS))}
        assert languages == {doc_id: language for doc_id, language, _, _ in CORPUS}
        assert ranked(upgraded, "conversația", "ro") == ["ro-conv"]
        assert ranked(upgraded, "Gesprächen", "de") == ["de-conv"]
        assert upgraded.consistency().consistent
    finally:
        upgraded.close()


def test_without_an_identifier_an_upgraded_index_is_neutral(tmp_path, monkeypatch):
    path = tmp_path / "index"
    chunks, vectors = chunks_of()
    write_format_3_index(path, monkeypatch, chunks, vectors)
    upgraded = open_at(path)
    try:
        assert ranked(upgraded, "Conversațiile", "ro") == ["ro-conv"]
        assert ranked(upgraded, "conversația", "ro") == []
        assert {hit.chunk.language for hit in upgraded.search_dense(vectors[0], len(CORPUS))} == {None}
    finally:
        upgraded.close()


def test_another_set_of_languages_re_analyses_the_index_on_open(tmp_path):
    path = tmp_path / "index"
    first = open_at(path, languages=["en", "ro"])
    first.upsert(*chunks_of())
    assert ranked(first, "Gesprächen", "de") == []
    first.close()

    widened = open_at(path, languages=["de", "en", "ro"])
    try:
        assert json.loads((path / "meta.json").read_text())["languages"] == ["de", "en", "ro"]
        assert ranked(widened, "Gesprächen", "de") == ["de-conv"]  # the payload kept its language
        assert ranked(widened, "conversația", "ro") == ["ro-conv"]
    finally:
        widened.close()

    narrowed = open_at(path, languages=["en"])
    try:
        assert ranked(narrowed, "conversația", "ro") == []
        assert ranked(narrowed, "Conversațiile", "ro") == ["ro-conv"]
        assert narrowed.count() == len(CORPUS)
    finally:
        narrowed.close()


def test_an_interrupted_re_analysis_starts_again_from_the_kept_old_index(tmp_path):
    path = tmp_path / "index"
    first = open_at(path, languages=["en"])
    first.upsert(*chunks_of())
    first.close()
    # A crash after the old index was moved aside and a half-built one moved in, before meta.json
    # named the new languages: the old index is whole in tantivy.previous.
    (path / "tantivy").rename(path / "tantivy.previous")
    (path / "tantivy").mkdir()
    (path / "tantivy" / "half-written").write_bytes(b"\0")
    (path / "tantivy.upgrading").mkdir()

    reopened = open_at(path, languages=["en", "ro"])
    try:
        assert reopened.count() == len(CORPUS)
        assert ranked(reopened, "conversația", "ro") == ["ro-conv"]
        assert not (path / "tantivy.previous").exists() and not (path / "tantivy.upgrading").exists()
    finally:
        reopened.close()


async def test_an_ingested_format_3_index_upgrades_without_embedding_again(
    tmp_path, monkeypatch, counting_embedder, tokenizer
):
    """Through the service's write path: documents ingested by the code before languages, upgraded on
    open, then ingested again: identified languages, the stored vectors reused, nothing embedded."""
    path = tmp_path / "index"
    documents = [DocumentIn(id=doc_id, title=title, text=text) for doc_id, _, title, text in CORPUS]
    chunker = settings_chunker(tokenizer)
    with monkeypatch.context() as patch:
        patch.setattr(embedded.on_disk, "FORMAT_VERSION", 3)
        old = EmbeddedBackend(path, dim=counting_embedder.dim, hnsw=HNSW, model_id=counting_embedder.model_id,
                              languages=LANGUAGES)
        await embedded_ingestor(old, counting_embedder, chunker).ingest(documents)
        before = {document.id: await old.document_vectors(document.id) for document in documents}
        await old.close()
    embedded_before = counting_embedder.texts
    assert embedded_before == len(CORPUS)

    upgraded = EmbeddedBackend(path, dim=counting_embedder.dim, hnsw=HNSW, model_id=counting_embedder.model_id,
                               languages=LANGUAGES, identifier=IDENTIFIER)
    try:
        for document in documents:
            after = await upgraded.document_vectors(document.id)
            assert {k: v.tobytes() for k, v in after.items()} == {k: v.tobytes() for k, v in before[document.id].items()}
        assert [hit.chunk.doc_id for hit in await upgraded.search_bm25("conversația", 3, language="ro")] == ["ro-conv"]
        ingestor = embedded_ingestor(
            upgraded, counting_embedder, chunker, languages=DocumentLanguages(IDENTIFIER, tuple(LANGUAGES))
        )
        # Rewritten under their language (part of the fingerprint), their stored vectors reused.
        await ingestor.ingest(documents)
        assert counting_embedder.texts == embedded_before
        assert (await ingestor.ingest(documents)).skipped == len(CORPUS)
        assert [hit.chunk.doc_id for hit in await upgraded.search_bm25("Gesprächen", 3, language="de")] == ["de-conv"]
    finally:
        await upgraded.close()


def test_the_neutral_weight_boosts_only_the_neutral_clauses_of_a_known_language():
    from rag_retriever.backends.embedded.analyzers import LexicalFields

    lexical = LexicalFields.of(["en", "ro"])
    schema = tantivy.SchemaBuilder()
    lexical.add_to_schema(schema)
    built = schema.build()
    weighted = [repr(q) for _, q in lexical.clauses(built, "stored conversations", "en", {"en", "ro"}, 0.25)]
    unsure = [repr(q) for _, q in lexical.clauses(built, "stored conversations", None, {"en", "ro"}, 0.25)]
    assert sum("Boost" in q for q in weighted) == 4  # 2 terms x (text, title) of the neutral group
    assert not any("Boost" in q for q in unsure)
