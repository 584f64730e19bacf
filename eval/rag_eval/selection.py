"""Choosing a default across datasets, with a held-out-dataset check (issue 17, part 4).

A default chosen on one dataset does not carry to another (gMMR λ 0.9, best on HotpotQA, was
significantly worse than plain hybrid elsewhere), and a default chosen on every dataset is scored on
the very queries it was tuned on. This module does the check that answers both:

1. **Candidates**: run specs (``hybrid:0.3``, ``hybrid:rrf+gmmr:0.9:scores``, ``hybrid+depth:50`` …),
   each evaluated on every dataset (``ragctl eval --grid defaults`` writes the summaries), in
   *preference order*: the current default's configuration first, then simpler/cheaper before more
   complex/expensive. The **current default** is a further run (normally ``default``, the served chain).
2. **Criterion**: the mean over the training datasets of each dataset's mean ``metric``
   (default nDCG@10), every dataset weighing the same whatever its number of queries. The best
   candidate wins; candidates within ``tie`` of the best count as tied and the first of them in
   preference order wins (the simpler/cheaper one, or the current default).
3. **Leave one dataset out**: for each dataset, choose on the *other* datasets and report the choice on
   the held-out one against the current default — the per-query paired bootstrap 95 % CI of the
   difference (``rag_eval.stats``) for each reported metric; rotate over every dataset.
4. **Verdict**: the candidate chosen on *all* datasets becomes the new default only if the held-out
   check supports it: no fold's choice is significantly worse than the current default on its
   held-out dataset (criterion metric), and at least one is significantly better. Otherwise the current
   default stays (a change the held-out data cannot tell from noise is not worth making).

Nothing here runs a pipeline: it reads ``<reports>/<dataset>/<run>.json`` summaries, so it is cheap,
deterministic and testable on a synthetic fixture (``tests/eval/test_selection.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_eval.report import pretty
from rag_eval.runner import run_paths
from rag_eval.stats import DEFAULT_RESAMPLES, DEFAULT_SEED, DeltaCI, paired_delta

#: The criterion unless told otherwise.
DEFAULT_METRIC = "ndcg@10"
#: Two candidates whose criterion differs by less than this are tied (→ preference order).
DEFAULT_TIE = 0.001

_FUSIONS = ("hybrid:0.5", "hybrid:0.3", "hybrid:0.4", "hybrid:0.6", "hybrid:0.7", "hybrid:rrf")
_GMMR = ("gmmr:0.9:scores", "gmmr:0.8:scores", "gmmr:0.7:scores", "gmmr:0.5:scores", "gmmr:0.9:cosine",
         "gmmr:0.7:cosine")
_DEEP_GMMR = ("gmmr:0.9:scores", "gmmr:0.7:scores")

#: The grid of issue 17 part 4, in preference order (the current defaults first: min_max 0.5, no gMMR
#: (λ = 1), 20 candidates; then the other fusions; then 10 candidates (cheaper), gMMR, 50 candidates).
#: λ = 1 is "gMMR off": with relevance = scores it is exactly the retriever's order. Every run shares
#: the search of its (fusion, depth) with the others of the same query: the grid measures quality,
#: not latency.
GRIDS: dict[str, tuple[str, ...]] = {
    "defaults": (
        *_FUSIONS,
        *(f"{fusion}+depth:10" for fusion in _FUSIONS),
        *(f"{fusion}+{gmmr}" for fusion in _FUSIONS for gmmr in _GMMR),
        *(f"{fusion}+depth:50" for fusion in _FUSIONS),
        *(f"{fusion}+depth:50+{gmmr}" for fusion in _FUSIONS for gmmr in _DEEP_GMMR),
    ),
    # One setting at a time, the others at their current default (subsets of ``defaults``): which
    # single setting the held-out check supports changing.
    "fusion": _FUSIONS,
    "gmmr": ("hybrid:0.5", *(f"hybrid:0.5+{gmmr}" for gmmr in _GMMR)),
    "depth": ("hybrid:0.5", "hybrid:0.5+depth:10", "hybrid:0.5+depth:50"),
}


def grid_runs(name: str) -> tuple[str, ...]:
    try:
        return GRIDS[name]
    except KeyError:
        raise ValueError(f"unknown grid {name!r}; use one of {', '.join(GRIDS)}") from None


#: ``{dataset: {run: summary}}``: a summary is what ``rag_eval.runner.summarize`` writes (``metrics``
#: with the means, ``per_query`` with each query's values).
Grid = Mapping[str, Mapping[str, Mapping[str, Any]]]


def load_grid(reports: Path, datasets: Sequence[str], runs: Sequence[str]) -> dict[str, dict[str, dict[str, Any]]]:
    """The summaries ``<reports>/<dataset>/<run>.json``; a missing one is an error naming it."""
    grid: dict[str, dict[str, dict[str, Any]]] = {}
    missing: list[str] = []
    for dataset in datasets:
        grid[dataset] = {}
        for run in runs:
            path = run_paths(Path(reports) / dataset, run)["json"]
            if not path.is_file():
                missing.append(str(path))
                continue
            grid[dataset][run] = json.loads(path.read_text())
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise ValueError(f"missing run summaries (run them with ragctl eval first): {shown}")
    return grid


def criterion(grid: Grid, datasets: Sequence[str], run: str, metric: str) -> float:
    """Mean over ``datasets`` of the run's mean ``metric`` on each (datasets weigh the same)."""
    return sum(float(grid[dataset][run]["metrics"][metric]) for dataset in datasets) / len(datasets)


