"""Per-language answer scoring: the containment normaliser, the question sampler, the held-out split,
XQuAD's names and a folder's answers.jsonl."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval.answer_containment import (
    contains_gold,
    document_group,
    held_out_split,
    normalise_answer,
    sample_questions,
    strip_markers,
)
from rag_eval.datasets import DatasetNotFound, load_dataset, load_folder
from rag_eval.datasets.types import Corpus, Dataset, Document, Query
from rag_eval.extractive_answers import compare, share
from ragctl.eval_command import XQUAD, parse_datasets


def test_normalise_answer_folds_case_unicode_form_cedillas_and_punctuation() -> None:
    assert normalise_answer("  Ştefan cel Mare, „domn” al Moldovei!  ") == "ștefan cel mare domn al moldovei"
    assert normalise_answer("ŢARA") == normalise_answer("Țara") == "țara"
    decomposed = "Bra\u0219ov"[:3] + "s\u0326ov"  # s + combining comma below
    assert normalise_answer(decomposed) == "brașov"
    assert normalise_answer("STRASSE") == normalise_answer("Straße")  # casefold, not lower
    assert normalise_answer("U.S.-based") == "u s based"
    assert normalise_answer("In 1900 [1], Tesla [2].") == "in 1900 tesla"  # markers are not answers


def test_contains_gold_matches_whole_words_of_any_gold() -> None:
    assert contains_gold("Tesla a obţinut brevetul în 1900. [1]", ["1900"])
    assert contains_gold("Apărarea a cedat 308 puncte.", ["trei sute", "308"])
    assert contains_gold("Stefan, Ştefan and ȘTEFAN", ["ștefan"])
    assert not contains_gold("It opened in 1990.", ["1"])  # "1" is not inside "1990"
    assert not contains_gold("See passage [1].", ["1"])  # nor is a citation marker's digit
    assert not contains_gold("anything", ["", "  ", "?"])  # an empty gold matches nothing
    assert contains_gold("the Denver Broncos won", ["Denver Broncos"])
    assert not contains_gold("the Denver Broncos won", ["Carolina Panthers"])


def test_strip_markers_removes_only_citation_markers() -> None:
    assert strip_markers("A [1] B [12] [x] C") == "A B [x] C"


def _queries(ids: list[str]) -> list[Query]:
    return [Query(qid, f"question {qid}", answers=("a",), answerable=True) for qid in ids]


def test_sample_questions_is_seeded_by_ids_alone_and_nested() -> None:
    ids = [f"q{i:03d}" for i in range(100)]
    first = sample_questions(_queries(ids), 20, seed=0)
    shuffled = sample_questions(_queries(list(reversed(ids))), 20, seed=0)
    assert [q.id for q in first] == [q.id for q in shuffled]  # the order of the file does not matter
    assert [q.id for q in first] == sorted(q.id for q in first)
    assert len(first) == 20 and len({q.id for q in first}) == 20
    assert {q.id for q in first} <= {q.id for q in sample_questions(_queries(ids), 50, seed=0)}
    assert [q.id for q in sample_questions(_queries(ids), 20, seed=1)] != [q.id for q in first]
    assert len(sample_questions(_queries(ids), None, seed=0)) == 100
    assert len(sample_questions(_queries(ids), 500, seed=0)) == 100
    with pytest.raises(ValueError):
        sample_questions(_queries(ids), 0, seed=0)


def test_document_group_drops_a_trailing_number() -> None:
    assert document_group("xquad-07-03") == "xquad-07"
    assert document_group("a3f9c2") == "a3f9c2"
    assert document_group("doc-x") == "doc-x"


def _grouped_dataset(name: str = "toy") -> Dataset:
    corpus = Corpus(Document(f"art{a}-{p}", f"article {a} paragraph {p}") for a in range(6) for p in range(2))
    queries = [Query(f"q{a}{p}", f"about {a}.{p}", answers=("x",), answerable=True) for a in range(6) for p in range(2)]
    qrels = {f"q{a}{p}": {f"art{a}-{p}": 1} for a in range(6) for p in range(2)}
    return Dataset(name, corpus, queries, qrels)


def test_held_out_split_removes_whole_groups_and_names_their_questions_off_topic() -> None:
    dataset = _grouped_dataset()
    split = held_out_split(dataset, seed=0)
    assert len(split.held_out_groups) == 3
    kept_groups = {document_group(doc) for doc in split.kept.corpus}
    assert len(kept_groups) == 3 and not kept_groups & set(split.held_out_groups)
    assert len(split.kept.corpus) == 6  # both paragraphs of each kept article
    for query in split.off_topic:
        assert all(document_group(doc) in split.held_out_groups for doc in dataset.relevant(query.id))
    assert {q.id for q in split.off_topic} | {q.id for q in split.on_topic} == {q.id for q in dataset.queries}
    assert split.kept.name != dataset.name  # its index is cached apart from the whole corpus's
    split.kept.check()
    # The same groups in another language of a parallel dataset, another set with another seed.
    assert held_out_split(_grouped_dataset("other"), seed=0).held_out_groups == split.held_out_groups
    assert any(held_out_split(dataset, seed=s).held_out_groups != split.held_out_groups for s in range(1, 6))


def test_held_out_split_needs_two_groups() -> None:
    dataset = Dataset("one", Corpus([Document("d-1", "t")]), [Query("q", "?")], {"q": {"d-1": 1}})
    with pytest.raises(ValueError, match="at least two"):
        held_out_split(dataset, seed=0)


def test_a_folder_answers_jsonl_gives_the_reference_answers(tmp_path: Path) -> None:
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text(json.dumps({"_id": "d1", "text": "Paris is in France."}) + "\n")
    (tmp_path / "queries.jsonl").write_text(
        json.dumps({"_id": "q1", "text": "Where is Paris?"}) + "\n" + json.dumps({"_id": "q2", "text": "Who?"}) + "\n"
    )
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    (tmp_path / "answers.jsonl").write_text(json.dumps({"_id": "q1", "corpus_id": "d1", "answers": ["France", "in France"]}) + "\n")
    dataset = load_folder(tmp_path)
    by_id = {q.id: q for q in dataset.queries}
    assert by_id["q1"].answers == ("France", "in France") and by_id["q1"].answerable is True
    assert by_id["q2"].answers == () and by_id["q2"].answerable is None
    (tmp_path / "answers.jsonl").write_text(json.dumps({"_id": "q1", "answers": "France"}) + "\n" + json.dumps({"_id": "q2", "answers": 3}) + "\n")
    with pytest.raises(ValueError, match=r"answers.jsonl:2"):
        load_folder(tmp_path)


def test_xquad_names_resolve_to_the_four_languages(tmp_path: Path) -> None:
    assert parse_datasets(["xquad"]) == list(XQUAD)
    assert parse_datasets(["xquad-ro,vaswani"]) == ["xquad-ro", "vaswani"]
    assert parse_datasets(["all"])[-4:] == list(XQUAD) and len(parse_datasets(["all"])) == 8
    with pytest.raises(ValueError, match="xquad"):
        parse_datasets(["xquad-fr"])  # not a shared language: point -d at its folder instead
    with pytest.raises(DatasetNotFound, match="xquad"):
        load_dataset("xquad-ro", root=tmp_path)


def test_share_and_compare_pair_questions_by_id() -> None:
    assert share([1.0, 0.0, 1.0, 1.0], resamples=200).delta == pytest.approx(0.75)

    def summary(name: str, contains: dict[str, float]) -> dict:
        per_query = {q: {"contains": v, "abstained": 0.0, "gold_in_passages": 1.0} for q, v in contains.items()}
        return {"dataset": name, "per_query": per_query, "off_topic": {"per_query": {"o1": {"abstained": 1.0}}}}

    ro = summary("xquad-ro", {"a": 0.0, "b": 1.0, "c": 0.0, "extra": 1.0})
    en = summary("xquad-en", {"a": 1.0, "b": 1.0, "c": 1.0})
    found = compare(ro, en, resamples=200)
    assert found["contains"]["n"] == 3  # only the shared ids
    assert found["contains"]["delta"] == pytest.approx(-2 / 3)
    assert found["abstained"]["delta"] == 0.0 and found["off_topic_abstained"]["n"] == 1


def test_the_answers_report_pairs_each_dataset_with_the_baseline() -> None:
    from rag_eval.evaluation import EvalOptions
    from ragctl.eval_command import _answers_report

    def summary(name: str, contains: dict[str, float]) -> dict:
        ci = {"value": 0.5, "ci95": [0.0, 1.0], "n": len(contains)}
        return {
            "dataset": name, "evaluated": len(contains), "metrics": {"gold_in_passages": 1.0},
            "ci95": {"contains": ci, "abstained": ci},
            "per_query": {q: {"contains": v, "abstained": 0.0, "gold_in_passages": 1.0} for q, v in contains.items()},
            "off_topic": {"evaluated": 0, "abstained": {"value": 0.0, "ci95": [0.0, 0.0], "n": 0}, "per_query": {}},
        }

    en, ro, other = summary("xquad-en", {"a": 1.0, "b": 1.0}), summary("xquad-ro", {"a": 0.0, "b": 1.0}), summary("mine", {"z": 1.0})
    lines: list[str] = []
    _answers_report([ro, other], en, EvalOptions(resamples=200), lines.append)
    assert lines[0].startswith("| dataset |") and "| xquad-ro | 2 |" in lines[0] and "| mine | 1 |" in lines[0]
    assert len(lines) == 2 and lines[1].startswith("xquad-ro − xquad-en: contains gold -50.0")  # "mine" shares no id
    lines.clear()
    _answers_report([en, ro], None, EvalOptions(resamples=200), lines.append)  # default: against the first
    assert lines[1].startswith("xquad-ro − xquad-en")
