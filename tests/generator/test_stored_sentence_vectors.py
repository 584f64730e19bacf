"""Sentence vectors stored at ingestion (``Passage.sentence_vectors``) stand in for embedding at
answer time, and change no answer: same candidates, same scores, same choice."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from pydantic import ValidationError

from rag_common.schemas import GenerateRequest, Passage, SentenceVectors
from rag_common.sentence_vectors import known_vectors, pack, sentence_inputs, unpack
from rag_generator.claim_support import Claim, ClaimSupport
from rag_generator.evidence import build_evidence
from rag_generator.extractive_answerer import ExtractiveAnswer, ExtractiveAnswerer
from rag_generator.extractive_answerer import sentence_context as sentence_context_of
from rag_generator.settings import GeneratorSettings

from .conftest import PASSAGES as ZORBLAX, CountingEmbedder, passage

DIM = 32


class HashEmbedder:
    """Deterministic: a text's vector depends on the text alone (never on its batch), so stored and
    answer-time vectors are bit-identical and any difference in the answer would be a bug."""

    dim = DIM
    max_seq_length = 256
    model_id = "hash"

    def __init__(self) -> None:
        self.documents: list[str] = []
        self.queries: list[str] = []

    def warm_up(self) -> None:
        pass

    @staticmethod
    def _vector(text: str) -> np.ndarray:
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        words = np.zeros(DIM, dtype=np.float32)
        for word in text.lower().split():  # shared words pull vectors together, so cosines vary
            words[int(hashlib.md5(word.encode()).hexdigest(), 16) % DIM] += 1.0
        vector = words + 0.3 * np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        return (vector / np.linalg.norm(vector)).astype(np.float32)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        self.queries.extend(texts)
        return np.stack([self._vector(text) for text in texts])

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.documents.extend(texts)
        return np.stack([self._vector(text) for text in texts])

    def count_tokens(self, text: str) -> int:
        return len(text.split())


def with_stored(passages: list[Passage], embedder) -> list[Passage]:
    """``passages`` carrying what the retriever stores at ingestion, computed with ``embedder``."""
    stored = []
    for p in passages:
        context, spans, texts = sentence_inputs(p.text, p.title, p.section_path)
        vectors = embedder.encode_documents(texts) if texts else np.zeros((0, embedder.dim), dtype=np.float32)
        stored.append(p.model_copy(update={"sentence_vectors": pack(context, spans, vectors)}))
    return stored


QUESTIONS = [
    "Who founded Zorblax Aerospace?",
    "When did the Fjord-2 first fly?",
    "How many charts does the Quillfeather Library hold?",
    "How much sun does basil need?",
    "What is the capital of Peru?",
]


def summary(answer: ExtractiveAnswer) -> tuple:
    return (answer.text, [u.id for u in answer.sentences], [c.unit.id for c in answer.candidates])


@pytest.mark.parametrize("question", QUESTIONS)
def test_stored_vectors_change_nothing_bit_for_bit(question: str) -> None:
    embedder = HashEmbedder()
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), embedder)
    stored = with_stored(ZORBLAX, HashEmbedder())
    plain = answerer.answer(question, ZORBLAX)
    embedder.documents.clear()
    reused = answerer.answer(question, stored)
    assert summary(reused) == summary(plain)
    assert [c.features() for c in reused.candidates] == [c.features() for c in plain.candidates]
    assert reused.passage_cosines == plain.passage_cosines
    # Only the passages were embedded (they carry no ``embedding`` here): no sentence at all.
    assert embedder.documents == [p.text for p in ZORBLAX]


@pytest.mark.parametrize("question", QUESTIONS)
def test_stored_vectors_change_no_answer_with_the_real_embedder(question: str, counting_embedder: CountingEmbedder) -> None:
    """Same choices with all-MiniLM-L6-v2; scores equal up to float noise (a batch's padding moves the
    last bits of a vector, so vectors embedded at ingestion in other batches are equal to ~1e-7)."""
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder)
    stored = with_stored(ZORBLAX, counting_embedder.inner)
    query = counting_embedder.inner.encode_queries([question])[0]
    plain = answerer.answer(question, ZORBLAX, query_vector=query)
    counting_embedder.calls.clear()
    reused = answerer.answer(question, stored, query_vector=query)
    assert summary(reused) == summary(plain)
    for a, b in zip(reused.candidates, plain.candidates):
        assert a.score == pytest.approx(b.score, abs=1e-5)
    # No sentence embedded: only the passages (one batch), which carry no stored ``embedding`` here.
    assert counting_embedder.batch_sizes == [("documents", len(ZORBLAX))]


def test_answering_embeds_nothing_when_everything_is_stored() -> None:
    embedder = HashEmbedder()
    stored = with_stored(ZORBLAX, embedder)
    stored = [p.model_copy(update={"embedding": embedder._vector(p.text).tolist()}) for p in stored]
    query = embedder._vector("Who founded Zorblax Aerospace?").tolist()
    embedder.documents.clear()
    result = ExtractiveAnswerer.of(GeneratorSettings(), embedder).answer("Who founded Zorblax Aerospace?", stored, query_vector=query)
    assert result.text and embedder.documents == [] and embedder.queries == []


def test_passages_without_stored_vectors_are_embedded_at_answer_time() -> None:
    """An older index (no vectors) next to a newer one: only the older passage's sentences are embedded."""
    embedder = HashEmbedder()
    mixed = with_stored(ZORBLAX[:1], embedder) + list(ZORBLAX[1:])
    plain = ExtractiveAnswerer.of(GeneratorSettings(), embedder).answer("Who founded Zorblax Aerospace?", ZORBLAX)
    embedder.documents.clear()
    reused = ExtractiveAnswerer.of(GeneratorSettings(), embedder).answer("Who founded Zorblax Aerospace?", mixed)
    assert summary(reused) == summary(plain)
    sentences = [text for text in embedder.documents if text not in {p.text for p in ZORBLAX}]
    assert sentences and all(not text.startswith("Zorblax Aerospace > ") for text in sentences)


