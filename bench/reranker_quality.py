"""Ranking quality of the reranker's post-scoring stages (diffusion, gMMR) on HotpotQA.

Ingests the hotpotqa corpus (994 paragraphs, 100 two-hop questions with 2 gold paragraphs each)
into a fresh embedded index through the retriever's own ``Ingestor`` and real all-MiniLM-L6-v2
embedder (the retriever's runtime, ``rag_eval.harness.open_index``), then per retrieval mode
(dense, hybrid min_max):

1. takes the top ``--candidates`` (50) chunks per question from ``SearchService`` with
   ``include_embeddings`` (the stored vectors and the query vector travel to the reranker, as in
   the running system; if the retriever cannot send them, the same MiniLM embedder makes them);
2. runs each pipeline through the real ``RerankService`` (``await service.rerank(RerankRequest)``)
   with ``top_k`` = 10, the list the generator would see:

   - ``retriever``: no reranking, the retriever's top 10;
   - ``diffusion α``: graph diffusion, α ∈ ``--alphas`` (default 0.5, 0.7, 0.85);
   - ``gmmr λ``: gMMR at a fixed λ ∈ 0.1 … 1.0 (the whole sweep is reported);
   - ``diffusion→gmmr λ``: diffusion (α = 0.85) then gMMR, same λ sweep;
   - ``gmmr adaptive``: the DF-RAG adaptive λ with the real ``LLMLambdaEvaluator`` against a local
     llama.cpp server (SmolLM2-135M, started here with ``ragctl.stack.start_llm_server``). It is
     slow (one planner call + one evaluator call per distinct λ selection), so it runs on the first
     ``--adaptive-limit`` (20) questions only, next to the fixed-λ pipelines on the same subset.
     Its time limit is ``--evaluator-timeout`` (600 s, so that the LLM's choices are measured, not
     the fallback); the questions that took longer than the service's own limit (60 s), and every
     fallback to the fixed λ with its error, are counted.

3. scores the final lists with ``rag_eval.metrics`` (chunks of one document count once, at their
   best rank): recall@5, recall@10, nDCG@10, coverage@5, coverage@10 (coverage = both gold
   paragraphs present). gMMR's ranking is its selection order, so @5 is its first 5 picks.

Also per pipeline: rerank latency p50 (wall time of ``service.rerank``, embeddings given), and a
paired bootstrap 95% CI (``--bootstrap`` 1,000 resamples of the questions) of the difference to the
plain retriever for recall@5 and coverage@5: a CI that straddles 0 is noise at this sample size.

The "best fixed λ" is picked on the same questions it is scored on (by ``--select-by``, default
recall@5, ties → coverage@5 → nDCG@10), so it is an optimistic upper bound for a fixed λ.

Skips with a message when the dataset is not under ``$RAG_DATASETS_DIR`` (default
``../shared/datasets``). Prints Markdown tables and writes JSON.

    .venv/bin/python bench/reranker_quality.py [--candidates 50] [--adaptive-limit 20]
        [--alphas 0.5,0.7,0.85] [--bootstrap 1000] [--out bench-results/reranker_quality.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder  # noqa: E402
from rag_common.schemas import DiffusionSpec, GmmrSpec, Passage, RerankRequest, SearchRequest  # noqa: E402
from rag_common.settings import LLMSettings  # noqa: E402
from rag_eval.datasets import DatasetNotFound, load_dataset  # noqa: E402
from rag_eval.harness import EVAL_ACCESS, Retriever, dedupe_doc_ids, open_index  # noqa: E402
from rag_eval.metrics import evaluate  # noqa: E402
from rag_reranker.rerank_service import RerankService  # noqa: E402
from rag_reranker.settings import RerankerSettings  # noqa: E402
from rag_reranker.stages.adaptive_lambda import AdaptiveLambdaSelector  # noqa: E402
from rag_reranker.stages.diffusion_stage import DiffusionStage  # noqa: E402
from rag_reranker.stages.gmmr_stage import GmmrStage  # noqa: E402
from harness import describe, result_path, write_result  # noqa: E402

DATASET = "hotpotqa"
METRICS = ["recall@5", "recall@10", "ndcg@10", "coverage@5", "coverage@10"]
CI_METRICS = ["recall@5", "coverage@5"]
LAMBDAS = tuple(round(0.1 * i, 1) for i in range(1, 11))
FINAL_K = 10
#: (label, SearchRequest.mode, fusion)
MODES = [("dense", "dense", "min_max"), ("hybrid min_max", "hybrid", "min_max")]


# --------------------------------------------------------------------------- candidates


@dataclass
class Candidates:
    query_id: str
    query: str
    passages: list[Passage]
    query_embedding: list[float]


async def fetch_candidates(
    retriever: Retriever, embedder: Any, query_id: str, text: str, mode: str, fusion: str, n: int, state: dict[str, Any]
) -> Candidates:
    """Top ``n`` chunks with their vectors: from the retriever if it sends them, else embedded here."""
    service = retriever.search_services[fusion]
    if state.get("embeddings_source") != "embedder":
        try:
            response = await service.search(SearchRequest(query=text, top_k=n, mode=mode, include_embeddings=True), EVAL_ACCESS)
            if response.query_embedding is not None and all(p.embedding is not None for p in response.passages):
                state["embeddings_source"] = "retriever"
                return Candidates(query_id, text, response.passages, response.query_embedding)
            reason = "the response carried no embeddings"
        except Exception as exc:  # the retriever's include_embeddings is not there (yet)
            reason = f"{type(exc).__name__}: {exc}"[:200]
        print(f"   retriever cannot send embeddings ({reason}); embedding candidates with MiniLM here", flush=True)
        state["embeddings_source"] = "embedder"
    response = await service.search(SearchRequest(query=text, top_k=n, mode=mode), EVAL_ACCESS)
    vectors = embedder.encode_documents([p.text for p in response.passages])
    passages = [p.model_copy(update={"embedding": v.tolist()}) for p, v in zip(response.passages, vectors)]
    return Candidates(query_id, text, passages, embedder.encode_queries([text])[0].tolist())


# --------------------------------------------------------------------------- pipelines


def fixed_pipelines(alphas: list[float], chain_alpha: float) -> dict[str, list[Any] | None]:
    pipelines: dict[str, list[Any] | None] = {"retriever": None}
    for alpha in alphas:
        pipelines[f"diffusion α={alpha:g}"] = [DiffusionSpec(alpha=alpha)]
    for lam in LAMBDAS:
        pipelines[f"gmmr λ={lam:g}"] = [GmmrSpec(mmr_lambda=lam)]
    for lam in LAMBDAS:
        pipelines[f"diffusion→gmmr λ={lam:g}"] = [DiffusionSpec(alpha=chain_alpha), GmmrSpec(mmr_lambda=lam)]
    return pipelines


@dataclass
class Outcome:
    ranking: list[str]  # doc ids, best first, deduplicated
    selection: tuple[str, ...]  # chunk ids of the final list, in order
    ms: float
    detail: dict[str, Any] = field(default_factory=dict)


async def rerank(service: RerankService, cand: Candidates, stages: list[Any] | None) -> Outcome:
    if stages is None:
        top = cand.passages[:FINAL_K]
        return Outcome(dedupe_doc_ids(p.doc_id for p in top), tuple(p.chunk_id for p in top), 0.0)
    request = RerankRequest.model_construct(
        query=cand.query, passages=cand.passages, top_k=FINAL_K, stages=stages, query_embedding=cand.query_embedding
    )
    started = time.perf_counter()
    response = await service.rerank(request)
    ms = (time.perf_counter() - started) * 1000.0
    bad = [r for r in response.reports if r.status != "ran"]
    if bad:
        raise RuntimeError(f"stage did not run: {bad[0].name} {bad[0].status}: {bad[0].reason}")
    detail = next((r.detail for r in response.reports if r.name == "gmmr"), {})
    top = response.ranked_passages(cand.passages)
    return Outcome(dedupe_doc_ids(p.doc_id for p in top), tuple(p.chunk_id for p in top), ms, detail)


class CountingEvaluator:
    """The real LLM evaluator, counting its calls (planner and evaluator) per question."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.plan_calls = 0
        self.score_calls = 0

    def reset(self) -> None:
        self.plan_calls = self.score_calls = 0

    async def plan(self, query: str) -> list[str]:
        self.plan_calls += 1
        return await self.inner.plan(query)

    async def score(self, query: str, plan: list[str], passages: list[str]) -> list[int]:
        self.score_calls += 1
        return await self.inner.score(query, plan, passages)


