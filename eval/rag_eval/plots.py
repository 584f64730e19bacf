"""PNG plots of a dataset's evaluation (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402

from rag_eval.report import PRETTY  # noqa: E402


def metric_vs_k(
    summaries: Mapping[str, Mapping[str, Any]], names: Sequence[str], path: Path, *, title: str = ""
) -> Path:
    """One panel per metric name, one line per pipeline: the metric at every k of the summaries."""
    fig, axes = plt.subplots(1, len(names), figsize=(5.2 * len(names), 4.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        for run, summary in summaries.items():
            ks = summary["ks"]
            ax.plot(ks, [summary["metrics"][f"{name}@{k}"] for k in ks], marker="o", markersize=3, label=run)
        ax.set_xlabel("k")
        ax.set_ylabel(PRETTY.get(name, name))
        ax.set_xscale("log")
        ax.set_xticks(list(next(iter(summaries.values()))["ks"]))
        ax.get_xaxis().set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(fontsize=7, loc="lower right")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return _save(fig, path)


def lambda_sweep(
    sweep: Mapping[str, Mapping[float, float]],
    baselines: Mapping[str, float],
    metric: str,
    path: Path,
    *,
    best: float | None = None,
    title: str = "",
) -> Path:
    """``sweep``: mode → {λ: metric}; dashed lines: the mode without gMMR; a vertical line at ``best``."""
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for index, (mode, values) in enumerate(sweep.items()):
        color = f"C{index}"
        lambdas = sorted(values)
        ax.plot(lambdas, [values[lam] for lam in lambdas], marker="o", color=color, label=f"{mode}+gmmr")
        if mode in baselines:
            ax.axhline(baselines[mode], color=color, linestyle="--", linewidth=1, label=f"{mode} (no gmmr)")
    if best is not None:
        ax.axvline(best, color="grey", linestyle=":", label=f"best fixed λ = {best:g}")
    ax.set_xlabel("gMMR λ (1 = relevance only)")
    ax.set_ylabel(metric)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


def latency_by_stage(summaries: Mapping[str, Mapping[str, Any]], path: Path, *, title: str = "") -> Path:
    """Stacked horizontal bars: p50 ms of each top-level stage (refine, retrieve, rerank, generate) per
    pipeline, the retriever's query embedding shown as its own part of ``retrieve``."""
    runs = list(summaries)
    parts = ["refine", "retrieve.embed", "retrieve.search", "rerank", "generate"]
    values: dict[str, list[float]] = {part: [] for part in parts}
    for run in runs:
        latency = summaries[run]["latency_ms"]

        def p50(key: str) -> float:
            return float((latency.get(key) or {}).get("p50") or 0.0)

        embed = p50("retrieve.embed")
        values["refine"].append(p50("refine"))
        values["retrieve.embed"].append(embed)
        values["retrieve.search"].append(max(0.0, p50("retrieve") - embed))
        values["rerank"].append(p50("rerank"))
        values["generate"].append(p50("generate"))
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(runs) + 1.5))
    left = [0.0] * len(runs)
    for index, part in enumerate(parts):
        if not any(values[part]):
            continue
        ax.barh(runs, values[part], left=left, color=f"C{index}", label=part)
        left = [a + b for a, b in zip(left, values[part])]
    ax.invert_yaxis()
    ax.set_xlabel("p50 latency per query, ms (medians per stage, stacked)")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=5, frameon=False)
    ax.tick_params(axis="y", labelsize=7)
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return _save(fig, path)


def _save(fig: Any, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