def choose(grid: Grid, datasets: Sequence[str], candidates: Sequence[str], *, metric: str = DEFAULT_METRIC,
           tie: float = DEFAULT_TIE) -> tuple[str, dict[str, float]]:
    """The best candidate on ``datasets`` by :func:`criterion`; within ``tie`` of the best, the first
    in ``candidates`` order. Returns it and every candidate's criterion value."""
    if not candidates or not datasets:
        raise ValueError("choose needs at least one candidate and one dataset")
    scores = {run: criterion(grid, datasets, run, metric) for run in candidates}
    best = max(scores.values())
    chosen = next(run for run in candidates if scores[run] >= best - tie)
    return chosen, scores


def held_out_delta(grid: Grid, dataset: str, run: str, baseline: str, metric: str, *,
                   resamples: int = DEFAULT_RESAMPLES, seed: int = DEFAULT_SEED) -> DeltaCI:
    """``run`` − ``baseline`` on ``dataset``: paired bootstrap over the queries both scored."""
    a = {q: v[metric] for q, v in grid[dataset][run]["per_query"].items()}
    b = {q: v[metric] for q, v in grid[dataset][baseline]["per_query"].items()}
    return paired_delta(a, b, resamples=resamples, seed=seed)


@dataclass
class Fold:
    held_out: str
    trained_on: list[str]
    chosen: str
    #: The chosen candidate's and the current default's criterion on the training datasets.
    train_chosen: float
    train_default: float
    #: On the held-out dataset: {metric: (chosen's mean, default's mean, DeltaCI chosen − default)}.
    held_out_scores: dict[str, tuple[float, float, DeltaCI]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "held_out": self.held_out, "trained_on": self.trained_on, "chosen": self.chosen,
            "train_chosen": round(self.train_chosen, 4), "train_default": round(self.train_default, 4),
            "held_out_scores": {m: {"chosen": round(c, 4), "default": round(d, 4), "delta": ci.to_dict()}
                                for m, (c, d, ci) in self.held_out_scores.items()},
        }


@dataclass
class Selection:
    metric: str
    tie: float
    default: str
    candidates: list[str]
    datasets: list[str]
    folds: list[Fold]
    #: The candidate chosen on all datasets, and every candidate's criterion there.
    chosen_on_all: str
    scores_on_all: dict[str, float]
    #: The candidate to adopt (``chosen_on_all``) or None (keep the current default), and why.
    adopt: str | None
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric, "tie": self.tie, "default": self.default, "candidates": self.candidates,
            "datasets": self.datasets, "folds": [fold.to_dict() for fold in self.folds],
            "chosen_on_all": self.chosen_on_all,
            "scores_on_all": {run: round(value, 4) for run, value in self.scores_on_all.items()},
            "adopt": self.adopt, "reason": self.reason,
        }


