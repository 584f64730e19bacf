"""The whole evaluation (``ragctl eval --ablation``'s code path) on a slice of two real datasets:
real MiniLM embedder, real retriever index, real reranker stages.

To keep it quick, each slice is a fixed random sample of queries over a *corpus subset*: every
judged document of those queries plus a random sample of the others (HotpotQA: 20 questions, their
40 gold paragraphs + 100 others of the 994; Vaswani: 12 queries, their judged abstracts (~250) +
100 others of the 11,429). Scores on a subset are optimistic (fewer distractors) — this test checks
invariants, not quality:

- every metric, mean and per query, lies in [0, 1];
- hybrid is not worse than *both* bm25 and dense by more than the bootstrap CI (the CI of hybrid −
  bm25 and of hybrid − dense do not both lie entirely below 0) on each headline metric;
- gMMR with λ = 1 (relevance only) on dense candidates reproduces dense's ranking quality (it
  re-sorts them by the same cosine: a check that vectors and passages stay aligned); with
  ``relevance = scores`` and λ = 1 it keeps the retriever's own order, so ``hybrid+gmmr:1:scores``
  scores exactly as ``hybrid`` (a check that the relevance option reaches the reranker);
- the ablation writes its files (JSON, Markdown, per-run JSONL, the λ sweep, PNG plots), and a
  rerun resumes: no query is asked again.

Skipped, with the reason, when the datasets folder (``$RAG_DATASETS_DIR``, default
``../shared/datasets``) lacks the dataset.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from rag_eval.datasets import datasets_dir
from rag_eval.evaluation import EvalOptions, Evaluator
from rag_eval.report import deltas, headline

SLICES = {"hotpotqa": {"limit": 20, "corpus_sample": 100}, "vaswani": {"limit": 12, "corpus_sample": 100}}


@pytest.fixture(scope="module")
def embedder() -> Any:
    from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


def options(tmp_path: Path, name: str, plots: bool = True) -> EvalOptions:
    return EvalOptions(
        reports=tmp_path / "reports",
        resamples=1000,
        plots=plots,
        lambdas=(0.5, 0.7, 1.0),
        progress=False,
        **SLICES[name],
    )


@pytest.mark.parametrize("name", list(SLICES))
async def test_ablation_slice(name: str, tmp_path: Path, embedder: Any) -> None:
    folder = datasets_dir() / name
    if not folder.is_dir():
        pytest.skip(f"dataset {name!r} not found at {folder}; set RAG_DATASETS_DIR to the shared datasets folder")
    evaluator = Evaluator(options(tmp_path, name), embedder=embedder, echo=lambda _: None)
    result = await evaluator.evaluate(name, ablation=True)
    summaries = result.summaries
    assert {"bm25", "dense", "hybrid", "hybrid+diffusion"} <= set(summaries)

    for run, summary in summaries.items():
        assert summary["evaluated"] == SLICES[name]["limit"], run
        for spec, value in summary["metrics"].items():
            assert 0.0 <= value <= 1.0, (run, spec, value)
        for per_query in summary["per_query"].values():
            assert all(0.0 <= v <= 1.0 for v in per_query.values()), run

    metrics = headline(name, list(summaries["dense"]["metrics"]))
    found = deltas({run: summaries[run] for run in ("hybrid", "bm25", "dense")}, "hybrid", metrics)
    for spec in metrics:
        # found[x][spec] is x − hybrid: hybrid is significantly worse than x when its CI lies above 0.
        worse_than_bm25 = found["bm25"][spec].low > 0
        worse_than_dense = found["dense"][spec].low > 0
        assert not (worse_than_bm25 and worse_than_dense), (spec, found["bm25"][spec], found["dense"][spec])

    sweep = json.loads((tmp_path / "reports" / name / "sweep" / "dense+gmmr=1.json").read_text())
    for spec in metrics:
        assert sweep["metrics"][spec] == pytest.approx(summaries["dense"]["metrics"][spec], abs=0.02), spec
    scores = json.loads((tmp_path / "reports" / name / "sweep" / "hybrid+gmmr=1=scores.json").read_text())
    assert scores["gmmr_relevance"] == {"scores": SLICES[name]["limit"]}
    assert scores["per_query"] == summaries["hybrid"]["per_query"]

    report_dir = tmp_path / "reports" / name
    for file in ("ablation.json", "ablation.md", "dense.jsonl", "dense.json", "dense.md", "hybrid+diffusion.jsonl",
                 "metric_vs_k.png", "latency_by_stage.png", "lambda_sweep.png", "lambda_sweep_scores.png"):
        assert (report_dir / file).stat().st_size > 0, file
    ablation = json.loads((report_dir / "ablation.json").read_text())
    assert ablation["best_lambda"] in (0.5, 0.7, 1.0) and ablation["best_lambda_scores"] in (0.5, 0.7, 1.0)
    assert ablation["deltas_vs_retriever"]["hybrid+diffusion"]["vs"] == "hybrid"
    assert set(ablation["deltas_vs_baseline"]) >= {"bm25", "hybrid"}
    assert "| dense |" in (report_dir / "ablation.md").read_text()

    # Resume: everything is logged, so a rerun asks nothing and appends nothing.
    lines = (report_dir / "hybrid.jsonl").read_text().count("\n")
    again = await Evaluator(options(tmp_path, name, plots=False), embedder=embedder, echo=lambda _: None).evaluate(name, ablation=True)
    assert (report_dir / "hybrid.jsonl").read_text().count("\n") == lines
    assert again.summaries["hybrid"]["metrics"] == summaries["hybrid"]["metrics"]