# --------------------------------------------------------------------------- statistics


def score_run(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]], ids: list[str]) -> dict[str, Any]:
    result = evaluate({q: rankings[q] for q in ids}, {q: qrels[q] for q in ids}, METRICS)
    per_query = {spec: np.array([result.per_query[q][spec] for q in ids]) for spec in METRICS}
    return {"means": {spec: float(v.mean()) for spec, v in per_query.items()}, "per_query": per_query}


def bootstrap_ci(delta: np.ndarray, resamples: np.ndarray) -> list[float]:
    means = delta[resamples].mean(axis=1)
    return [round(float(np.percentile(means, 2.5)), 4), round(float(np.percentile(means, 97.5)), 4)]


def summarise(
    scored: dict[str, dict[str, Any]], latencies: dict[str, list[float]], baseline: str, resamples: np.ndarray
) -> dict[str, Any]:
    rows: dict[str, Any] = {}
    for name, s in scored.items():
        row: dict[str, Any] = {
            "metrics": {spec: round(v, 4) for spec, v in s["means"].items()},
            "rerank_ms_p50": describe(latencies[name], ("p50",), digits=3)["p50"] if latencies.get(name) else 0.0,
        }
        if name != baseline:
            row["delta_vs_retriever"] = {
                spec: {
                    "mean": round(float((s["per_query"][spec] - scored[baseline]["per_query"][spec]).mean()), 4),
                    "ci95": bootstrap_ci(s["per_query"][spec] - scored[baseline]["per_query"][spec], resamples),
                }
                for spec in CI_METRICS
            }
        rows[name] = row
    return rows


