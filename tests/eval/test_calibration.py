"""``ragctl calibrate``'s pieces: the stratified halves, fitting on one half and reporting on the
other, and the feature rows of a small real dataset through the retriever's and generator's runtimes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_eval.calibration import (
    GateRow,
    abstention_report,
    auroc,
    calibrate,
    gate_rows,
    leave_one_out,
    split_halves,
    standalone_text,
)
from rag_eval.datasets.types import Corpus, Dataset, Document, Query, Turn
from rag_generator.answerability import FEATURE_NAMES, AnswerabilityGate

PROVENANCE = {"dataset": "synthetic", "command": "test"}


def _queries(n_answerable: int, n_unanswerable: int) -> list[Query]:
    return [Query(f"a{i}", f"q{i}", answerable=True) for i in range(n_answerable)] + [
        Query(f"u{i}", f"q{i}", answerable=False) for i in range(n_unanswerable)
    ]


def test_halves_split_each_class_in_two_and_follow_the_seed() -> None:
    queries = _queries(10, 7)
    halves = split_halves(queries, seed=0)
    for prefix, size in (("a", 10), ("u", 7)):
        labels = [halves[q.id] for q in queries if q.id.startswith(prefix)]
        assert abs(labels.count("A") - labels.count("B")) <= 1 and len(labels) == size
    assert split_halves(queries, seed=0) == halves
    assert split_halves(queries, seed=1) != halves


def test_the_gate_is_fitted_on_one_half_and_scored_on_the_other() -> None:
    rng = np.random.default_rng(0)
    queries = _queries(60, 60)
    halves = split_halves(queries, seed=0)
    # Answerable questions score higher on every feature, with noise: separable but not perfectly.
    rows = [
        GateRow(q.id, bool(q.answerable), rng.normal(1.0 if q.answerable else 0.0, 0.6, len(FEATURE_NAMES)))
        for q in queries
    ]
    rows.append(GateRow("a-none", True, None))  # no eligible sentence: abstains before the gate
    halves["a-none"] = "B"
    params, report = calibrate(rows, halves, "A", provenance=PROVENANCE)
    gate = AnswerabilityGate(params)  # loadable as the service loads it
    assert report["fit_questions"] == 60 and report["held_out"]["n"] == 61
    assert report["held_out"]["f1"] > 0.75 and report["held_out_auroc"] > 0.85
    assert params["fitted_on"]["held_out"] == report["held_out"]
    assert gate.threshold == pytest.approx(report["threshold"], abs=1e-4)


def test_leave_one_out_scores_each_dataset_with_a_gate_fitted_on_the_others_only() -> None:
    rng = np.random.default_rng(0)
    rows, halves = [], {}
    # "a" and "b" alike; "shifted" separates as well but every feature sits 3 higher, as a language whose
    # scores run higher would: a gate that never saw it takes its unanswerable questions for answerable.
    for name, shift in (("a", 0.0), ("b", 0.0), ("shifted", 3.0)):
        queries = _queries(40, 40)
        for query_id, half in split_halves(queries, seed=0, prefix=f"{name}/").items():
            halves[query_id] = half
        for q in queries:
            vector = rng.normal((1.0 if q.answerable else 0.0) + shift, 0.4, len(FEATURE_NAMES))
            rows.append(GateRow(f"{name}/{q.id}", bool(q.answerable), vector, "en"))
    report = leave_one_out(rows, halves, "A", max_answerable_abstention=None)
    assert set(report) == {"a", "b", "shifted"}
    assert report["a"]["held_out"]["n"] == report["shifted"]["held_out"]["n"] == 40  # its other half only
    assert report["shifted"]["held_out_auroc"] > 0.9  # ranked well within itself...
    assert report["shifted"]["abstain_rate_unanswerable"] < 0.1  # ...but never seen: its off-topic ones pass
    _, pooled = calibrate(rows, halves, "A", provenance=PROVENANCE, max_answerable_abstention=None)
    assert pooled["leave_one_dataset_out"] == report


def test_abstention_report_and_auroc_on_hand_counted_cases() -> None:
    abstain = np.array([True, True, False, False])
    unanswerable = np.array([True, False, True, False])
    report = abstention_report(abstain, unanswerable)
    assert (report["precision"], report["recall"], report["f1"]) == (0.5, 0.5, 0.5)
    assert report["abstain_rate"] == 0.5
    assert auroc(np.array([0.9, 0.8, 0.1, 0.2]), np.array([True, True, False, False])) == 1.0
    assert auroc(np.array([0.5, 0.5]), np.array([True, False])) == 0.5


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


async def test_feature_rows_come_from_the_served_chain(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    corpus = Corpus(
        [
            Document("tides", "Tides are caused mainly by the gravitational pull of the Moon on the oceans.", "Tides"),
            Document("basil", "Basil needs six hours of sun a day and soil kept moist but not wet.", "Growing basil"),
            Document("lib", "The Quillfeather Library opened in 1923 and holds 40,000 maritime charts.", "Quillfeather"),
        ]
    )
    queries = [
        Query("q1", "What causes tides?", answerable=True),
        Query("q2", "How much sun does basil need?", answerable=True),
        Query("q3", "Who won the 1998 football world cup?", answerable=False),
        Query("q4", "unlabelled question", answerable=None),
    ]
    dataset = Dataset("tiny", corpus, queries, {"q1": {"tides": 1}, "q2": {"basil": 1}})
    rows = await gate_rows(dataset, tmp_path / "cache", embedder)
    assert [r.query_id for r in rows] == ["tiny/q1", "tiny/q2", "tiny/q3"]  # unlabelled questions are left out
    assert all(r.features is not None and r.features.shape == (len(FEATURE_NAMES),) for r in rows)
    assert {r.language for r in rows} == {"en"}  # named as the gateway names it
    best_cosine = FEATURE_NAMES.index("best_sentence_cosine")
    by_id = {r.query_id: r.features for r in rows}
    assert by_id["tiny/q1"][best_cosine] > by_id["tiny/q3"][best_cosine] + 0.2


def test_a_follow_up_is_made_standalone_like_the_refiners_fallback() -> None:
    history = (Turn("user", "What is the Fjord-2?"), Turn("agent", "A rocket."), Turn("user", "Who builds it?"))
    assert standalone_text(Query("q", "When did it first fly?", history=history)) == "When did it first fly? (Who builds it?)"
    assert standalone_text(Query("q", "What causes tides?")) == "What causes tides?"