def test_a_stale_context_is_not_used() -> None:
    """Vectors stored under another title (renamed since ingestion) are of another string: embedded anew."""
    embedder = HashEmbedder()
    stored = with_stored(ZORBLAX, embedder)
    renamed = [stored[0].model_copy(update={"title": "Zorblax AS"}), *stored[1:]]
    embedder.documents.clear()
    ExtractiveAnswerer.of(GeneratorSettings(), embedder).answer("Who founded Zorblax?", renamed)
    assert any(text.startswith("Zorblax AS > Company > History: ") for text in embedder.documents)


def test_vectors_of_another_dimension_are_ignored() -> None:
    embedder = HashEmbedder()
    context, spans, _ = sentence_inputs(ZORBLAX[0].text, ZORBLAX[0].title, ZORBLAX[0].section_path)
    other = ZORBLAX[0].model_copy(update={"sentence_vectors": pack(context, spans, np.ones((len(spans), 8)))})
    assert known_vectors([other], DIM) == {}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 3e38, 0.0])
def test_vectors_no_embedder_makes_are_ignored(value: float) -> None:
    """Not finite, or not of unit length: a body from elsewhere, never the retriever's. The answer is
    the one embedding gives (and nothing non-finite reaches the scores or the response)."""
    embedder = HashEmbedder()
    context, spans, _ = sentence_inputs(ZORBLAX[0].text, ZORBLAX[0].title, ZORBLAX[0].section_path)
    odd = ZORBLAX[0].model_copy(update={"sentence_vectors": pack(context, spans, np.full((len(spans), DIM), value))})
    assert known_vectors([odd], DIM) == {}
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), embedder)
    question = "Who founded Zorblax Aerospace?"
    assert summary(answerer.answer(question, [odd, *ZORBLAX[1:]])) == summary(answerer.answer(question, ZORBLAX))


def test_claim_support_reuses_stored_vectors_of_bare_sentences_only() -> None:
    """Claim support embeds cited sentences bare: a stored vector is that string's only when the
    passage has no title or section (then the context is empty); verdicts are the same either way."""
    embedder = HashEmbedder()
    bare = Passage(chunk_id="b", doc_id="b", text="The tower opened in 1889 to the public. It is 330 metres tall today.")
    titled = ZORBLAX[0]
    plain_units = build_evidence([bare, titled], max_passages=6, max_passage_chars=1200)
    stored_units = build_evidence(with_stored([bare, titled], HashEmbedder()), max_passages=6, max_passage_chars=1200)
    support = ClaimSupport.of(GeneratorSettings(), embedder)
    claims = lambda units: [Claim("The tower opened in 1889.", [units[0]]), Claim("Halvorsen founded it.", [units[3]])]  # noqa: E731
    plain = support.score_claims(claims(plain_units))
    embedder.documents.clear()
    reused = support.score_claims(claims(stored_units))
    assert reused == plain
    assert embedder.documents == [stored_units[3].text]  # the titled passage's sentence only