def best_of(rows: dict[str, Any], prefix: str, select_by: str) -> str:
    keys = [select_by] + [m for m in ("coverage@5", "ndcg@10") if m != select_by]
    names = [name for name in rows if name.startswith(prefix)]
    # Ties after all keys go to the higher λ (closer to plain relevance order).
    return max(names, key=lambda n: (*(rows[n]["metrics"][k] for k in keys), float(n.split("=")[-1])))


# --------------------------------------------------------------------------- the run


async def run(args: argparse.Namespace, embedder: SentenceTransformerEmbedder) -> dict[str, Any] | None:
    try:
        dataset = load_dataset(DATASET)
    except DatasetNotFound as exc:
        print(f"{DATASET}: skipped, {exc}")
        return None
    dataset.check()
    qrels = {q: dict(j) for q, j in dataset.qrels.items()}
    query_ids = [q.id for q in dataset.queries if any(g > 0 for g in qrels.get(q.id, {}).values())]
    texts = {q.id: q.text for q in dataset.queries}
    subset = query_ids[: args.adaptive_limit]
    rng = np.random.default_rng(args.seed)
    resamples_all = rng.integers(0, len(query_ids), size=(args.bootstrap, len(query_ids)))
    resamples_sub = rng.integers(0, len(subset), size=(args.bootstrap, len(subset))) if subset else None

    settings = RerankerSettings()
    fixed_service = RerankService(
        {"diffusion": DiffusionStage.of(settings), "gmmr": GmmrStage.of(settings, adaptive=None)},
        default_chain=["gmmr"],
        embedder=embedder,
    )
    pipelines = fixed_pipelines(args.alphas, args.chain_alpha)
    print(f"== {dataset!r}; ingesting ...", flush=True)
    out: dict[str, Any] = {"modes": {}}
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        async with open_index(Path(tmp) / "index", embedder) as retriever:
            stats = await retriever.ingest_corpus(dataset.corpus, source=dataset.name)
            print(f"   {stats.documents} documents → {stats.chunks} chunks in {stats.seconds:.1f} s", flush=True)
            out.update(documents=stats.documents, chunks=stats.chunks, queries=len(query_ids))
            candidates: dict[str, list[Candidates]] = {}
            state: dict[str, Any] = {}
            for label, mode, fusion in MODES:
                candidates[label] = [
                    await fetch_candidates(retriever, embedder, q, texts[q], mode, fusion, args.candidates, state)
                    for q in query_ids
                ]
            out["embeddings_source"] = state.get("embeddings_source")

    outcomes: dict[str, dict[str, dict[str, Outcome]]] = {}
    for label, _, _ in MODES:
        started = time.perf_counter()
        outcomes[label] = {name: {} for name in pipelines}
        for cand in candidates[label]:
            for name, stages in pipelines.items():
                outcomes[label][name][cand.query_id] = await rerank(fixed_service, cand, stages)
        print(f"   {label}: {len(pipelines)} fixed pipelines × {len(query_ids)} questions "
              f"in {time.perf_counter() - started:.1f} s", flush=True)

    for label, _, _ in MODES:
        res = outcomes[label]
        scored = {n: score_run({q: o.ranking for q, o in r.items()}, qrels, query_ids) for n, r in res.items()}
        latencies = {n: [o.ms for o in r.values()] for n, r in res.items() if pipelines[n] is not None}
        rows = summarise(scored, latencies, "retriever", resamples_all)
        same = {
            f"λ={lam:g}": round(float(np.mean([
                set(res[f"gmmr λ={lam:g}"][q].selection) == set(res[f"diffusion→gmmr λ={lam:g}"][q].selection)
                for q in query_ids
            ])), 3)
            for lam in LAMBDAS
        }
        out["modes"][label] = {
            "pipelines": rows,
            "best_fixed_gmmr": best_of(rows, "gmmr λ=", args.select_by),
            "best_fixed_diffusion_gmmr": best_of(rows, "diffusion→gmmr λ=", args.select_by),
            "share_of_questions_where_diffusion_then_gmmr_selects_the_same_set_as_gmmr": same,
        }

    if subset:
        out["adaptive"] = await run_adaptive(args, embedder, settings, candidates, outcomes, qrels, subset, resamples_sub)
    return out


