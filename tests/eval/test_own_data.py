"""Your own data: a folder in BEIR layout (or with TREC qrels) through ``ragctl eval -d PATH``.

The loader is checked on small folders written here (each malformed case names its file and line);
the end-to-end test runs the real evaluation (real MiniLM embedder, real index, real reports) on the
repository's example folder ``eval/examples/tiny-beir`` through the CLI.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rag_eval.datasets import DatasetFormatError, is_dataset_folder, load_dataset, load_folder
from ragctl.cli import app
from ragctl.eval_command import parse_datasets

REPO_ROOT = Path(__file__).resolve().parents[2]
TINY = REPO_ROOT / "eval" / "examples" / "tiny-beir"


def copy_tiny(tmp_path: Path) -> Path:
    folder = tmp_path / "my-set"
    shutil.copytree(TINY, folder)
    return folder


def test_tiny_example_loads() -> None:
    dataset = load_folder(TINY)
    dataset.check()
    assert dataset.name == "tiny-beir"
    assert len(dataset.corpus) == 12 and len(dataset.queries) == 6
    assert dataset.corpus["d1"].title == "Marie Curie"
    assert dataset.qrels["q2"] == {"d5": 1, "d6": 1}
    assert load_dataset(str(TINY)).qrels == dataset.qrels  # a path reaches the folder loader


def test_trec_qrels_and_id_aliases(tmp_path: Path) -> None:
    folder = copy_tiny(tmp_path)
    shutil.rmtree(folder / "qrels")
    (folder / "qrels.txt").write_text("q1 0 d1 2\nq2 0 d5 1\nq2 0 d3 0\n")
    with (folder / "queries.jsonl").open("a") as handle:
        handle.write(json.dumps({"id": 7, "query": "an id given as a number"}) + "\n")
    dataset = load_folder(folder)
    assert dataset.qrels == {"q1": {"d1": 2}, "q2": {"d5": 1, "d3": 0}}
    assert dataset.query("7").text == "an id given as a number"


def test_several_splits_pick_test_or_ask(tmp_path: Path) -> None:
    folder = copy_tiny(tmp_path)
    (folder / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td3\t1\n")
    assert load_folder(folder).qrels["q1"] == {"d1": 1}  # test.tsv wins
    (folder / "qrels" / "test.tsv").unlink()
    (folder / "qrels" / "train.tsv").write_text("q1\td2\t1\n")
    with pytest.raises(DatasetFormatError, match=r"dev\.tsv, train\.tsv and no test\.tsv"):
        load_folder(folder)


@pytest.mark.parametrize("missing", ["corpus.jsonl", "queries.jsonl", "qrels"])
def test_missing_file_is_named(tmp_path: Path, missing: str) -> None:
    folder = copy_tiny(tmp_path)
    target = folder / missing
    shutil.rmtree(target) if target.is_dir() else target.unlink()
    with pytest.raises(DatasetFormatError, match=str(folder / missing).replace(".", r"\.")):
        load_folder(folder)


def test_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(DatasetFormatError, match="does not exist"):
        load_folder(tmp_path / "nowhere")


@pytest.mark.parametrize(
    ("file", "line", "expected"),
    [
        ("corpus.jsonl", '{"_id": "d99", "title": "x", "text": "unterminated\n', r"corpus\.jsonl:13: invalid JSON"),
        ("corpus.jsonl", '{"title": "no id", "text": "t"}\n', r"corpus\.jsonl:13: missing '_id' or 'id'"),
        ("corpus.jsonl", '{"_id": "d99", "title": "no text"}\n', r"corpus\.jsonl:13: missing 'text'"),
        ("corpus.jsonl", '{"_id": "d1", "text": "again"}\n', r"corpus\.jsonl:13: duplicate document id 'd1'"),
        ("corpus.jsonl", '["a", "list"]\n', r"corpus\.jsonl:13: expected a JSON object"),
        ("queries.jsonl", '{"_id": "q9"}\n', r"queries\.jsonl:7: missing 'text' or 'query'"),
        ("queries.jsonl", '{"_id": "q9", "text": 5}\n', r"queries\.jsonl:7: 'text' must be a string"),
        ("qrels/test.tsv", "q1\td1\n", r"test\.tsv:13: expected 3 or 4 fields"),
        ("qrels/test.tsv", "q1\td1\tvery\n", r"test\.tsv:13: grade 'very' is not a number"),
        ("qrels/test.tsv", "q1\td404\t1\n", r"test\.tsv:13: document 'd404' is not in corpus\.jsonl"),
        ("qrels/test.tsv", "q404\td1\t1\n", r"test\.tsv:13: query 'q404' is not in queries\.jsonl"),
    ],
)
def test_malformed_line_is_named(tmp_path: Path, file: str, line: str, expected: str) -> None:
    folder = copy_tiny(tmp_path)
    with (folder / file).open("a") as handle:
        handle.write(line)
    with pytest.raises(DatasetFormatError, match=expected):
        load_folder(folder)


def test_cli_names_tell_folders_from_builtins(tmp_path: Path) -> None:
    assert parse_datasets([str(TINY), "hotpotqa,clapnq"]) == [str(TINY), "hotpotqa", "clapnq"]
    assert is_dataset_folder("./mine") and is_dataset_folder(str(TINY)) and not is_dataset_folder("hotpotqa")
    with pytest.raises(ValueError, match="BEIR"):
        parse_datasets(["hotpotqaa"])


def test_cli_error_names_the_bad_line(tmp_path: Path) -> None:
    folder = copy_tiny(tmp_path)
    with (folder / "queries.jsonl").open("a") as handle:
        handle.write("not json\n")
    result = CliRunner().invoke(app, ["eval", "-d", str(folder), "--run", "dense", "--reports", str(tmp_path / "r"),
                                      "--no-plots", "--no-progress"])
    assert result.exit_code == 2, result.output
    assert f"{folder / 'queries.jsonl'}:7:invalidJSON" in "".join(result.output.split())  # the console wraps lines


def test_eval_end_to_end_on_the_example_folder(tmp_path: Path) -> None:
    """The real evaluation on eval/examples/tiny-beir: index built, three runs, summaries with CIs."""
    reports = tmp_path / "reports"
    args = ["eval", "-d", str(TINY), "--run", "dense", "--run", "bm25", "--run", "hybrid", "--reports", str(reports),
            "--no-plots", "--no-progress", "--resamples", "200"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = reports / "tiny-beir"
    for run in ("dense", "bm25", "hybrid"):
        summary = json.loads((out / f"{run}.json").read_text())
        assert summary["evaluated"] == 6 and summary["dataset"] == "tiny-beir"
        assert 0.0 <= summary["metrics"]["ndcg@10"] <= 1.0
        assert len((out / f"{run}.jsonl").read_text().splitlines()) == 6
    # twelve short, distinct documents: every run finds the single gold passage of q1 and q5 first
    for line in (out / "hybrid.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record["query_id"] in ("q1", "q5"):
            assert record["ranking"][0] == {"q1": "d1", "q5": "d11"}[record["query_id"]]
    assert "runs vs dense" in result.output and "[" in result.output  # the comparison table with CIs
    # Summaries of separate evaluations compare with paired CIs (here two runs of this one).
    compared = CliRunner().invoke(app, ["eval-compare", str(out / "dense.json"), str(out / "hybrid.json"),
                                        "-m", "ndcg@10", "--resamples", "200"])
    assert compared.exit_code == 0, compared.output
    assert "| reports/dense | 6 |" in compared.output and "(baseline)" in compared.output
    assert "| reports/hybrid | 6 |" in compared.output
    bad = CliRunner().invoke(app, ["eval-compare", str(out / "dense.json"), str(out / "hybrid.json"), "-m", "nope@3"])
    assert bad.exit_code == 2 and "unknown metric" in bad.output
