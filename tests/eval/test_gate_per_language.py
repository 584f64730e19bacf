"""The answerability gate on an all-answerable dataset (XQuAD in one language): off-topic rows from
held-out documents through the served chain, fit halves per document group, the served gate's report."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from rag_eval.answer_containment import held_out_split
from rag_eval.calibration import GateRow, gate_report, group_halves, has_both_labels, off_topic_gate_rows
from rag_eval.datasets.types import Corpus, Dataset, Document, Query
from rag_generator.answerability import FEATURE_NAMES, AnswerabilityGate
from rag_retriever.runtime import build_embedder
from rag_retriever.settings import RetrieverSettings

FACTS = {
    "library": ("The Quillfeather Library opened in 1923.", "When did the Quillfeather Library open?"),
    "rocket": ("The Fjord-2 rocket was built by Nordlys Aerospace.", "Who built the Fjord-2 rocket?"),
    "basil": ("Basil needs six hours of sun a day.", "How many hours of sun does basil need?"),
    "tides": ("Tides are caused by the pull of the Moon on the oceans.", "What causes the tides?"),
}


def _dataset() -> Dataset:
    corpus = Corpus(Document(f"{name}-0", text) for name, (text, _) in FACTS.items())
    queries = [Query(f"q-{name}", question, answers=("x",), answerable=True) for name, (_, question) in FACTS.items()]
    return Dataset("facts", corpus, queries, {f"q-{name}": {f"{name}-0": 1} for name in FACTS})


def test_group_halves_follow_the_group_name_and_seed_only() -> None:
    rows = {"xquad-en/q1": "xquad-07", "xquad-ro/q1": "xquad-07", "xquad-en/q2": "xquad-07", "xquad-en/q3": "xquad-09"}
    halves = group_halves(rows, seed=0)
    assert halves["xquad-en/q1"] == halves["xquad-ro/q1"] == halves["xquad-en/q2"]  # translations, one article
    many = group_halves({f"r{i}": f"g{i}" for i in range(200)}, seed=0)
    assert 60 < sum(h == "A" for h in many.values()) < 140
    assert group_halves({f"r{i}": f"g{i}" for i in range(200)}, seed=1) != many


def test_gate_report_scores_a_given_gate_per_dataset() -> None:
    gate = AnswerabilityGate.from_json()
    strong = np.full(len(FEATURE_NAMES), 0.0)
    rows = [GateRow("a/1", True, None), GateRow("a/2", False, None), GateRow("b/1", False, None), GateRow("b/2", True, strong)]
    report = gate_report(rows, gate)
    # No eligible sentence: probability 0, abstained; so every "a" row abstains.
    assert report["per_dataset"]["a"]["abstain_rate_answerable"] == 1.0
    assert report["per_dataset"]["a"]["abstain_rate_unanswerable"] == 1.0
    assert report["per_dataset"]["a"]["held_out"]["n"] == 2
    assert report["all"]["held_out"]["n"] == 4 and report["threshold"] == round(gate.threshold, 4)


async def test_off_topic_rows_come_from_an_index_without_the_held_out_documents(tmp_path: Path) -> None:
    dataset = _dataset()
    assert not has_both_labels(dataset)
    embedder = build_embedder(RetrieverSettings())
    embedder.warm_up()
    rows, halves = await off_topic_gate_rows(dataset, tmp_path / "cache", embedder, seed=0)
    split = held_out_split(dataset, seed=0)
    held = {f"facts/{q.id}" for q in split.off_topic}
    kept = {f"facts/{q.id}" for q in split.on_topic}
    assert {r.query_id for r in rows if not r.answerable} == held  # every off-topic question is a row
    assert {r.query_id for r in rows if r.answerable} <= kept  # the answerable ones whose gold was retrieved
    assert set(halves) == {r.query_id for r in rows}
    assert all(r.features is None or r.features.shape == (len(FEATURE_NAMES),) for r in rows)
    best_cosine = FEATURE_NAMES.index("best_sentence_cosine")
    on = [r.features[best_cosine] for r in rows if r.answerable and r.features is not None]
    off = [r.features[best_cosine] for r in rows if not r.answerable and r.features is not None]
    assert on and off and min(on) > max(off)  # asked in the documents' words vs about something absent
