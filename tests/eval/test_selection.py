"""Choosing a default across datasets with a held-out-dataset check (issue 17 part 4,
``rag_eval.selection``) on a tiny synthetic grid whose answer is known, and the run specs the grid
needs (a dense weight, a depth)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_eval.runner import run_paths
from rag_eval.runs import parse_run
from rag_eval.selection import (
    GRIDS,
    choose,
    criterion,
    leave_one_dataset_out,
    load_grid,
    selection_markdown,
    verdict,
)

DATASETS = ["d1", "d2", "d3", "d4"]
N = 40


def _summary(values: list[float]) -> dict:
    per_query = {f"q{i}": {"ndcg@10": v, "recall@5": v} for i, v in enumerate(values)}
    mean = sum(values) / len(values)
    return {"metrics": {"ndcg@10": mean, "recall@5": mean}, "per_query": per_query}


def _grid(effects: dict[str, dict[str, float]]) -> dict[str, dict[str, dict]]:
    """Per query: a base value plus the candidate's effect on that dataset (a small per-query wiggle so
    the bootstrap has variance)."""
    grid: dict[str, dict[str, dict]] = {}
    for d_index, dataset in enumerate(DATASETS):
        base = [0.5 + 0.01 * ((i * 7 + d_index) % 5) for i in range(N)]
        grid[dataset] = {"default": _summary(base)}
        for run, by_dataset in effects.items():
            effect = by_dataset.get(dataset, 0.0)
            grid[dataset][run] = _summary([b + effect + 0.002 * ((i % 3) - 1) for i, b in enumerate(base)])
    return grid


def test_criterion_weighs_datasets_equally_and_ties_go_to_the_first() -> None:
    grid = _grid({"a": {}, "b": {"d1": 0.0004}, "c": {"d1": 0.2}})
    assert criterion(grid, ["d1", "d2"], "c", "ndcg@10") == pytest.approx(
        (grid["d1"]["c"]["metrics"]["ndcg@10"] + grid["d2"]["c"]["metrics"]["ndcg@10"]) / 2
    )
    # b is better than a by less than the tie: the first in preference order (a) wins.
    assert choose(grid, ["d1", "d2"], ["a", "b"], tie=0.001)[0] == "a"
    assert choose(grid, ["d1", "d2"], ["a", "b"], tie=0.0)[0] == "b"
    assert choose(grid, ["d1", "d2"], ["a", "b", "c"])[0] == "c"


def test_rotation_chooses_on_the_others_and_reports_on_the_held_out_one() -> None:
    # "tuned" is much better on d1 only (where it would be tuned) and worse elsewhere; "robust" is a
    # little better everywhere. Held out, d1's fold must not see d1's gain.
    grid = _grid({
        "a": {},
        "tuned": {"d1": 0.30, "d2": -0.05, "d3": -0.05, "d4": -0.05},
        "robust": {"d1": 0.03, "d2": 0.03, "d3": 0.03, "d4": 0.03},
    })
    selection = leave_one_dataset_out(grid, DATASETS, ["a", "tuned", "robust"], "default",
                                      report_metrics=["recall@5"], resamples=500)
    chosen = {fold.held_out: fold.chosen for fold in selection.folds}
    assert chosen == {"d1": "robust", "d2": "tuned", "d3": "tuned", "d4": "tuned"}
    by = {fold.held_out: fold for fold in selection.folds}
    assert by["d1"].trained_on == ["d2", "d3", "d4"]
    c, d, ci = by["d1"].held_out_scores["ndcg@10"]
    assert c - d == pytest.approx(0.03, abs=1e-3) and ci.low > 0  # robust, significantly better on d1
    assert by["d2"].held_out_scores["ndcg@10"][2].high < 0  # tuned, significantly worse held out
    assert set(by["d2"].held_out_scores) == {"ndcg@10", "recall@5"}
    # On all four, tuned has the higher mean (0.30 - 0.15 = +0.0375 vs +0.03)...
    assert selection.chosen_on_all == "tuned"
    # ...but its held-out losses veto it: the current default stays.
    assert selection.adopt is None and "significantly worse" in selection.reason
    text = selection_markdown(selection)
    assert "| d1 | `robust` |" in text and "**-0.050" in text and "Verdict: keep the current default" in text
    json.dumps(selection.to_dict())  # JSON-able


def test_a_consistent_gain_is_adopted_and_noise_is_not() -> None:
    grid = _grid({"a": {}, "robust": {d: 0.03 for d in DATASETS}, "same": {}})
    selection = leave_one_dataset_out(grid, DATASETS, ["a", "robust"], "default", resamples=500)
    assert selection.adopt == "robust" and all(fold.chosen == "robust" for fold in selection.folds)
    noise = leave_one_dataset_out(grid, DATASETS, ["a", "same"], "default", resamples=500)
    assert noise.adopt is None and "noise" in noise.reason
    assert verdict(noise.folds, "ndcg@10", "a")[0] is None
    same = leave_one_dataset_out(grid, DATASETS, ["default"], "default", resamples=200)
    assert same.adopt is None and "exactly as the current default" in same.reason


def test_load_grid_reads_summaries_and_names_the_missing(tmp_path: Path) -> None:
    grid = _grid({"hybrid:0.3+gmmr:0.9:scores": {}})
    for dataset, runs in grid.items():
        for run, summary in runs.items():
            path = run_paths(tmp_path / dataset, run)["json"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary))
    loaded = load_grid(tmp_path, DATASETS, ["default", "hybrid:0.3+gmmr:0.9:scores"])
    assert loaded["d3"]["default"]["metrics"] == grid["d3"]["default"]["metrics"]
    with pytest.raises(ValueError, match="d1/hybrid=rrf.json"):
        load_grid(tmp_path, DATASETS, ["hybrid:rrf"])


def test_select_defaults_command(tmp_path: Path) -> None:
    from ragctl.eval_command import select_defaults

    grid = _grid({"hybrid": {}, "hybrid:0.7": {d: 0.03 for d in DATASETS}})
    names = {"d1": "hotpotqa", "d2": "clapnq", "d3": "mtrag-un", "d4": "vaswani"}
    for dataset, runs in grid.items():
        for run, summary in runs.items():
            path = run_paths(tmp_path / names[dataset], run)["json"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(summary))
    out = tmp_path / "selection.json"
    text = select_defaults(reports=tmp_path, datasets=list(names.values()), grid=None, runs=["hybrid", "hybrid:0.7"],
                           resamples=200, out=out)
    assert "adopt hybrid:0.7" in text
    assert json.loads(out.read_text())["adopt"] == "hybrid:0.7"


def test_dense_weight_and_depth_specs() -> None:
    run = parse_run("hybrid:0.3+depth:50+gmmr:0.9:scores", candidates=20, top_k=20)
    assert (run.fusion, run.dense_weight, run.candidates, run.top_k) == ("min_max", 0.3, 50, 20)
    assert run.name == "hybrid:0.3+depth:50+gmmr:0.9:scores" and parse_run(run.name) == run
    assert parse_run("hybrid:min_max:0.7").name == "hybrid:0.7"
    shallow = parse_run("hybrid:rrf+depth:10", candidates=20, top_k=20)
    assert (shallow.candidates, shallow.top_k, shallow.dense_weight) == (10, 10, None)
    assert parse_run("hybrid", candidates=30).name == "hybrid"  # --candidates alone is not in the name
    for bad in ("hybrid:rrf:0.3", "dense:0.3", "hybrid:1.5", "hybrid+depth:0", "hybrid+gmmr:0.7+depth:10", "hybrid:x"):
        with pytest.raises(ValueError):
            parse_run(bad)
    assert all(parse_run(spec).name == spec for spec in GRIDS["defaults"])
    assert len(set(GRIDS["defaults"])) == len(GRIDS["defaults"])
    for name in ("fusion", "gmmr", "depth"):  # one setting at a time: subsets of the joint grid
        assert set(GRIDS[name]) <= set(GRIDS["defaults"])
