"""The counterfactual (conflicting sources) set: finding and replacing answer values, false values of
the same kind, the set's construction and split, its BEIR folder, and the scoring of served answers."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from rag_eval.counterfactual import (
    FIT,
    HELD_OUT,
    ConflictRecord,
    build_counterfactual,
    kind_name,
    load_conflicts,
    occurs,
    perturb_value,
    replace_all,
    write_counterfactual,
)
from rag_eval.counterfactual_scoring import (
    comparable,
    conflict_detected,
    conflict_reported,
    conflict_table,
    paired_conflicts,
    score_response,
    states_false,
    states_only_false,
    states_true,
    summarise_conflicts,
)
from rag_eval.datasets import load_folder
from rag_eval.datasets.types import Corpus, Dataset, Document, Query
from rag_eval.extractive_answers import compare, comparison_lines, summarise, table
from ragctl.counterfactual_command import dataset_language, run_counterfactual


def local_kind(text: str, language: str | None) -> str:
    """A minimal stand-in for rag_generator.answer_kinds.value_kind (tests only)."""
    if text.lower() in ("yes", "no", "da", "nu"):
        return "YES_NO"
    if re.search(r"\b[12]\d{3}\b", text):
        return "DATE"
    if re.search(r"\d", text):
        return "NUMBER"
    return "PERSON" if text[:1].isupper() else "DESCRIPTION"


# ------------------------------------------------------------------------------- values


def test_occurs_is_case_blind_whole_word_and_reads_cedillas_as_comma_below() -> None:
    assert occurs("Born in TIMIŞOARA in 1990.", "Timișoara")
    assert occurs("the  Denver\nBroncos won", "Denver Broncos")
    assert not occurs("It opened in 1990.", "199")
    assert not occurs("Carolina Panthers", "Panther")
    assert occurs("It cost $5 (about 4 euro).", "$5")


def test_replace_all_replaces_every_occurrence_and_nothing_else() -> None:
    text = "Tesla moved in 1884. In 1884 Tesla met Edison; 18840 is not a year."
    assert replace_all(text, "1884", "1886") == "Tesla moved in 1886. In 1886 Tesla met Edison; 18840 is not a year."
    assert replace_all("ştefan and Ștefan", "Ștefan", "Mihai") == "Mihai and Mihai"


@pytest.mark.parametrize("seed", range(25))
def test_perturbed_years_stay_years_near_the_original(seed: int) -> None:
    rng = random.Random(seed)
    new = perturb_value("1886", "DATE", rng)
    assert new is not None and new != "1886" and len(new) == 4 and 1 <= abs(int(new) - 1886) <= 10
    decade = perturb_value("the 1960s", "DATE", rng)
    assert decade is not None and re.fullmatch(r"the 19[4-8]0s", decade) and decade != "the 1960s"


@pytest.mark.parametrize("seed", range(25))
def test_perturbed_dates_change_the_year_only_and_keep_the_format(seed: int) -> None:
    rng = random.Random(seed)
    new = perturb_value("February 7, 2016", "DATE", rng)
    assert new is not None and re.fullmatch(r"February 7, 20[0-2]\d", new) and new != "February 7, 2016"
    day = perturb_value("7 februarie", "DATE", rng)
    assert day is not None and re.fullmatch(r"\d{1,2} februarie", day) and day != "7 februarie"


@pytest.mark.parametrize("seed", range(25))
def test_perturbed_numbers_keep_magnitude_and_format(seed: int) -> None:
    rng = random.Random(seed)
    for value, shape in (("308", r"\d{3}"), ("1,500,000", r"\d,\d{3},000"), ("6.5", r"\d\.\d"), ("1.500 lei", r"\d\.\d{3} lei")):
        new = perturb_value(value, "NUMBER", rng)
        assert new is not None and new != value and re.fullmatch(shape, new), (value, new)
        assert int(re.sub(r"\D", "", new)) > 0
    assert perturb_value("three", "NUMBER", rng) is None  # no digits: substituted instead


def test_kind_name_reads_enums_and_strings() -> None:
    from enum import StrEnum

    class Kind(StrEnum):
        PERSON = "person"

    assert kind_name(Kind.PERSON) == kind_name("PERSON") == "PERSON"


# ------------------------------------------------------------------------------- the set


def _dataset() -> Dataset:
    passages = {
        "a-0": "Marie Curie won the Nobel Prize in Physics in 1903. Curie later taught in Paris.",
        "a-1": "The bridge opened in 1937 and is 2,737 metres long. Joseph Strauss designed the bridge.",
        "b-0": "Tesla arrived in New York in 1884. Tesla worked for Thomas Edison for a year.",
        "b-1": "The Panthers defense gave up 308 points. Luke Kuechly led the team with 118 tackles.",
        "c-0": "Ada Lovelace wrote the first program in 1843. Lovelace worked with Charles Babbage.",
        "c-1": "The cathedral was built in 1220. Its architect was Robert de Luzarches.",
        "d-0": "Alan Turing proposed the test in 1950. Turing worked at Bletchley Park.",
        "d-1": "Is the sky blue? It is a question of light scattering, which explains the colour.",
    }
    questions = [
        ("q01", "Who won the Nobel Prize in Physics in 1903?", "Marie Curie", "a-0"),
        ("q02", "When did Curie win the prize?", "1903", "a-0"),
        ("q03", "How long is the bridge?", "2,737 metres", "a-1"),
        ("q04", "Who designed the bridge?", "Joseph Strauss", "a-1"),
        ("q05", "When did Tesla arrive in New York?", "1884", "b-0"),
        ("q06", "Whom did Tesla work for?", "Thomas Edison", "b-0"),
        ("q07", "How many points did the defense give up?", "308", "b-1"),
        ("q08", "Who led the team in tackles?", "Luke Kuechly", "b-1"),
        ("q09", "Who wrote the first program?", "Ada Lovelace", "c-0"),
        ("q10", "Who was the cathedral's architect?", "Robert de Luzarches", "c-1"),
        ("q11", "When was the cathedral built?", "1220", "c-1"),
        ("q12", "Who proposed the test?", "Alan Turing", "d-0"),
        ("q13", "Where did Turing work?", "Bletchley Park", "d-0"),
        ("q14", "Why is the sky blue?", "light scattering", "d-1"),  # DESCRIPTION: skipped
        ("q15", "Is the sky blue?", "yes", "d-1"),  # YES_NO, and not in the passage: skipped
        ("q16", "Who discovered radium?", "Pierre Curie", "a-0"),  # not in the passage: skipped
    ]
    corpus = Corpus(Document(id=i, text=t) for i, t in passages.items())
    queries = [Query(id=q, text=text, answers=(a,), answerable=True) for q, text, a, _ in questions]
    return Dataset("toy", corpus, queries, {q: {doc: 1} for q, _, _, doc in questions})


def test_build_plants_false_values_in_copies_and_adds_as_many_controls() -> None:
    dataset = _dataset()
    cf = build_counterfactual(dataset, language="en", kind_of=local_kind, limit=3, seed=0)
    planted = [r for r in cf.records if r.planted]
    controls = [r for r in cf.records if not r.planted]
    assert len(planted) == 3 and len(controls) == 3
    assert cf.skipped == {"kind DESCRIPTION": 1, "answer not in its passage": 2}
    copied = {r.original_id for r in planted}
    assert len(copied) == 3  # one planted question per passage
    answers = {q.id: q.answers[0] for q in dataset.queries}
    for r in planted:
        original, copy = dataset.corpus[r.original_id].text, cf.dataset.corpus[r.copy_id].text
        assert r.copy_id == f"{r.original_id}-cf"
        assert occurs(original, r.true_value) and not occurs(copy, r.true_value)
        assert occurs(copy, r.false_value) and not occurs(original, r.false_value)
        assert replace_all(copy, r.false_value, r.true_value) == original  # only the answer changed
        if r.method == "substituted":  # another question's answer of the same kind, from another passage
            donors = [q for q, a in answers.items() if a == r.false_value]
            assert donors and all(dataset.relevant(q).keys() != {r.original_id} for q in donors)
            assert local_kind(r.false_value, "en") == r.kind
        assert cf.dataset.qrels[r.question_id] == {r.original_id: 1, r.copy_id: 0}
    for r in controls:  # untouched: no gold passage of a control was copied
        assert not set(dataset.relevant(r.question_id)) & copied and r.copy_id is None
    assert len(cf.dataset.corpus) == len(dataset.corpus) + 3
    assert {q.id for q in cf.dataset.queries} == {r.question_id for r in cf.records}
    cf.dataset.check()


def test_build_splits_by_passage_group_and_is_deterministic() -> None:
    dataset = _dataset()
    first = build_counterfactual(dataset, language="en", kind_of=local_kind, limit=4, seed=3)
    again = build_counterfactual(dataset, language="en", kind_of=local_kind, limit=4, seed=3)
    assert first.records == again.records
    assert {r.split for r in first.records} == {FIT, HELD_OUT}
    groups: dict[str, set[str]] = {}
    for r in first.records:
        groups.setdefault(r.original_id.split("-")[0], set()).add(r.split)
    assert all(len(splits) == 1 for splits in groups.values())  # an article never straddles the halves
    other = [build_counterfactual(dataset, language="en", kind_of=local_kind, limit=4, seed=s).records for s in range(4, 9)]
    assert any(records != first.records for records in other)


def test_build_keeps_controls_available_and_fails_when_nothing_can_be_planted() -> None:
    cf = build_counterfactual(_dataset(), language="en", kind_of=local_kind, limit=None, seed=0)
    planted = sum(r.planted for r in cf.records)
    assert planted == len(cf.records) - planted >= 1
    with pytest.raises(ValueError, match="no question"):
        build_counterfactual(_dataset(), language="en", kind_of=lambda text, language: "UNKNOWN", limit=3, seed=0)


def test_written_folder_loads_with_answers_records_and_qrels(tmp_path: Path) -> None:
    cf = build_counterfactual(_dataset(), language="en", kind_of=local_kind, limit=3, seed=0)
    write_counterfactual(cf, tmp_path / "set", source="toy", seed=0, limit=3)
    loaded = load_folder(tmp_path / "set")
    assert load_conflicts(tmp_path / "set") == cf.records
    assert len(loaded.corpus) == len(cf.dataset.corpus) and loaded.qrels == cf.dataset.qrels
    for query in loaded.queries:
        record = ConflictRecord.from_json(query.metadata["counterfactual"])
        assert query.answers == (record.true_value,) and query.answerable
    manifest = json.loads((tmp_path / "set" / "manifest.json").read_text())
    assert manifest["planted"] == manifest["controls"] == 3 and sum(manifest["planted_by_kind"].values()) == 3


def test_ragctl_counterfactual_writes_a_set_from_a_folder(tmp_path: Path) -> None:
    source = tmp_path / "toy"
    write_counterfactual(build_counterfactual(_dataset(), language="en", kind_of=local_kind, limit=None, seed=0),
                         source, source="toy", seed=0, limit=None)  # any BEIR folder with answers will do
    counts = run_counterfactual(str(source), tmp_path / "out", limit=2, seed=1, language="en", kinds=(local_kind, None))
    assert counts["planted"] == counts["controls"] == 2
    source_ids = set(load_folder(source).corpus)
    copies = [r.copy_id for r in load_conflicts(tmp_path / "out") if r.planted]
    assert copies and not set(copies) & source_ids  # "-cf2" where the source already holds a "-cf"
    with pytest.raises(ValueError, match="--language"):
        run_counterfactual(str(source), tmp_path / "x", limit=2, seed=1, kinds=(local_kind, None))
    assert dataset_language("xquad-ro") == "ro" and dataset_language("hotpotqa") == "en"


# ------------------------------------------------------------------------------- scoring

_PLANTED = ConflictRecord("q1", "DATE", "1884", "1886", "b-0", "b-0-cf", HELD_OUT, "perturbed")
_NAME = ConflictRecord("q2", "PERSON", "Ștefan cel Mare", "Mihai Viteazul", "r-0", "r-0-cf", FIT, "substituted")
_CONTROL = ConflictRecord("q3", "NUMBER", "1,500", None, "c-0", None, HELD_OUT)


def test_comparable_normalises_numbers_case_and_diacritics() -> None:
    assert comparable("1,500") == comparable("1.500") == comparable("1 500") == comparable("1500") == "1500"
    assert comparable("6,5") == comparable("6.5")
    assert comparable("Ştefan  CEL mare [2]") == "stefan cel mare"
    assert comparable("1990 308") == "1990 308"  # not a thousands group


def test_states_true_false_and_only_false() -> None:
    assert states_true("Tesla arrived in 1884. [1]", _PLANTED) and not states_false("Tesla arrived in 1884. [1]", _PLANTED)
    assert states_only_false("He came in 1886 [2].", _PLANTED)
    both = "The sources disagree: 1884 [1]; 1886 [2]."
    assert states_true(both, _PLANTED) and states_false(both, _PLANTED) and not states_only_false(both, _PLANTED)
    assert states_only_false("MIHAI VITEAZUL a domnit.", _NAME) and states_true("stefan cel mare a domnit", _NAME)
    assert not states_true("In 18845 nothing.", _PLANTED)
    assert states_true("It cost 1500 lei.", _CONTROL) and not states_false("It cost 1500 lei.", _CONTROL)


def test_conflict_detected_needs_both_values_in_different_entries() -> None:
    both = {"values": [{"value": "1884", "citations": [1]}, {"value": "in 1886", "citations": [2]}]}
    assert conflict_detected(both, _PLANTED) and conflict_reported(both)
    assert not conflict_detected({"values": [{"value": "1884 or 1886", "citations": [1]}]}, _PLANTED)
    assert not conflict_detected({"values": [{"value": "1884", "citations": [1]}, {"value": "1885", "citations": [2]}]}, _PLANTED)
    assert not conflict_detected(None, _PLANTED) and not conflict_reported(None)
    ranged = ConflictRecord("q4", "NUMBER", "până la 30%", "până la 20%", "u-0", "u-0-cf", FIT, "perturbed")
    assert conflict_detected({"values": [{"value": "30%"}, {"value": "20 %"}]}, ranged)  # sub-spans name their side
    assert not conflict_detected({"values": [{"value": "până la"}, {"value": "20%"}]}, ranged)  # fits both sides
    assert conflict_detected({"values": [{"value": "Theo Kearney"}, {"value": "the Anderson family"}]},
                             ConflictRecord("q5", "PERSON", "M. Theo Kearney", "Anderson", "k-0", "k-0-cf", FIT))
    assert not conflict_detected(both, _CONTROL) and conflict_reported(both)


def _row(record: ConflictRecord, answer: str, conflict: dict | None = None, cited: tuple[str, ...] = (), abstained: bool = False) -> dict:
    given = [record.original_id, *([record.copy_id] if record.copy_id else []), "noise"]
    return score_response(record, answer=answer, abstained=abstained, conflict=conflict, passages=given, cited=cited)


def test_summary_counts_recall_precision_false_alarms_and_only_false() -> None:
    both = {"values": [{"value": "1884", "citations": [1]}, {"value": "1886", "citations": [2]}]}
    rows = [
        _row(_PLANTED, "1884 [1]; 1886 [2]", both, cited=("b-0", "b-0-cf")),  # detected, both cited
        _row(_NAME, "Mihai Viteazul [1]", cited=("r-0-cf",)),  # misled, missed
        _row(_CONTROL, "1,500 [1]", {"values": [{"value": "1500"}, {"value": "1600"}]}),  # false alarm
        _row(_PLANTED, "1886", abstained=True),  # an abstention states nothing
    ]
    assert rows[3]["states_false"] is False and rows[3]["abstained"]
    summary = summarise_conflicts(rows)
    s = summary["all"]
    assert (s["planted"], s["controls"]) == (3, 1)
    assert s["conflict_recall"] == {"value": round(1 / 3, 4), "count": 1, "n": 3}
    assert s["conflict_recall_both_cited"] == {"value": 1.0, "count": 1, "n": 1}
    assert s["conflict_recall_both_given"]["n"] == 3
    assert s["conflict_precision"] == {"value": 0.5, "count": 1, "n": 2}
    assert s["control_false_alarms"]["value"] == 1.0 and s["control_states_true"]["value"] == 1.0
    assert s["states_only_false"]["count"] == 1 and s["abstained"]["count"] == 1
    assert summary[FIT]["planted"] == 1 and summary[HELD_OUT]["planted"] == 2
    assert "33.3 % (1/3)" in conflict_table([("toy", summary)], "all")


def test_answers_summary_carries_the_conflict_aggregates() -> None:
    row = _row(_PLANTED, "1886 [1]", cited=("b-0-cf",))
    records = [{"query_id": "q1", "contains": False, "abstained": False, "gold_in_passages": True, "abstain_reason": "",
                "language": "en", "language_reason": "confident", "ms": 10.0, "counterfactual": row}]
    summary = summarise("toy-cf", records, [], resamples=100, seed=0, facts={})
    assert summary["counterfactual"]["all"]["states_only_false"]["count"] == 1
    assert "conflict recall" in table([summary])
    plain = summarise("toy", [{k: v for k, v in records[0].items() if k != "counterfactual"}], [], resamples=100, seed=0, facts={})
    assert "counterfactual" not in plain and "conflict recall" not in table([plain])


def test_before_and_after_are_paired_on_the_held_out_planted_questions() -> None:
    both = {"values": [{"value": "1884"}, {"value": "1886"}]}
    before = {"q1": _row(_PLANTED, "1886 [1]"), "q2": _row(_NAME, "Mihai Viteazul"), "q3": _row(_CONTROL, "1,500")}
    after = {"q1": _row(_PLANTED, "1884 [1]; 1886 [2]", both), "q2": _row(_NAME, "Ștefan cel Mare"),
             "q3": _row(_CONTROL, "1,500", both)}
    held = paired_conflicts(after, before, split=HELD_OUT, resamples=200)
    assert held["states_only_false"]["n"] == 1 and held["states_only_false"]["delta"] == -1.0  # q1 only (q2 is fit)
    assert held["conflict_detected"]["delta"] == 1.0 and held["control_false_alarms"]["delta"] == 1.0
    everything = paired_conflicts(after, before, resamples=200)
    assert everything["states_only_false"]["n"] == 2 and everything["states_true"]["delta"] == 1.0

    def summary(rows: dict) -> dict:
        records = [{"query_id": q, "contains": r["states_true"], "abstained": False, "gold_in_passages": True,
                    "abstain_reason": "", "language": "en", "language_reason": "confident", "ms": 1.0, "counterfactual": r}
                   for q, r in rows.items()]
        return summarise("toy-cf", records, [], resamples=100, seed=0, facts={})

    found = compare(summary(after), summary(before), resamples=200)
    assert found["counterfactual_held_out"]["conflict_detected"]["delta"] == 1.0
    assert "conflict detected +100.0" in comparison_lines(found)


def local_wanted(question: str, language: str | None) -> str:
    """A minimal stand-in for rag_generator.answer_kinds.wanted_kind (tests only)."""
    first = question.split()[0].lower()
    return {"who": "PERSON", "whom": "PERSON", "where": "PLACE", "when": "DATE"}.get(first, "UNKNOWN")


def test_a_question_that_asks_for_the_kind_gets_a_donor_that_asked_for_it_too() -> None:
    dataset = _dataset()
    who_answers = {q.answers[0] for q in dataset.queries if local_wanted(q.text, "en") == "PERSON"}
    substituted = []
    for seed in range(8):
        cf = build_counterfactual(dataset, language="en", kind_of=local_kind, wanted_of=local_wanted, limit=None, seed=seed)
        assert all(r.wanted == local_wanted(dataset.query(r.question_id).text, "en") for r in cf.records)
        substituted += [r for r in cf.records if r.method == "substituted" and r.wanted == "PERSON"]
    assert substituted and all(r.false_value in who_answers for r in substituted)  # never "Bletchley Park"


def test_answers_run_on_a_counterfactual_folder_scores_every_question(tmp_path: Path) -> None:
    """``ragctl eval -d SET --answers --off-topic 0`` through the real in-process chain."""
    from ragctl.eval_command import run_eval

    cf = build_counterfactual(_dataset(), language="en", kind_of=local_kind, limit=None, seed=0)
    folder = write_counterfactual(cf, tmp_path / "toy-cf", source="toy", seed=0, limit=None)
    lines: list[str] = []
    done = run_eval(datasets=[str(folder)], runs=[], ablation=False, limit=None, reports=tmp_path / "reports", llm=False,
                    corpus_sample=None, ks="1,5", candidates=None, top_k=None, adaptive_limit=1, resamples=200, seed=0,
                    plots=False, progress=False, echo=lines.append, answers=True, off_topic=0)
    assert done == 1
    summary = json.loads((tmp_path / "reports" / "toy-cf" / "answers-extractive.json").read_text(encoding="utf-8"))
    records = {r.question_id: r for r in cf.records}
    assert {q["query_id"] for q in summary["questions"]} == set(records)
    for question in summary["questions"]:
        record, row = records[question["query_id"]], question["counterfactual"]
        answer = "" if question["abstained"] else question["answer"]
        assert row["states_true"] == states_true(answer, record) and row["planted"] == record.planted
        assert row["both_given"] == (record.planted and {record.original_id, record.copy_id} <= set(question["passages"]))
        assert row["conflict_detected"] == conflict_detected(question["conflict"], record)
    assert summary["counterfactual"]["all"]["planted"] == sum(r.planted for r in cf.records)
    assert any("conflict recall" in line for line in lines)
