"""Languages in the retriever: a document's language at ingestion (declared or identified), a query's
(the caller's or identified) and the dense weight it gets; end to end over HTTP with a real model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from rag_common.languages import identifier_of
from rag_common.settings import EmbedderSettings, LanguageSettings
from rag_retriever.app import create_app
from rag_retriever.backends.base import FusionSettings
from rag_retriever.document_language import DocumentLanguages
from rag_retriever.query_language import QueryLanguages
from rag_retriever.settings import RetrieverSettings
from tests.retriever.test_retriever_http import identity_header

IDENTIFIER = identifier_of(LanguageSettings())
MIN_MAX = FusionSettings(method="min_max", dense_weight=RetrieverSettings().hybrid_dense_weight)

ROMANIAN = (
    "Conversațiile sunt stocate în Redis, cu o durată de viață de treizeci de zile. Fiecare conversație "
    "aparține unui singur utilizator și poate fi ștearsă oricând din pagina de chat."
)
GERMAN = "Die Gespräche werden in Redis gespeichert und nach dreißig Tagen automatisch gelöscht."
ENGLISH = "Uploaded files are parsed, split into chunks and embedded before they are indexed."


def test_the_dense_list_weighs_less_for_a_language_the_embedder_was_not_trained_for():
    languages = QueryLanguages.of(RetrieverSettings(), LanguageSettings(), EmbedderSettings(), IDENTIFIER)
    assert languages.fusion_for(MIN_MAX, "en").dense_weight == 0.5
    other = RetrieverSettings().hybrid_dense_weight_other_language
    assert other < 0.5
    assert languages.fusion_for(MIN_MAX, "ro").dense_weight == other
    # Unknown language: not known to be the embedder's.
    assert languages.fusion_for(MIN_MAX, None).dense_weight == other
    multilingual = QueryLanguages.of(
        RetrieverSettings(), LanguageSettings(), EmbedderSettings(languages=["*"]), IDENTIFIER
    )
    assert multilingual.fusion_for(MIN_MAX, "ro").dense_weight == 0.5
    assert languages.fixed(0.7).fusion_for(MIN_MAX, "ro").dense_weight == 0.7


def test_a_query_language_is_the_callers_when_analysed_here_else_identified():
    languages = QueryLanguages.of(
        RetrieverSettings(), LanguageSettings(languages=["en", "ro"]), EmbedderSettings(), IDENTIFIER
    )
    assert languages.language_of("anything at all", "ro") == "ro"
    assert languages.language_of("anything at all", "de") is None  # not analysed here: unsure
    assert languages.language_of("Unde sunt stocate conversațiile?", None) == "ro"
    assert languages.language_of("Wo werden die Gespräche gespeichert?", None) is None


def test_a_document_language_is_declared_or_identified():
    documents = DocumentLanguages(IDENTIFIER, ("en", "ro", "de"))
    assert documents.languages_of([ROMANIAN, GERMAN, ENGLISH, ENGLISH], [None, None, None, "ro"]) == [
        "ro", "de", "en", "ro",
    ]
    assert DocumentLanguages(IDENTIFIER, ("en",)).language_of(GERMAN, None) is None
    # Declared but not analysed here: neutral, never a guess over the uploader's word.
    assert DocumentLanguages(IDENTIFIER, ("en",)).language_of(ENGLISH, "de") is None


@pytest.fixture(scope="module")
def client(tmp_path_factory, embedder) -> Iterator[TestClient]:
    settings = RetrieverSettings(index_dir=str(tmp_path_factory.mktemp("languages") / "index"))
    with TestClient(create_app(settings, embedder=embedder), headers=identity_header()) as test_client:
        documents = [
            {"id": "ro", "text": ROMANIAN, "title": "Conversații"},
            {"id": "de", "text": GERMAN},
            {"id": "en", "text": ENGLISH},
        ]
        response = test_client.post("/v1/documents", json={"documents": documents})
        assert response.status_code == 200, response.text
        yield test_client


def test_passages_carry_their_documents_language_and_the_response_the_querys(client):
    body = client.post("/v1/search", json={"query": "Unde sunt stocate conversațiile?", "top_k": 3}).json()
    assert body["language"] == "ro"
    assert body["passages"][0]["doc_id"] == "ro"
    assert {p["doc_id"]: p["language"] for p in body["passages"]} == {"ro": "ro", "de": "de", "en": "en"}


@pytest.mark.parametrize(
    "query", ["conversatiile stocate", "conversaţiile stocate", "unde sunt stocate conversațiile utilizatorului"]
)
def test_a_romanian_query_finds_the_romanian_document_by_bm25_with_or_without_diacritics(client, query):
    body = client.post("/v1/search", json={"query": query, "mode": "bm25", "top_k": 3}).json()
    assert body["passages"][0]["doc_id"] == "ro"


def test_an_upload_declares_its_language_and_a_wrong_one_is_a_422(client):
    files = {"files": ("note.txt", b"Die Gespraeche bleiben dreissig Tage.", "text/plain")}
    declared = client.post("/v1/documents/upload", files=files, data={"language": "de"})
    assert declared.status_code == 200, declared.text
    body = client.post("/v1/search", json={"query": "Gespraeche dreissig", "mode": "bm25", "top_k": 1}).json()
    assert (body["passages"][0]["source"], body["passages"][0]["language"]) == ("note.txt", "de")

    wrong = client.post("/v1/documents/upload", files=files, data={"language": "xx"})
    assert wrong.status_code == 422
    assert "unsupported language 'xx'" in wrong.text
    wrong_json = client.post("/v1/documents", json={"documents": [{"text": "x", "language": "klingon"}]})
    assert wrong_json.status_code == 422


def test_learned_fusion_sees_the_dense_list_again_only_when_the_embedder_is_blind_to_the_language():
    from rag_retriever.fusion_features import FEATURE_NAMES, CandidateSignals, feature_matrix

    candidates = [CandidateSignals(dense=0.9, dense_rank=1, bm25=3.0, bm25_rank=2),
                  CandidateSignals(dense=0.6, dense_rank=2, bm25=5.0, bm25_rank=1)]
    column = {name: i for i, name in enumerate(FEATURE_NAMES)}
    seeing = feature_matrix(candidates)
    blind = feature_matrix(candidates, dense_blind=True)
    assert (seeing[:, column["dense_z_blind"]] == 0).all() and (seeing[:, column["dense_rr_blind"]] == 0).all()
    assert list(blind[:, column["dense_z_blind"]]) == list(blind[:, column["dense_z"]]) == [1.0, -1.0]
    assert list(blind[:, column["dense_rr_blind"]]) == [1.0, 0.5]