async def run_adaptive(
    args: argparse.Namespace,
    embedder: Any,
    settings: RerankerSettings,
    candidates: dict[str, list[Candidates]],
    outcomes: dict[str, dict[str, dict[str, Outcome]]],
    qrels: dict[str, dict[str, int]],
    subset: list[str],
    resamples: np.ndarray,
) -> dict[str, Any]:
    from rag_common.llm import build_chat_model
    from rag_reranker.llm_lambda_evaluator import LLMLambdaEvaluator
    from ragctl.stack import free_port, start_llm_server

    result: dict[str, Any] = {"questions": len(subset), "modes": {}}
    with tempfile.TemporaryDirectory(dir=args.workdir) as logs:
        try:
            server = start_llm_server(free_port(), Path(logs))
        except Exception as exc:
            print(f"adaptive λ: skipped, the local LLM server did not start: {type(exc).__name__}: {exc}")
            result["skipped"] = f"{type(exc).__name__}: {exc}"[:300]
            return result
        try:
            llm = LLMSettings(base_url=server.url)
            counter = CountingEvaluator(LLMLambdaEvaluator(build_chat_model(llm, max_tokens=min(llm.max_tokens, 256))))
            result.update(llm_model=llm.model, evaluator_concurrency=settings.evaluator_concurrency,
                          evaluator_timeout_s=args.evaluator_timeout,
                          service_evaluator_timeout_s=settings.evaluator_timeout_s)
            service = RerankService(
                {
                    "gmmr": GmmrStage.of(
                        settings.model_copy(update={"evaluator_timeout_s": args.evaluator_timeout}),
                        adaptive=AdaptiveLambdaSelector(counter, concurrency=settings.evaluator_concurrency),
                    )
                },
                default_chain=["gmmr"],
                embedder=embedder,
            )
            for label, _, _ in MODES:
                by_id = {c.query_id: c for c in candidates[label]}
                adaptive: dict[str, Outcome] = {}
                calls: list[int] = []
                started = time.perf_counter()
                for q in subset:
                    counter.reset()
                    adaptive[q] = await rerank(service, by_id[q], [GmmrSpec(mmr_lambda="adaptive")])
                    calls.append(counter.plan_calls + counter.score_calls)
                    fallback = adaptive[q].detail.get("fallback")
                    print(f"   {label} adaptive {len(calls)}/{len(subset)}: λ={adaptive[q].detail.get('lambda')} "
                          f"{calls[-1]} LLM calls {adaptive[q].ms / 1000:.1f} s"
                          + (f" (fallback: {fallback.split(':')[1].strip()})" if fallback else ""), flush=True)
                print(f"   {label}: adaptive λ on {len(subset)} questions in {time.perf_counter() - started:.1f} s",
                      flush=True)
                runs = {name: {q: outcomes[label][name][q] for q in subset} for name in outcomes[label]}
                runs["gmmr adaptive"] = adaptive
                scored = {n: score_run({q: o.ranking for q, o in r.items()}, qrels, subset) for n, r in runs.items()}
                latencies = {n: [o.ms for o in r.values()] for n, r in runs.items() if n != "retriever"}
                rows = summarise(scored, latencies, "retriever", resamples)
                best = best_of(rows, "gmmr λ=", args.select_by)
                default = f"gmmr λ={settings.mmr_lambda:g}"
                keep = ["retriever", default, best, "gmmr adaptive"]
                chosen = [o.detail.get("lambda") for o in adaptive.values()]
                fallbacks = [o.detail.get("fallback") for o in adaptive.values() if o.detail.get("fallback")]
                wall = [o.ms / 1000.0 for o in adaptive.values()]
                judged = [o.detail["distinct_sets"] for o in adaptive.values() if "distinct_sets" in o.detail]
                result["modes"][label] = {
                    "pipelines": {n: rows[n] for n in dict.fromkeys(keep)},
                    "best_fixed_gmmr_on_subset": best,
                    "service_default_gmmr": default,
                    "llm_calls_per_question": {"mean": round(float(np.mean(calls)), 2), "min": min(calls),
                                               "max": max(calls)},
                    "wall_s_per_question": describe(wall, ("p50", "mean", "max"), digits=2),
                    "distinct_sets_mean": round(float(np.mean(judged)), 2) if judged else None,
                    "chosen_lambdas": {str(lam): chosen.count(lam) for lam in sorted(set(chosen), key=float)},
                    "fallbacks": len(fallbacks),
                    "fallbacks_by_error": {
                        kind: sum(1 for f in fallbacks if f.split(":")[1].strip() == kind)
                        for kind in sorted({f.split(":")[1].strip() for f in fallbacks})
                    },
                    "fallback_reasons": sorted(set(fallbacks))[:5],
                    "over_service_timeout": sum(1 for w in wall if w > settings.evaluator_timeout_s),
                }
        finally:
            server.stop()
    return result


