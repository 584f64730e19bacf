"""Run specs, the resumable runner, summaries, comparison tables and plots — with fake pipelines
(no model is loaded here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rag_eval.datasets.types import Corpus, Dataset, Document, Query, Turn
from rag_eval.evaluation import EvalOptions, ablation_configs, best_lambda
from rag_eval.metrics import evaluate
from rag_eval.report import comparison_table
from rag_eval.runner import RunLog, execute, select_queries, subset_corpus, summarize, write_summary
from rag_eval.runs import RunConfig, StageConfig, file_stem, parse_run

# ------------------------------------------------------------------------------------ specs


def test_parse_run_specs() -> None:
    config = parse_run("hybrid+diffusion+gmmr:0.7")
    assert (config.mode, config.fusion) == ("hybrid", "min_max")
    assert config.stages == (StageConfig("diffusion"), StageConfig("gmmr", 0.7))
    assert config.name == "hybrid+diffusion+gmmr:0.7"
    assert config.needs_embeddings and config.reranks and not config.llm
    assert parse_run("HYBRID:rrf + ce").name == "hybrid:rrf+cross_encoder"
    assert not parse_run("bm25+cross_encoder").needs_embeddings
    adaptive = parse_run("dense+gmmr:adaptive+refiner+llm")
    assert adaptive.adaptive and adaptive.refiner and adaptive.name == "dense+gmmr:adaptive+refiner+llm"
    # Each of these needs the LLM endpoint; only ``llm`` generates.
    assert [parse_run(s).uses_llm for s in ("dense+gmmr:adaptive", "dense+refiner", "dense+llm", "dense+gmmr:1")] == [
        True, True, True, False]
    assert not parse_run("dense+gmmr:adaptive").llm
    assert parse_run("dense+diffusion:0.5").stages[0].param == 0.5
    assert parse_run(parse_run("bm25+gmmr:1").name) == parse_run("bm25+gmmr:1.0")  # the name parses back


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("", "empty"),
        ("gmmr", "must start with a mode"),
        ("dense:rrf", "only hybrid"),
        ("dense+gmmr:1.5", "λ must be in"),
        ("dense+diffusion:1", "α must be in"),
        ("dense+bogus", "unknown token"),
        ("dense+ce:3", "takes no parameter"),
        ("hybrid:weird", "unknown fusion"),
        ("dense+gmmr:0.7:score", "bad gmmr parameters"),
        ("dense+gmmr:0.7:scores:x", "bad gmmr parameters"),
        ("dense+gmmr:scores:0.7", "bad gmmr parameters"),
        ("dense+gmmr:0.7:scores:cosine", "bad gmmr parameters"),
        ("dense+gmmr::scores", "bad gmmr parameters"),
        ("dense+gmmr:fast:scores", "bad parameter 'fast' for gmmr"),
        ("dense+gmmr:1.5:scores", "λ must be in"),
        ("dense+diffusion:0.5:scores", "bad parameter"),
        ("dense+ce:scores", "takes no parameter"),
    ],
)
def test_parse_run_errors(spec: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_run(spec)


@pytest.mark.parametrize(
    ("spec", "param", "relevance", "name"),
    [
        ("hybrid+gmmr:0.7", 0.7, None, "hybrid+gmmr:0.7"),
        ("hybrid+gmmr:0.7:scores", 0.7, "scores", "hybrid+gmmr:0.7:scores"),
        ("hybrid+gmmr:0.70:SCORES", 0.7, "scores", "hybrid+gmmr:0.7:scores"),
        ("hybrid+gmmr:1:cosine", 1.0, "cosine", "hybrid+gmmr:1:cosine"),
        ("hybrid+gmmr:adaptive:scores", "adaptive", "scores", "hybrid+gmmr:adaptive:scores"),
        ("hybrid+gmmr:scores", None, "scores", "hybrid+gmmr:scores"),
        ("hybrid+gmmr", None, None, "hybrid+gmmr"),
    ],
)
def test_parse_gmmr_relevance(spec: str, param: Any, relevance: str | None, name: str) -> None:
    config = parse_run(spec)
    (stage,) = config.stages
    assert (stage.name, stage.param, stage.relevance) == ("gmmr", param, relevance)
    assert config.name == name
    assert parse_run(config.name) == config  # the name parses back to the same run
    assert config.adaptive == (param == "adaptive")
    # The reranker's wire spec carries both, and the schema accepts it.
    wire = stage.wire()
    # A bare gmmr is sent as the published cosine form, never left to the service default.
    assert (wire.name, wire.mmr_lambda, wire.relevance) == ("gmmr", param, relevance or "cosine")
    from rag_common.schemas import RerankRequest

    dumped = RerankRequest.model_validate(
        {"query": "q", "passages": [], "stages": [wire.model_dump()]}).stages[0]
    assert dumped.relevance == (relevance or "cosine")


def test_scores_and_cosine_runs_are_distinct() -> None:
    plain, scores, cosine = (parse_run(f"bm25+gmmr:0.7{s}") for s in ("", ":scores", ":cosine"))
    assert len({plain, scores, cosine}) == 3 and len({plain.name, scores.name, cosine.name}) == 3
    assert file_stem(scores.name) == "bm25+gmmr=0.7=scores"


def test_stage_relevance_only_for_gmmr() -> None:
    with pytest.raises(ValueError, match="only gmmr"):
        StageConfig("diffusion", 0.5, "scores")
    with pytest.raises(ValueError, match="unknown gmmr relevance"):
        StageConfig("gmmr", 0.5, "bm25")


def test_ablation_sweeps_both_relevances() -> None:
    main, sweep, ce = ablation_configs(EvalOptions(lambdas=(0.5, 1.0)), cross_encoder=False)
    assert [c.name for c in main] == ["bm25", "dense", "hybrid", "bm25+diffusion", "dense+diffusion", "hybrid+diffusion"]
    assert [c.name for c in sweep] == [
        "bm25+gmmr:0.5", "bm25+gmmr:1", "dense+gmmr:0.5", "dense+gmmr:1", "hybrid+gmmr:0.5", "hybrid+gmmr:1",
        "bm25+gmmr:0.5:scores", "bm25+gmmr:1:scores", "dense+gmmr:0.5:scores", "dense+gmmr:1:scores",
        "hybrid+gmmr:0.5:scores", "hybrid+gmmr:1:scores",
    ]
    assert [c.stages[0].wire().relevance for c in sweep] == ["cosine"] * 6 + ["scores"] * 6
    assert ce == []


def test_top_k_within_candidates() -> None:
    with pytest.raises(ValueError, match="top_k"):
        parse_run("dense", candidates=10, top_k=20)


def test_file_stem_has_no_colon() -> None:
    assert file_stem("hybrid:rrf+gmmr:0.7") == "hybrid=rrf+gmmr=0.7"


def test_best_lambda_mean_over_modes_ties_to_larger() -> None:
    assert best_lambda({"a": {0.5: 0.8, 0.7: 0.6}, "b": {0.5: 0.4, 0.7: 0.7}}) == 0.7  # means 0.6 / 0.65
    assert best_lambda({"a": {0.5: 0.5, 0.9: 0.5}}) == 0.9


# ------------------------------------------------------------------------------------ data


def tiny_dataset() -> Dataset:
    corpus = Corpus(Document(id=f"d{i}", text=f"text {i}") for i in range(20))
    queries = [
        Query(id="q1", text="one", answers=("Paris",), answerable=True),
        Query(id="q2", text="two", answers=("blue sky",), answerable=True, history=(Turn("user", "hi"), Turn("agent", "yo"))),
        Query(id="q3", text="three", answerable=False),
        Query(id="q4", text="four", answers=("42",), answerable=True),
    ]
    qrels = {"q1": {"d1": 1, "d2": 1, "d3": 0}, "q2": {"d4": 1}, "q4": {"d5": 1}}
    return Dataset("tiny", corpus, queries, qrels)


def test_select_queries_sample_is_a_fixed_permutation_prefix() -> None:
    dataset = Dataset(
        "many", Corpus([Document("d", "x")]), [Query(id=f"q{i}", text="t") for i in range(50)],
        {f"q{i}": {"d": 1} for i in range(50) if i % 5},
    )
    with_gold = select_queries(dataset)
    assert len(with_gold) == 40 and all(int(q.id[1:]) % 5 for q in with_gold)
    assert len(select_queries(dataset, require_gold=False)) == 50
    small, large = select_queries(dataset, 10, seed=3), select_queries(dataset, 25, seed=3)
    assert len(small) == 10 and {q.id for q in small} <= {q.id for q in large}
    assert [q.id for q in small] == sorted((q.id for q in small), key=lambda x: int(x[1:]))  # dataset order
    assert select_queries(dataset, 10, seed=3) == small and select_queries(dataset, 10, seed=4) != small


def test_subset_corpus_keeps_judged_documents() -> None:
    dataset = tiny_dataset()
    subset = subset_corpus(dataset, [dataset.queries[0]], sample=4, seed=1)
    assert {"d1", "d2", "d3"} <= set(subset.corpus)  # judged, relevant or not
    assert len(subset.corpus) == 3 + 4
    assert subset.qrels == {"q1": dataset.qrels["q1"]}
    subset.check()


# ------------------------------------------------------------------------------------ runner


class FakePipeline:
    """Rankings from a table; records what it was asked."""

    def __init__(self, rankings: dict[str, dict[str, list[str]]]) -> None:
        self.rankings = rankings
        self.calls: list[tuple[str, str]] = []
        self.cleared = 0

    async def run(self, config: RunConfig, query: Query) -> dict[str, Any]:
        self.calls.append((config.name, query.id))
        record: dict[str, Any] = {
            "query_id": query.id,
            "ranking": self.rankings[config.name].get(query.id, []),
            "latency_ms": {"retrieve": 10.0 + len(self.calls), "retrieve.embed": 5.0, "total": 10.0 + len(self.calls)},
        }
        if config.llm:
            record.update(answer="paris" if query.id == "q1" else "no idea", abstained=query.id == "q3",
                          abstain_reason="", cited_doc_ids=["d1", "d9"] if query.id == "q1" else [])
        return record

    def clear_cache(self) -> None:
        self.cleared += 1


RANKINGS = {
    "dense": {"q1": ["d1", "d9", "d2"], "q2": ["d8", "d4"], "q4": ["d7"]},
    "bm25": {"q1": ["d9", "d1"], "q2": ["d4"], "q4": ["d5"]},
}


async def test_execute_is_query_major_and_resumable(tmp_path: Path) -> None:
    dataset = tiny_dataset()
    configs = [parse_run("dense"), parse_run("bm25")]
    queries = select_queries(dataset)  # q1, q2, q4 (q3 has no gold)
    pipeline = FakePipeline(RANKINGS)
    logs = await execute(pipeline, configs, queries[:2], tmp_path, context="ctx", progress=False)
    assert pipeline.calls == [("dense", "q1"), ("bm25", "q1"), ("dense", "q2"), ("bm25", "q2")]
    assert pipeline.cleared == 2
    assert set(logs["dense"].records) == {"q1", "q2"}
    # Resume with more queries: only q4 is new.
    pipeline.calls.clear()
    logs = await execute(pipeline, configs, queries, tmp_path, context="ctx", progress=False)
    assert pipeline.calls == [("dense", "q4"), ("bm25", "q4")]
    lines = (tmp_path / "dense.jsonl").read_text().splitlines()
    assert [json.loads(line)["query_id"] for line in lines] == ["q1", "q2", "q4"]
    # Another context (e.g. another corpus sample) does not count as done.
    pipeline.calls.clear()
    await execute(pipeline, configs[:1], queries[:1], tmp_path, context="other", progress=False)
    assert pipeline.calls == [("dense", "q1")]


def test_run_log_skips_a_line_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps({"query_id": "q1", "context": "c"}) + "\n" + '{"query_id": "q2", "con')
    log = RunLog(path, "c")
    assert set(log.records) == {"q1"}


async def test_summarize_and_write(tmp_path: Path) -> None:
    dataset = tiny_dataset()
    config = parse_run("dense")
    logs = await execute(FakePipeline(RANKINGS), [config], select_queries(dataset), tmp_path, context="c", progress=False)
    summary = summarize(config, dataset, logs["dense"].records, ks=(1, 3), metric_names=("recall", "mrr"))
    expected = evaluate(RANKINGS["dense"], {q: dataset.qrels[q] for q in ("q1", "q2", "q4")}, ["recall@3", "mrr@1"])
    assert summary["metrics"]["recall@3"] == pytest.approx(expected.means["recall@3"], abs=1e-4)
    assert summary["metrics"]["mrr@1"] == pytest.approx(expected.means["mrr@1"], abs=1e-4)
    # Hand-computed: recall@3 = (2/2 + 1/1 + 0) / 3 = 2/3; mrr@1 = (1 + 0 + 0) / 3
    assert summary["metrics"]["recall@3"] == pytest.approx(2 / 3, abs=1e-4)
    assert summary["metrics"]["mrr@1"] == pytest.approx(1 / 3, abs=1e-4)
    assert summary["evaluated"] == 3 and summary["queries"] == 3
    assert summary["latency_ms"]["retrieve"] == {"p50": 12.0, "p95": pytest.approx(12.9)}  # 11, 12, 13
    paths = write_summary(summary, tmp_path)
    assert json.loads(paths["json"].read_text())["run"] == "dense"
    # recall@1 = (1/2 + 0 + 0) / 3
    assert "| recall | 0.167 | 0.667 |" in paths["md"].read_text()


async def test_answer_metrics_in_llm_runs(tmp_path: Path) -> None:
    dataset = tiny_dataset()
    config = parse_run("dense+llm")
    rankings = {"dense+llm": RANKINGS["dense"]}
    queries = select_queries(dataset, require_gold=False)
    logs = await execute(FakePipeline(rankings), [config], queries, tmp_path, context="c", progress=False)
    answers = summarize(config, dataset, logs[config.name].records)["answers"]
    # Answered: q1 ("paris" = "Paris"), q2, q4 ("no idea"); q3 abstained (and is unanswerable).
    assert answers["exact_match"] == pytest.approx(1 / 3, abs=1e-4)
    assert answers["scored_answers"] == 3
    # Citations: q1 cites d1 (gold) and d9: P = 1/2, R = 1/2 (gold d1, d2); q2, q4 cite nothing: R = 0.
    assert answers["citation_precision"] == pytest.approx(0.5, abs=1e-4)
    assert answers["citation_recall"] == pytest.approx((0.5 + 0 + 0) / 3, abs=1e-4)
    assert answers["abstention"]["precision"] == 1.0 and answers["abstention"]["recall"] == 1.0


# ------------------------------------------------------------------------------------ tables, plots


def fake_summary(per_query: dict[str, float], evaluated: int | None = None) -> dict[str, Any]:
    return {
        "metrics": {"ndcg@10": float(np.mean(list(per_query.values())))},
        "per_query": {q: {"ndcg@10": v} for q, v in per_query.items()},
        "evaluated": evaluated or len(per_query),
        "latency_ms": {"total": {"p50": 12.0, "p95": 30.0}},
        "ks": [10],
    }


def test_comparison_table_flags_noise() -> None:
    ids = [f"q{i}" for i in range(40)]
    base = fake_summary({q: 0.5 for q in ids})
    better = fake_summary({q: 0.6 for q in ids})  # +0.1 on every query: CI [0.1, 0.1]
    mixed = fake_summary({q: 0.5 + (0.1 if i % 2 else -0.1) for i, q in enumerate(ids)})  # mean 0, CI around 0
    table, deltas = comparison_table({"dense": base, "better": better, "mixed": mixed}, "dense", ["ndcg@10"])
    rows = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert "(baseline)" in rows["dense"]
    assert "**+0.100 [+0.100, +0.100]**" in rows["better"]
    assert "(noise)" in rows["mixed"] and "(noise)" not in rows["better"]
    assert deltas["better"]["ndcg@10"]["noise"] is False and deltas["mixed"]["ndcg@10"]["noise"] is True
    assert "12.0 / 30.0" in rows["better"]


def test_plots_write_pngs(tmp_path: Path) -> None:
    from rag_eval import plots

    summaries = {
        name: {
            "ks": [1, 5, 10],
            "metrics": {f"{m}@{k}": v * k / 10 for m in ("ndcg", "recall") for k in (1, 5, 10)},
            "latency_ms": {"retrieve": {"p50": 10.0}, "retrieve.embed": {"p50": 6.0}, "rerank": {"p50": 2.0}},
        }
        for name, v in (("dense", 0.5), ("hybrid", 0.7))
    }
    files = [
        plots.metric_vs_k(summaries, ["ndcg", "recall"], tmp_path / "k.png"),
        plots.lambda_sweep({"dense": {0.5: 0.4, 1.0: 0.5}}, {"dense": 0.5}, "nDCG@10", tmp_path / "l.png", best=1.0),
        plots.latency_by_stage(summaries, tmp_path / "lat.png"),
    ]
    for path in files:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_vs_retriever_table_pairs_each_chain_with_its_own_retriever() -> None:
    from rag_eval.report import vs_retriever_table

    def summary(spec: str, values: list[float]) -> dict[str, Any]:
        return {"config": parse_run(spec).to_dict(), "evaluated": len(values),
                "per_query": {f"q{i}": {"ndcg@10": v} for i, v in enumerate(values)}}

    summaries = {
        "bm25": summary("bm25", [0.2, 0.4, 0.6, 0.8]),
        "hybrid": summary("hybrid", [0.5, 0.5, 0.5, 0.5]),
        "bm25+gmmr:0.9:scores": summary("bm25+gmmr:0.9:scores", [0.3, 0.5, 0.7, 0.9]),  # bm25 + 0.1 everywhere
        "hybrid+diffusion": summary("hybrid+diffusion", [0.5, 0.5, 0.5, 0.5]),  # = hybrid
        "hybrid:rrf+gmmr:1": summary("hybrid:rrf+gmmr:1", [0.9, 0.9, 0.9, 0.9]),  # its retriever did not run
    }
    table, found = vs_retriever_table(summaries, ["ndcg@10"], resamples=200)
    assert set(found) == {"bm25+gmmr:0.9:scores", "hybrid+diffusion"}
    assert found["bm25+gmmr:0.9:scores"]["vs"] == "bm25"
    assert found["bm25+gmmr:0.9:scores"]["ndcg@10"]["delta"] == pytest.approx(0.1)
    assert found["hybrid+diffusion"]["vs"] == "hybrid" and found["hybrid+diffusion"]["ndcg@10"]["delta"] == 0.0
    assert "| bm25+gmmr:0.9:scores | bm25 | **+0.100 [+0.100, +0.100]** |" in table
    assert "| hybrid+diffusion | hybrid | +0.000 [+0.000, +0.000] (noise) |" in table