def test_pack_and_unpack_are_exact() -> None:
    vectors = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    packed = pack("T: ", [(0, 4), (5, 9), (10, 12)], vectors)
    assert np.array_equal(unpack(packed), vectors)
    again = SentenceVectors.model_validate_json(packed.model_dump_json())
    assert np.array_equal(unpack(again), vectors)


@pytest.mark.parametrize(
    "bad",
    [
        {"context": "", "spans": [[0, 4]], "dim": 2, "vectors": "not base64!"},
        {"context": "", "spans": [[0, 4]], "dim": 2, "vectors": "AAAA"},  # 3 bytes, 8 expected
        {"context": "", "spans": [[4, 4]], "dim": 1, "vectors": "AAAAAA=="},  # empty span
        {"context": "", "spans": [[0, 4], [2, 6]], "dim": 1, "vectors": "AAAAAAAAAAA="},  # overlapping
        {"context": "", "spans": [[0, 4, 5]], "dim": 1, "vectors": "AAAAAA=="},
        {"context": "", "spans": [[0, 4]], "dim": 0, "vectors": ""},
        {"context": "", "spans": [[0, 99]], "dim": 1, "vectors": "AAAAAA=="},  # past the text
    ],
)
def test_malformed_sentence_vectors_are_refused(bad: dict) -> None:
    body = {"query": "q", "passages": [{"chunk_id": "c", "doc_id": "d", "text": "Some text here.", "sentence_vectors": bad}]}
    with pytest.raises(ValidationError):
        GenerateRequest.model_validate_json(__import__("json").dumps(body))


def test_a_passage_of_the_fixture_helper_is_valid_with_vectors() -> None:
    p = passage(1, "One two three four five. Six seven eight nine ten.")
    [stored] = with_stored([p], HashEmbedder())
    assert stored.sentence_vectors is not None and len(stored.sentence_vectors.spans) == 2
    assert Passage.model_validate_json(stored.model_dump_json()) == stored


def test_pooled_vectors_are_scored_by_the_answerer_and_left_alone_by_claim_support() -> None:
    """``method="pooled"`` rows (the retriever's default) are other numbers than embedding gives: the
    answerer scores with them (nothing embedded, the pooled cosines in its candidates), while claim
    support, whose threshold was fitted on bare-sentence embeddings, embeds its cited sentences."""
    embedder = HashEmbedder()
    bare = Passage(chunk_id="b", doc_id="b", text="The tower opened in 1889 to the public. It is 330 metres tall today.")
    rng = np.random.default_rng(7)
    pooled = []
    for p in [bare, *ZORBLAX]:
        context, spans, _ = sentence_inputs(p.text, p.title, p.section_path)
        rows = rng.normal(size=(len(spans), DIM)).astype(np.float32)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        pooled.append(p.model_copy(update={
            "sentence_vectors": pack(context, spans, rows, method="pooled"),
            "embedding": embedder._vector(p.text).tolist(),
        }))
    question = "Who founded Zorblax Aerospace?"
    query = embedder._vector(question)
    embedder.documents.clear()
    answer = ExtractiveAnswerer.of(GeneratorSettings(), embedder).answer(question, pooled, query_vector=query.tolist())
    assert embedder.documents == []
    known = known_vectors(pooled, DIM)
    by_unit = {c.unit.id: c.cosine for c in answer.candidates}
    units = build_evidence(pooled, max_passages=6, max_passage_chars=1200)
    assert by_unit
    for unit in units:
        if unit.id in by_unit:
            assert by_unit[unit.id] == pytest.approx(float(known[sentence_context_of(unit) + unit.text] @ query), abs=1e-6)
    support = ClaimSupport.of(GeneratorSettings(), embedder)
    embedder.documents.clear()
    support.score_claims([Claim("The tower opened in 1889.", [units[0]])])
    assert embedder.documents == [units[0].text]  # a bare passage, but its stored row is pooled: embedded