# --------------------------------------------------------------------------- output


def fmt_ci(delta: dict[str, Any]) -> str:
    lo, hi = delta["ci95"]
    return f"{delta['mean']:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def metric_table(rows: dict[str, Any], names: list[str], with_ci: bool = True, extra: dict[str, str] | None = None) -> str:
    head = ["pipeline", *METRICS, "rerank p50 ms"] + (["Δ recall@5 [95% CI]", "Δ coverage@5 [95% CI]"] if with_ci else [])
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for name in names:
        row = rows[name]
        cells = [f"{row['metrics'][m]:.3f}" for m in METRICS] + [f"{row['rerank_ms_p50']:.2f}"]
        if with_ci:
            delta = row.get("delta_vs_retriever")
            cells += [fmt_ci(delta[m]) if delta else "—" for m in CI_METRICS]
        label = name + ((extra or {}).get(name, ""))
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def report(data: dict[str, Any], args: argparse.Namespace) -> str:
    parts = [
        f"**hotpotqa** — {data['queries']} questions, {data['documents']} paragraphs → {data['chunks']} chunks; "
        f"{args.candidates} candidates per question; final list top_k = {FINAL_K}; "
        f"candidate embeddings from the {data['embeddings_source']}; bootstrap {args.bootstrap} resamples. "
        f"* best fixed λ chosen on these same questions by {args.select_by} (optimistic).",
    ]
    for label, mode in data["modes"].items():
        rows = mode["pipelines"]
        best, best_chain = mode["best_fixed_gmmr"], mode["best_fixed_diffusion_gmmr"]
        names = ["retriever", f"diffusion α={args.chain_alpha:g}", best, best_chain]
        parts += [f"\n**{label}** — summary\n", metric_table(rows, list(dict.fromkeys(names)),
                                                            extra={best: " *", best_chain: " *"})]
    for label, mode in data["modes"].items():
        rows = mode["pipelines"]
        names = [n for n in rows if n != "retriever"]
        parts += [f"\n**{label}** — all fixed pipelines (α and λ sweeps)\n", metric_table(rows, ["retriever", *names])]
        same = mode["share_of_questions_where_diffusion_then_gmmr_selects_the_same_set_as_gmmr"]
        parts.append(f"\ndiffusion→gmmr selects the same top-10 set as gmmr alone in "
                     f"{min(same.values()):.0%}–{max(same.values()):.0%} of questions (per λ).")
    adaptive = data.get("adaptive")
    if adaptive and adaptive.get("modes"):
        parts.append(f"\n**adaptive λ** — first {adaptive['questions']} questions, LLM {adaptive['llm_model']} "
                     f"(llama.cpp, local), evaluator concurrency {adaptive['evaluator_concurrency']}, "
                     f"timeout {adaptive['evaluator_timeout_s']:g} s")
        for label, mode in adaptive["modes"].items():
            rows = mode["pipelines"]
            extra = {mode["service_default_gmmr"]: " (service default)"}
            best = mode["best_fixed_gmmr_on_subset"]
            extra[best] = extra.get(best, "") + " *"
            parts += [f"\n*{label}* (same {adaptive['questions']} questions; * best fixed λ on this subset)\n",
                      metric_table(rows, list(rows), extra=extra)]
            parts.append(
                f"\nLLM calls/question mean {mode['llm_calls_per_question']['mean']} "
                f"(min {mode['llm_calls_per_question']['min']}, max {mode['llm_calls_per_question']['max']}); "
                f"distinct sets judged (questions not fallen back) mean {mode['distinct_sets_mean']}; wall s/question p50 "
                f"{mode['wall_s_per_question']['p50']} (mean {mode['wall_s_per_question']['mean']}, "
                f"max {mode['wall_s_per_question']['max']}); chosen λ {mode['chosen_lambdas']}; "
                f"fallbacks to the fixed λ {mode['service_default_gmmr'].split('=')[1]}: {mode['fallbacks']} "
                f"{mode['fallbacks_by_error']}; questions over the service's {adaptive['service_evaluator_timeout_s']:g} s "
                f"evaluator timeout (a fallback in production): {mode['over_service_timeout']}."
            )
    elif adaptive:
        parts.append(f"\nadaptive λ skipped: {adaptive.get('skipped')}")
    return "\n".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", type=int, default=50, help="candidates per question from the retriever")
    parser.add_argument("--adaptive-limit", type=int, default=20, help="questions for adaptive λ (0: skip it)")
    parser.add_argument("--alphas", default="0.5,0.7,0.85", help="diffusion α sweep")
    parser.add_argument("--chain-alpha", type=float, default=0.85, help="α of diffusion before gMMR")
    parser.add_argument(
        "--evaluator-timeout",
        type=float,
        default=600.0,
        help="adaptive λ time limit per question, s (the service's RERANKER_EVALUATOR_TIMEOUT_S is 60; a generous "
        "limit here measures the LLM's choices rather than the fallback; questions over 60 s are counted)",
    )
    parser.add_argument("--select-by", default="recall@5", choices=METRICS, help="metric that picks the best λ")
    parser.add_argument("--bootstrap", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=result_path("reranker_quality"))
    args = parser.parse_args()
    args.alphas = [float(a) for a in args.alphas.split(",") if a.strip()]

    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    embedder.warm_up()
    started = time.perf_counter()
    data = asyncio.run(run(args, embedder))
    if data is None:
        print("nothing measured (set RAG_DATASETS_DIR to the folder holding hotpotqa/)")
        return
    output = {
        "embedder": embedder.model_id,
        "dataset": DATASET,
        "config": {
            "candidates": args.candidates, "final_top_k": FINAL_K, "alphas": args.alphas,
            "chain_alpha": args.chain_alpha, "lambdas": list(LAMBDAS), "select_by": args.select_by,
            "bootstrap": args.bootstrap, "seed": args.seed, "adaptive_limit": args.adaptive_limit,
        },
        **data,
        "total_seconds": round(time.perf_counter() - started, 1),
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    }
    print("\n" + report(data, args) + "\n")
    write_result(args.out, output)
    print(f"wrote {args.out} ({output['total_seconds']} s)")


if __name__ == "__main__":
    main()
