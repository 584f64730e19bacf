"""Fitting the sentence scorer (``rag_eval.sentence_scorer_fitting``) without the served chain: the
labels on real XQuAD offsets, the counterfactual page, the by-passage halves, the margins, the fit and
the held-out report, and the rows' cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from rag_common.languages import LanguageGuess
from rag_common.schemas import Passage
from rag_eval.datasets import datasets_dir, load_dataset
from rag_eval.datasets.types import Query
from rag_eval.sentence_scorer_fitting import (
    QuestionRows,
    choose_margins,
    chosen,
    counterfactual_passages,
    fit_half,
    halves_of,
    held_out_report,
    labeller_for,
    load_rows,
    overlaps,
    save_rows,
)
from rag_eval.served_chain import Retrieved
from rag_generator.evidence import build_evidence
from rag_generator.sentence_features import FEATURE_NAMES
from rag_generator.sentence_scorer import SentenceScorer

#: XQuAD's first question: "How many points did the Panthers defense surrender?" → "308" at offset 34.
POINTS = "56beb4343aeaaa14008c925b"


def test_the_xquad_label_is_the_unit_holding_the_gold_offsets() -> None:
    folder = datasets_dir() / "xquad" / "en"
    if not folder.is_dir():
        pytest.skip(f"dataset 'xquad-en' not found at {folder}; set RAG_DATASETS_DIR to the shared datasets folder")
    dataset = load_dataset("xquad-en")
    query = next(q for q in dataset.queries if q.id == POINTS)
    document = dataset.corpus["xquad-00-00"]
    passage = Passage(chunk_id="xquad-00-00#0", doc_id=document.id, text=document.text)
    units = build_evidence([passage], max_passages=1, max_passage_chars=10_000)
    label = labeller_for(dataset)
    answering = [unit.text for unit in units if label(query, unit)]
    assert answering == [units[0].text] and "308 points" in units[0].text
    other = passage.model_copy(update={"doc_id": "xquad-01-00"})
    assert not label(query, build_evidence([other], max_passages=1, max_passage_chars=10_000)[0])


def test_overlap_reads_through_splitting_and_punctuation() -> None:
    assert overlaps("The Panthers gave up just 308 points.", ["the panthers gave up just 308 points , ranking sixth"])
    assert not overlaps("Basil needs sun.", ["The Panthers gave up just 308 points."])


def test_the_counterfactual_page_quotes_the_question_and_moves_the_asked_year() -> None:
    query = Query("q", "Who won the Wimbledon women's singles in 2019?", answers=("Simona Halep",))
    gold = Passage(chunk_id="g#0", doc_id="g", text="Simona Halep won the Wimbledon women's singles in 2019. She was 27.")
    other = Passage(chunk_id="o#0", doc_id="o", text="Wimbledon is played on grass in London every summer.")

    class Gold:
        def relevant(self, query_id: str) -> dict[str, int]:
            return {"g": 1}

    retrieved = Retrieved(LanguageGuess("en", 1.0, "declared"), [gold, other], None)
    made = counterfactual_passages(query, retrieved, Gold(), lambda q, u: False)  # type: ignore[arg-type]
    assert made is not None
    passages, synthetic, moved = made
    assert [p.chunk_id for p in passages] == ["g#0", synthetic, "o#0"] and moved
    assert passages[1].text == f"{query.text} Simona Halep won the Wimbledon women's singles in 2020."
    assert counterfactual_passages(query, Retrieved(retrieved.language, [other], None), Gold(), lambda q, u: False) is None  # type: ignore[arg-type]


def _rows(n: int, seed: int, name: str = "toy") -> list[QuestionRows]:
    """Questions of 6 candidates; the one holding a new value of the wanted kind answers, and cosine
    alone points at it only half the time."""
    rng = np.random.default_rng(seed)
    found = []
    column = {name: i for i, name in enumerate(FEATURE_NAMES)}
    for q in range(n):
        matrix = rng.normal(0.0, 0.1, size=(6, len(FEATURE_NAMES)))
        for binary in ("kind_known", "has_kind", "has_new_kind", "question", "heading", "navigation", "contradicts"):
            matrix[:, column[binary]] = 0.0
        answer = int(rng.integers(6))
        matrix[answer, column["has_new_kind"]] = 1.0
        if q % 2:
            matrix[answer, column["cosine"]] += 1.0
        labels = np.zeros(6, dtype=int)
        labels[answer] = 1
        found.append(QuestionRows(name, f"q{q}", f"group-{q}", matrix, labels, tuple((1, i + 1) for i in range(6))))
    return found


def test_halves_are_drawn_by_group_so_a_group_never_straddles() -> None:
    rows = _rows(40, 0) + [QuestionRows("toy+cf", r.query_id, r.group, r.matrix, r.labels, r.positions) for r in _rows(40, 0)]
    halves = halves_of(rows, 0)
    for row in rows[:40]:
        assert halves[f"toy/{row.query_id}"] == halves[f"toy+cf/{row.query_id}"]
    assert set(halves.values()) == {"A", "B"}


def test_the_fit_learns_what_answers_and_the_report_compares_it_with_the_hand_set_scores() -> None:
    rows = _rows(200, 1)
    halves = halves_of(rows, 0)
    params = fit_half(rows, halves, "A", provenance={"command": "test"})
    coef = dict(zip(FEATURE_NAMES, params["coef"]))
    assert coef["has_new_kind"] > 1.0
    report = held_out_report(rows, halves, params, "A")
    assert report["real"]["best_answers"]["scorer"] > 0.95
    assert report["real"]["best_answers"]["hand_set"] < 0.8  # cosine alone finds half of them, plus luck
    assert report["real"]["best_answers"]["delta"]["low"] > 0
    SentenceScorer(params)


def test_margins_buy_answers_that_hold_the_answer_only_within_the_length_bound() -> None:
    rows = _rows(60, 2)
    scores = [r.matrix[:, FEATURE_NAMES.index("cosine")] for r in rows]  # noisy: the answer is often second

    def outcome(margins: tuple[float, float]) -> tuple[float, float]:
        found = [chosen(r, s, *margins) for r, s in zip(rows, scores)]
        return float(np.mean([holds for _, holds, _ in found])), float(np.mean([n for _, _, n in found]))

    short, long = choose_margins(rows, scores, max_sentences=1.3), choose_margins(rows, scores, max_sentences=3.0)
    assert outcome(short)[1] <= 1.3
    assert outcome(long)[0] > outcome(short)[0]
    assert choose_margins(rows, scores, max_sentences=0.5) == (0.0, -1.0)  # nothing fits: one sentence


def test_rows_survive_their_cache(tmp_path: Path) -> None:
    rows = _rows(3, 3)
    save_rows(rows, tmp_path / "rows.json")
    again = load_rows(tmp_path / "rows.json")
    assert [r.key for r in again] == [r.key for r in rows]
    assert all(np.allclose(a.matrix, b.matrix) and (a.labels == b.labels).all() and a.positions == b.positions
               for a, b in zip(again, rows))
    (tmp_path / "old.json").write_text('{"features": ["cosine"], "rows": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="other features"):
        load_rows(tmp_path / "old.json")
