from __future__ import annotations

import pytest

from rag_generator.evidence import build_evidence
from rag_generator.extractive_answerer import ExtractiveAnswerer, sentence_context
from rag_generator.settings import GeneratorSettings

from .conftest import CountingEmbedder, passage

DISTRACTOR_CACHE = passage(
    1,
    "The gateway caches retrieval results for five minutes. Cache entries are keyed by the refined query "
    "and the requested top_k. A cache hit skips both the retriever and the reranker.",
    title="Caching",
    score=0.81,
)
STORAGE = passage(
    2,
    "The gateway is the only service that keeps state. Conversations are stored in Redis as a list of Turn "
    "JSON objects under the key rag:conversation:{id}. Each list is trimmed to the last 50 turns. "
    "Keys expire after 30 days without activity.",
    title="Conversation storage",
    score=0.77,
)
DISTRACTOR_INDEX = passage(
    3,
    "The retriever stores chunks in an embedded index. Dense vectors live in an hnswlib graph and BM25 "
    "postings in tantivy.\n\n| Backend | Store |\n|---|---|\n| embedded | tantivy + hnswlib |",
    title="Index",
    score=0.65,
)
PASSAGES = [DISTRACTOR_CACHE, STORAGE, DISTRACTOR_INDEX]


@pytest.fixture
def answerer(counting_embedder: CountingEmbedder) -> ExtractiveAnswerer:
    return ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder)


def test_picks_the_sentence_that_answers_among_distractors(answerer: ExtractiveAnswerer) -> None:
    result = answerer.answer("Where are conversations stored?", PASSAGES)
    assert result.best is not None
    assert result.best.unit.id == "2.2"
    assert "rag:conversation:{id}" in result.text
    assert all(unit.source == 2 for unit in result.sentences)
    assert result.best.features()["cosine"] == result.best.cosine > 0.5


def test_the_answer_is_verbatim_in_passage_order_with_exact_offsets(answerer: ExtractiveAnswerer) -> None:
    result = answerer.answer("Where are conversations stored and when do they expire?", PASSAGES)
    assert 1 <= len(result.sentences) <= 3
    keys = [(u.source, u.index) for u in result.sentences]
    assert keys == sorted(keys)
    for unit in result.sentences:
        assert unit.passage.text[unit.start : unit.end] == unit.text
    assert result.text == " ".join(u.text for u in result.sentences)


def test_a_well_scoring_neighbour_joins_the_best_sentence(counting_embedder: CountingEmbedder) -> None:
    wide = ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder, neighbour_margin=1.0, other_margin=-1.0, max_sentences=2)
    result = wide.answer("Where are conversations stored?", PASSAGES)
    assert [u.id for u in result.sentences] in (["2.1", "2.2"], ["2.2", "2.3"])
    strict = ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder, neighbour_margin=0.0, other_margin=-1.0)
    assert [u.id for u in strict.answer("Where are conversations stored?", PASSAGES).sentences] == ["2.2"]


def test_short_units_and_table_separators_are_never_candidates(answerer: ExtractiveAnswerer) -> None:
    result = answerer.answer("Which backend stores the index?", PASSAGES)
    texts = {c.unit.text for c in result.candidates}
    assert "|---|---|" not in texts
    assert "| Backend | Store |" not in texts  # two words
    assert "| embedded | tantivy + hnswlib |" not in texts  # three words
    assert all(len(t.split()) >= 4 for t in texts)


def test_all_candidates_are_embedded_in_one_batch(answerer: ExtractiveAnswerer, counting_embedder: CountingEmbedder) -> None:
    result = answerer.answer("Where are conversations stored?", PASSAGES)
    assert [kind for kind, _ in counting_embedder.calls] == ["queries", "documents", "documents"]
    assert counting_embedder.calls[0][1] == ["Where are conversations stored?"]
    sentences, passages = counting_embedder.calls[1][1], counting_embedder.calls[2][1]
    assert sorted(sentences) == sorted(sentence_context(c.unit) + c.unit.text for c in result.candidates)
    assert passages == [p.text for p in PASSAGES]
    assert sorted(result.passage_cosines) == [1, 2, 3]
    scores = [c.score for c in result.candidates]
    assert scores == sorted(scores, reverse=True)


def test_accepts_prebuilt_units_and_keeps_their_numbering(answerer: ExtractiveAnswerer) -> None:
    units = build_evidence([STORAGE, DISTRACTOR_CACHE], max_passages=2, max_passage_chars=2000)
    result = answerer.answer("How long until conversation keys expire?", units)
    assert result.best is not None and result.best.unit.id == "1.4"


def test_rank_prior_breaks_a_tie_between_identical_sentences(answerer: ExtractiveAnswerer) -> None:
    same = "Conversations are stored in Redis as a list of Turn JSON objects."
    result = answerer.answer("Where are conversations stored?", [passage(1, same), passage(2, same)])
    assert result.best is not None and result.best.unit.source == 1
    assert result.best.rank_prior == 1.0 and result.candidates[1].rank_prior == 0.5


def test_no_eligible_sentence_gives_an_empty_answer(answerer: ExtractiveAnswerer, counting_embedder: CountingEmbedder) -> None:
    result = answerer.answer("anything", [passage(1, "Too short.\n|---|---|")])
    assert result.text == "" and result.sentences == () and result.best is None
    assert counting_embedder.calls == []


async def test_async_variant_gives_the_same_answer(answerer: ExtractiveAnswerer) -> None:
    sync = answerer.answer("Where are conversations stored?", PASSAGES)
    async_ = await answerer.aanswer("Where are conversations stored?", PASSAGES)
    assert [u.id for u in async_.sentences] == [u.id for u in sync.sentences]


def test_max_sentences_is_bounded(counting_embedder: CountingEmbedder) -> None:
    with pytest.raises(ValueError):
        ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder, max_sentences=4)