def leave_one_dataset_out(
    grid: Grid,
    datasets: Sequence[str],
    candidates: Sequence[str],
    default: str,
    *,
    metric: str = DEFAULT_METRIC,
    report_metrics: Sequence[str] = (),
    tie: float = DEFAULT_TIE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Selection:
    """The procedure of the module docstring. ``grid`` must hold ``default`` and every candidate on
    every dataset; ``report_metrics`` are reported on the held-out dataset besides ``metric``."""
    datasets = list(datasets)
    if len(datasets) < 2:
        raise ValueError("a held-out-dataset check needs at least two datasets")
    for dataset in datasets:
        absent = [run for run in (default, *candidates) if run not in grid.get(dataset, {})]
        if absent:
            raise ValueError(f"{dataset}: no summary for {', '.join(absent)}")
    shown = list(dict.fromkeys([metric, *report_metrics]))
    folds: list[Fold] = []
    for held_out in datasets:
        train = [d for d in datasets if d != held_out]
        chosen, scores = choose(grid, train, candidates, metric=metric, tie=tie)
        fold = Fold(held_out, train, chosen, scores[chosen], criterion(grid, train, default, metric))
        for spec in shown:
            fold.held_out_scores[spec] = (
                float(grid[held_out][chosen]["metrics"][spec]), float(grid[held_out][default]["metrics"][spec]),
                held_out_delta(grid, held_out, chosen, default, spec, resamples=resamples, seed=seed),
            )
        folds.append(fold)
    chosen_all, scores_all = choose(grid, datasets, candidates, metric=metric, tie=tie)
    adopt, reason = verdict(folds, metric, chosen_all)
    return Selection(metric, tie, default, list(candidates), datasets, folds, chosen_all, scores_all, adopt, reason)


def verdict(folds: Sequence[Fold], metric: str, chosen_on_all: str) -> tuple[str | None, str]:
    """Adopt ``chosen_on_all`` only if no fold's choice lost significantly on its held-out dataset and
    at least one won significantly (criterion metric); else keep the current default."""
    losses = [f.held_out for f in folds if f.held_out_scores[metric][2].high < 0.0]
    wins = [f.held_out for f in folds if f.held_out_scores[metric][2].low > 0.0]
    name = pretty(metric)
    if all(f.held_out_scores[metric][2].low == f.held_out_scores[metric][2].high == 0.0 for f in folds):
        return None, (f"keep the current default: every fold chose a candidate that scores exactly as the "
                      f"current default on its held-out dataset ({name})")
    if losses:
        return None, (f"keep the current default: the choice made on the other datasets was significantly worse "
                      f"on {', '.join(losses)} ({name}, held out)")
    if not wins:
        return None, (f"keep the current default: no held-out dataset shows the choice made on the others "
                      f"significantly better ({name}); the differences are noise")
    return chosen_on_all, (f"adopt {chosen_on_all}: held out, the choices were significantly better on "
                           f"{', '.join(wins)} and significantly worse nowhere ({name})")


def _ci(ci: DeltaCI) -> str:
    text = f"{ci.delta:+.3f} [{ci.low:+.3f}, {ci.high:+.3f}]"
    return f"{text} (noise)" if ci.noise else f"**{text}**"


def selection_markdown(selection: Selection, *, top: int = 5) -> str:
    """The rotation table (chosen on the others, reported on the held-out one), the ranking on all
    datasets and the verdict."""
    metric = selection.metric
    shown = list(selection.folds[0].held_out_scores) if selection.folds else [metric]
    header = ["held out", "chosen on the other datasets", f"{pretty(metric)} there (default)"]
    for spec in shown:
        header += [f"{pretty(spec)} held out: chosen / default", f"Δ {pretty(spec)} [95% CI]"]
    lines = [f"Criterion: mean {pretty(metric)} over the training datasets (each weighs the same); ties within "
             f"{selection.tie:g} → the earlier candidate in preference order. Baseline: `{selection.default}`.", "",
             "| " + " | ".join(header) + " |", "|---|---|---:|" + "---:|---|" * len(shown)]
    for fold in selection.folds:
        row = [fold.held_out, f"`{fold.chosen}`", f"{fold.train_chosen:.3f} ({fold.train_default:.3f})"]
        for spec in shown:
            chosen, default, ci = fold.held_out_scores[spec]
            row += [f"{chosen:.3f} / {default:.3f}", _ci(ci)]
        lines.append("| " + " | ".join(row) + " |")
    ranked = sorted(selection.scores_on_all.items(), key=lambda item: -item[1])[:top]
    lines += ["", f"On all {len(selection.datasets)} datasets: chosen `{selection.chosen_on_all}` "
              f"({selection.scores_on_all[selection.chosen_on_all]:.4f}); top {len(ranked)}: "
              + ", ".join(f"`{run}` {value:.4f}" for run, value in ranked) + ".", "",
              f"Verdict: {selection.reason}."]
    return "\n".join(lines) + "\n"
