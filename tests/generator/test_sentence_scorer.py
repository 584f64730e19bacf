"""The fitted sentence scorer (issue 32): its features on real sentences in en/ro/de/es, the shipped
scorer preferring the sentence that answers, the answer span, and the scorer file's validation."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rag_common.schemas import GenerateRequest, Passage
from rag_generator.answer_span import answer_span, best_span
from rag_generator.evidence import build_evidence
from rag_generator.extractive_answerer import ExtractiveAnswerer, choose_sentences
from rag_generator.sentence_features import FEATURE_NAMES, AskedQuestion, sentence_features
from rag_generator.sentence_scorer import (
    DEFAULT_SCORER_PATH,
    SCORER_FORMAT,
    SentenceScorer,
    default_scorer,
    fit_sentence_scorer,
)
from rag_generator.settings import GeneratorSettings

from .conftest import CountingEmbedder, generator_with

#: (language, question, the 2019 winner, the 2022 winner, the question quoted as a sentence, navigation)
WIMBLEDON = {
    "en": (
        "Who won the women's singles Wimbledon in 2019?",
        "Simona Halep won the women's singles title at Wimbledon in 2019, beating Serena Williams in the final.",
        "Elena Rybakina won the women's singles title at Wimbledon in 2022, beating Ons Jabeur in the final.",
        "Who won the women's singles Wimbledon in 2019?",
        "Check out the medal count.",
    ),
    "ro": (
        "Cine a câștigat turneul de simplu feminin de la Wimbledon în 2019?",
        "Simona Halep a câștigat titlul de simplu feminin la Wimbledon în 2019, învingând-o în finală pe Serena Williams.",
        "Elena Rybakina a câștigat titlul de simplu feminin la Wimbledon în 2022, învingând-o în finală pe Ons Jabeur.",
        "Cine a câștigat turneul de simplu feminin de la Wimbledon în 2019?",
        "Vezi toate medaliile câștigate la Jocurile Olimpice.",
    ),
    "de": (
        "Wer gewann 2019 das Dameneinzel in Wimbledon?",
        "Simona Halep gewann 2019 das Dameneinzel in Wimbledon, im Finale schlug sie Serena Williams.",
        "Elena Rybakina gewann 2022 das Dameneinzel in Wimbledon, im Finale schlug sie Ons Jabeur.",
        "Wer gewann 2019 das Dameneinzel in Wimbledon?",
        "Lesen Sie auch: der Medaillenspiegel der Spiele.",
    ),
    "es": (
        "¿Quién ganó el individual femenino de Wimbledon en 2019?",
        "Simona Halep ganó el individual femenino de Wimbledon en 2019, al vencer en la final a Serena Williams.",
        "Elena Rybakina ganó el individual femenino de Wimbledon en 2022, al vencer en la final a Ons Jabeur.",
        "¿Quién ganó el individual femenino de Wimbledon en 2019?",
        "Lee también: el medallero completo de los Juegos.",
    ),
}


def _units(language: str, *texts: str) -> list:
    passages = [
        Passage(chunk_id=f"c{i}", doc_id=f"d{i}", text=text, title="Wimbledon", language=language, score=0.5)
        for i, text in enumerate(texts, start=1)
    ]
    return build_evidence(passages, max_passages=len(passages), max_passage_chars=4000)


def _features(language: str, question: str, text: str) -> dict[str, float]:
    asked = AskedQuestion.of(question, language)
    unit = _units(language, text)[0]
    return sentence_features(asked, unit, context="", cosine=0.5, best_cosine=0.5, passage_cosine=0.5).as_dict()


@pytest.mark.parametrize("language", sorted(WIMBLEDON))
def test_features_tell_the_answer_from_the_wrong_year_a_question_and_navigation(language: str) -> None:
    question, right, wrong_year, quoted, navigation = WIMBLEDON[language]
    answer = _features(language, question, right)
    assert answer["kind_known"] == 1.0 and answer["has_new_kind"] == 1.0
    assert answer["contradicts"] == 0.0 and answer["question"] == 0.0 and answer["navigation"] == 0.0
    assert _features(language, question, wrong_year)["contradicts"] == 1.0
    asked_back = _features(language, question, quoted)
    assert asked_back["question"] == 1.0 and asked_back["has_new_kind"] == 0.0  # it names nothing new
    assert _features(language, question, navigation)["navigation"] == 1.0


def _with(base: dict[str, float], **changes: float) -> np.ndarray:
    return np.asarray([{**base, **changes}[name] for name in FEATURE_NAMES])


def test_the_shipped_scorer_prefers_what_answers_over_what_resembles() -> None:
    """Same relevance, different evidence: the fitted weights rank the sentence holding a new value of
    the wanted kind above the same sentence holding none, and the same sentence quoted as a question
    below both; a contradicted constraint never raises the score (its weight is bounded at 0)."""
    scorer = default_scorer()
    relevant = _features("en", WIMBLEDON["en"][0], WIMBLEDON["en"][1])
    answering, no_value, as_question, contradicting = scorer.probabilities(np.stack([
        _with(relevant),
        _with(relevant, has_new_kind=0.0),
        _with(relevant, has_new_kind=0.0, question=1.0),
        _with(relevant, contradicts=1.0),
    ]))
    assert answering > no_value > as_question
    assert contradicting <= answering
    assert all(0.0 <= p <= 1.0 for p in (answering, no_value, as_question, contradicting))


@pytest.mark.parametrize("language", sorted(WIMBLEDON))
def test_the_answerer_does_not_answer_with_the_quoted_question_or_navigation(
    language: str, counting_embedder: CountingEmbedder
) -> None:
    """The question quoted in the top-ranked passage (the issue's "Super Bowl 2021 location" answer)
    and a navigation line next to it lose to a sentence that names a winner."""
    question, right, wrong_year, quoted, navigation = WIMBLEDON[language]
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), counting_embedder)
    units = _units(language, f"{quoted} {navigation}", wrong_year, right)
    result = answerer.answer(question, units, language=language)
    assert result.best is not None and result.best.unit.text in (right, wrong_year)
    assert quoted not in result.text and navigation not in result.text
    assert all(0.0 <= c.score <= 1.0 for c in result.candidates)


@pytest.mark.xfail(
    strict=True,
    reason="known gap (docs/evaluation.md, \"Sentence scorer\"): half A's fit gives `contradicts` weight 0 (the shared data holds ~37 "
    "wrong-edition sentences per half), so a 2022 winner ranked above the 2019 one still wins",
)
async def test_the_2019_winner_beats_the_2022_winner_ranked_above_it(counting_embedder: CountingEmbedder) -> None:
    question, right, wrong_year, *_ = WIMBLEDON["en"]
    passages = [
        Passage(chunk_id="w22", doc_id="w22", text=wrong_year, title="Wimbledon 2022", score=0.9),
        Passage(chunk_id="w19", doc_id="w19", text=right, title="Wimbledon 2019", score=0.8),
    ]
    generator = generator_with("extractive", counting_embedder, None)
    response = await generator.generate(GenerateRequest(query=question, passages=passages, language="en"))
    assert response.answer_span is not None and response.answer_span.text == "Simona Halep"


@pytest.mark.parametrize("language", sorted(WIMBLEDON))
def test_the_answer_span_marks_the_winner_with_offsets_in_the_sentence(language: str) -> None:
    question, right, *_ = WIMBLEDON[language]
    unit = _units(language, right)[0]
    marked = answer_span(question, language, unit)
    assert marked is not None
    span = marked.cited({unit.id: 2})
    assert span is not None and span.citation == 2 and span.kind == "person"
    assert unit.text[span.start : span.end] == span.text == "Simona Halep"
    assert marked.cited({}) is None  # not cited: nothing to mark


def test_a_where_question_marks_a_place_never_an_acronym() -> None:
    # The demo's question: "JSON" is typed an organisation, which the scorer's feature accepts for "where",
    # but a marked phrase is shown as the answer, so only a place may be marked.
    where = AskedQuestion.of("Where are conversations stored?", "en")
    stored = "Conversations are stored in Redis, one list per conversation: the key holds the Turn JSON (message, answer)."
    assert best_span(where, stored, "en") is None
    headquarters = AskedQuestion.of("Where is the headquarters of the company?", "en")
    span = best_span(headquarters, "The company, known as ACME, has its headquarters in Paris since 1990.", "en")
    assert span is not None and span.text == "Paris"


def test_no_span_for_a_question_whose_kind_no_span_has() -> None:
    unit = _units("en", "Photosynthesis turns light into chemical energy in 1,000 ways.")[0]
    assert answer_span("Why do plants need light?", "en", unit) is None


async def test_the_response_carries_the_span_of_its_cited_best_sentence(counting_embedder: CountingEmbedder) -> None:
    question, right, *_ = WIMBLEDON["en"]
    passages = [
        Passage(chunk_id="w19", doc_id="w19", text=right, title="Wimbledon 2019", score=0.9),
        Passage(chunk_id="news", doc_id="news", text="Tickets for the championships go on sale in March.", score=0.4),
    ]
    generator = generator_with("extractive", counting_embedder, None)
    response = await generator.generate(GenerateRequest(query=question, passages=passages, language="en"))
    span = response.answer_span
    assert span is not None and span.text == "Simona Halep" and span.kind == "person"
    quote = next(c.quote for c in response.citations if c.id == span.citation)
    assert quote[span.start : span.end] == span.text


def test_choose_sentences_keeps_neighbours_and_others_within_their_margins() -> None:
    ranked = [(0.9, 1, 2), (0.85, 1, 3), (0.8, 2, 1), (0.5, 1, 1)]
    assert choose_sentences(ranked, max_sentences=3, neighbour_margin=0.1, other_margin=0.0) == [0, 1]
    assert choose_sentences(ranked, max_sentences=3, neighbour_margin=0.0, other_margin=0.2) == [0, 1, 2]
    assert choose_sentences(ranked, max_sentences=1, neighbour_margin=1.0, other_margin=1.0) == [0]
    assert choose_sentences([], max_sentences=3, neighbour_margin=1.0, other_margin=1.0) == []


# ------------------------------------------------------------------------------- the scorer file


def _params() -> dict:
    return json.loads(DEFAULT_SCORER_PATH.read_text(encoding="utf-8"))


def test_the_shipped_file_loads_and_names_its_provenance() -> None:
    params = _params()
    assert params["format"] == SCORER_FORMAT and params["features"] == list(FEATURE_NAMES)
    assert "ragctl fit-scorer" in params["fitted_on"]["command"]
    SentenceScorer(params)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"format": "rag-answerability-gate"}, "format must be"),
        ({"version": 99}, "unsupported version"),
        ({"features": ["cosine"]}, "feature names do not match"),
        ({"coef": [1.0]}, "coef must be a list"),
        ({"mean": [float("nan")] * len(FEATURE_NAMES)}, "mean must be a list"),
        ({"scale": [0.0] * len(FEATURE_NAMES)}, "scale must be positive"),
        ({"intercept": "1"}, "intercept must be"),
        ({"other_margin": 2.0}, "other_margin must be"),
    ],
)
def test_an_invalid_file_is_refused_with_what_is_wrong(tmp_path: Path, change: dict, message: str) -> None:
    path = tmp_path / "scorer.json"
    path.write_text(json.dumps({**_params(), **change}), encoding="utf-8")
    with pytest.raises(ValueError, match=message) as raised:
        SentenceScorer.from_json(path)
    assert str(path) in str(raised.value)


def test_a_missing_or_broken_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="ragctl fit-scorer"):
        SentenceScorer.from_json(tmp_path / "absent.json")
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        SentenceScorer.from_json(tmp_path / "broken.json")


def test_fitting_learns_the_sign_of_a_feature_and_writes_a_loadable_file() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(400, len(FEATURE_NAMES)))
    y = (x[:, FEATURE_NAMES.index("has_new_kind")] - x[:, FEATURE_NAMES.index("contradicts")] > 0).astype(int)
    params = fit_sentence_scorer(x, y, neighbour_margin=0.05, other_margin=0.0, provenance={"command": "test"})
    coef = dict(zip(FEATURE_NAMES, params["coef"]))
    assert coef["has_new_kind"] > 1.0 and coef["contradicts"] < -1.0
    scorer = SentenceScorer(params)
    assert scorer.neighbour_margin == 0.05 and params["fitted_on"]["rows"] == 400
    assert ((scorer.probabilities(x) > 0.5) == y).mean() > 0.95
    with pytest.raises(ValueError, match="both classes"):
        fit_sentence_scorer(x, np.zeros(400), neighbour_margin=0.0, other_margin=0.0, provenance={})
