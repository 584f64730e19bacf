"""Evaluate named runs, or the ablation matrix, on a dataset: what ``ragctl eval`` calls.

Ablation matrix (per dataset, all on the same queries and the same index):

- ``bm25``, ``dense``, ``hybrid`` (min_max fusion): the retriever alone;
- each ``+diffusion`` (graph diffusion, the reranker's default α);
- each ``+gmmr:<λ*>``: gMMR with the best fixed λ of a sweep over ``lambdas`` (every mode × λ is
  run; λ* maximises the dataset's first headline metric averaged over the three modes, ties → the
  larger λ). λ* is chosen on the very queries it is scored on, so its row is an optimistic upper
  bound for a fixed λ; the whole sweep is in ``sweep/`` and ``lambda_sweep.png``. gMMR's relevance
  term here is the reranker's default (``cosine``: cos(query, passage));
- each ``+gmmr:<λ*>:scores``: the same with the incoming (retriever) scores, min-max scaled, as the
  relevance term; its own sweep picks its own λ* (same rule, same optimism), in ``sweep/`` and
  ``lambda_sweep_scores.png``;
- each ``+cross_encoder``, only when ``RERANKER_CROSS_ENCODER_MODEL`` is set;
- with the LLM only, on the first ``adaptive_limit`` queries: each ``+gmmr:adaptive`` (the LLM
  picks λ per query; slow on the local model), ``hybrid+llm`` (answers, citations, abstention) and,
  on multi-turn datasets, ``hybrid+refiner+llm``.

The table compares every row with ``dense`` (paired bootstrap 95 % CI over the queries both ran;
a CI that contains 0 is marked noise); a second table compares every rerank chain with its own
retriever's order (``hybrid+gmmr:0.9:scores`` − ``hybrid``), which is what a reranker has to beat.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rag_eval.datasets import DatasetNotFound, is_dataset_folder, load_dataset
from rag_eval.datasets.types import Dataset, Query
from rag_eval.metrics import DEFAULT_KS, METRICS
from rag_eval.report import comparison_table, headline, pretty, vs_retriever_table
from rag_eval.runner import execute, select_queries, subset_corpus, summarize, write_summary
from rag_eval.runs import DEFAULT_CANDIDATES, DEFAULT_TOP_K, MODES, RunConfig, StageConfig, parse_run
from rag_eval.stats import DEFAULT_RESAMPLES

if TYPE_CHECKING:  # the services (and torch) are imported only when a dataset is evaluated
    from rag_common.embedders import Embedder
    from rag_common.settings import LLMSettings
    from rag_eval.pipeline import Pipeline
    from rag_generator.answer_generator import AnswerGenerator
    from rag_refiner.query_refiner import QueryRefiner
    from rag_reranker.runtime import RerankerRuntime

logger = logging.getLogger(__name__)

LAMBDAS: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(1, 11))
BASELINE = "dense"
#: gMMR relevance terms the ablation sweeps: the service default (cosine), and the incoming scores.
SWEEP_RELEVANCES: tuple[str | None, ...] = (None, "scores")


@dataclass
class EvalOptions:
    reports: Path = Path("reports")
    limit: int | None = None
    #: Evaluate on the judged documents of the selected queries plus this many random others.
    corpus_sample: int | None = None
    ks: tuple[int, ...] = DEFAULT_KS
    #: Chunks retrieved per run (default: the served depth, ``GATEWAY_RETRIEVAL_CANDIDATES``).
    candidates: int = DEFAULT_CANDIDATES
    top_k: int = min(DEFAULT_TOP_K, DEFAULT_CANDIDATES)
    #: The LLM endpoint to use, or None: no LLM runs.
    llm_settings: LLMSettings | None = None
    adaptive_limit: int = 20
    lambdas: tuple[float, ...] = LAMBDAS
    resamples: int = DEFAULT_RESAMPLES
    seed: int = 0
    progress: bool = True
    plots: bool = True
    #: Datasets folder (default ``$RAG_DATASETS_DIR`` or ``../shared/datasets``).
    root: Path | None = None
    #: Index cache (default ``<reports>/.index``).
    index_cache: Path | None = None
    #: LLM-judge repeats of every LLM run's answers (0 = no judge; needs ``llm_settings``).
    judge_repeats: int = 0
    #: Answers judged per run (the first ones logged), to bound the judge's LLM calls.
    judge_limit: int = 20
    #: Folds (by question) of the cross-fitted ``hybrid:learned`` runs.
    fusion_folds: int = 5


@dataclass
class DatasetResult:
    dataset: str
    summaries: dict[str, dict[str, Any]] = field(default_factory=dict)
    table: str = ""
    files: list[Path] = field(default_factory=list)
    skipped: str = ""
    notes: list[str] = field(default_factory=list)


def ablation_configs(
    options: EvalOptions, *, cross_encoder: bool
) -> tuple[list[RunConfig], list[RunConfig], list[RunConfig]]:
    """(main rows without gMMR, the λ sweeps — default (cosine) relevance, then ``scores`` relevance —
    and cross-encoder rows)."""
    common = {"candidates": options.candidates, "top_k": options.top_k}
    main: list[RunConfig] = [RunConfig(mode=mode, **common) for mode in MODES]
    main += [RunConfig(mode=mode, stages=(StageConfig("diffusion"),), **common) for mode in MODES]
    sweep = [
        RunConfig(mode=mode, stages=(StageConfig("gmmr", lam, relevance),),
                  tags={"sweep": "lambda", "relevance": relevance or "default"}, share_search=True, **common)
        for relevance in SWEEP_RELEVANCES
        for mode in MODES
        for lam in options.lambdas
    ]
    ce = [RunConfig(mode=mode, stages=(StageConfig("cross_encoder"),), **common) for mode in MODES] if cross_encoder else []
    return main, sweep, ce


def llm_configs(options: EvalOptions, dataset: Dataset) -> list[RunConfig]:
    common = {"candidates": options.candidates, "top_k": options.top_k}
    configs = [RunConfig(mode=mode, stages=(StageConfig("gmmr", "adaptive"),), **common) for mode in MODES]
    configs.append(RunConfig(mode="hybrid", llm=True, **common))
    if any(query.history for query in dataset.queries):
        configs.append(RunConfig(mode="hybrid", refiner=True, llm=True, **common))
    return configs


def grid_run_configs(specs: Sequence[str], options: EvalOptions) -> list[RunConfig]:
    """Run specs of a selection grid, sharing searches: the runs that need the candidates' vectors
    come first, so one search (with vectors) per query serves every run of the same retrieval."""
    configs = [parse_run(spec, candidates=options.candidates, top_k=options.top_k) for spec in specs]
    configs = [config.with_stages(share_search=True, named_depth=config.named_depth) for config in configs]
    return sorted(configs, key=lambda config: not config.needs_embeddings)


def best_lambda(sweep: dict[str, dict[float, float]]) -> float:
    """The λ with the best mean over the modes; ties → the larger λ (closest to relevance only)."""
    lambdas = sorted({lam for values in sweep.values() for lam in values})
    means = {lam: sum(values[lam] for values in sweep.values()) / len(sweep) for lam in lambdas}
    top = max(means.values())
    return max(lam for lam, mean in means.items() if abs(mean - top) < 1e-12)


class Evaluator:
    """Holds the embedder (loaded once) and runs datasets one after the other."""

    def __init__(self, options: EvalOptions, embedder: Embedder | None = None, echo: Callable[[str], None] = print) -> None:
        self.options = options
        self._embedder = embedder
        self.echo = echo

    @property
    def embedder(self) -> Embedder:
        """The retriever's embedder as its runtime builds it (``RETRIEVER_*``, ``EMBEDDER_BACKEND``), shared with the reranker."""
        if self._embedder is None:
            from rag_retriever.runtime import build_embedder
            from rag_retriever.settings import RetrieverSettings

            self._embedder = build_embedder(RetrieverSettings())
        return self._embedder

    # ------------------------------------------------------------------------------ setup

    def load(self, name: str) -> tuple[Dataset, list[Query], bool]:
        dataset = load_dataset(name, root=self.options.root)
        dataset.check()
        if not is_dataset_folder(name):  # a folder keeps its own name (the folder's)
            dataset.name = name
        llm = self.options.llm_settings is not None
        # Without the LLM only ranking metrics exist, and they need gold: drop queries without.
        queries = select_queries(dataset, self.options.limit, seed=self.options.seed, require_gold=not llm)
        subset = False
        if self.options.corpus_sample is not None:
            dataset = subset_corpus(dataset, queries, self.options.corpus_sample, seed=self.options.seed)
            subset = True
        return dataset, queries, subset

    async def open(
        self, stack: AsyncExitStack, dataset: Dataset, *, need_llm: bool
    ) -> tuple[Pipeline, dict[str, Any], RerankerRuntime]:
        """The services' runtimes, opened on ``stack`` (closed when it is): the retriever over the
        cached index of ``dataset``, the reranker (its default chain empty: every run names its
        stages) and, with the LLM, the refiner and the generator. Returns the pipeline over them, the
        index facts and the reranker's runtime."""
        from rag_eval.pipeline import Pipeline, open_retriever
        from rag_generator import runtime as generator_runtime
        from rag_generator.settings import GeneratorSettings
        from rag_refiner import runtime as refiner_runtime
        from rag_reranker import runtime as reranker_runtime

        cache = self.options.index_cache or (self.options.reports / ".index")
        embedder = self.embedder
        retriever, index = await stack.enter_async_context(
            open_retriever(dataset, cache, embedder, progress=self.options.progress)
        )
        llm = self.options.llm_settings if need_llm else None
        reranker = await stack.enter_async_context(
            reranker_runtime.open_runtime(llm_settings=llm, use_llm=llm is not None, embedder=embedder, default_chain=[])
        )
        generator_settings = GeneratorSettings()
        refiner: QueryRefiner | None = None
        generator: AnswerGenerator | None = None
        if llm is not None:
            refiner = (await stack.enter_async_context(refiner_runtime.open_runtime(llm_settings=llm))).refiner
            generator = (await stack.enter_async_context(generator_runtime.open_runtime(generator_settings, llm))).generator
        pipeline = Pipeline(
            retriever, reranker.rerank, refiner=refiner, generator=generator, generator_settings=generator_settings
        )
        return pipeline, index, reranker

    def _context(self, index: dict[str, Any]) -> Callable[[RunConfig], str]:
        index_part = f"index={index['fingerprint'][:16]}"
        model = self.options.llm_settings.model if self.options.llm_settings is not None else ""

        def context(config: RunConfig) -> str:
            # Each run's own depth (the ``default`` run keeps the served one whatever --candidates says).
            base = f"{index_part};candidates={config.candidates};top_k={config.top_k}"
            if config.cross_fitted:
                base += f";fusion_folds={self.options.fusion_folds};seed={self.options.seed};fusion_recipe=2"
            elif config.mode == "hybrid" and config.fusion == "learned":
                base += f";fusion_model={_served_fusion_model_digest()}"  # another model file: run it afresh
            return f"{base};llm={model}" if config.uses_llm else base

        return context

    # ------------------------------------------------------------------------------ runs

    async def evaluate(
        self, name: str, *, runs: Sequence[str] = (), ablation: bool = False, grid: Sequence[str] = ()
    ) -> DatasetResult:
        """``runs`` (each its own search, a comparison table), the ablation, and ``grid``: run specs
        evaluated for ``rag_eval.selection`` (summaries only; runs of one search share it, so their
        latency is not measured)."""
        result = DatasetResult(dataset=name)
        try:
            dataset, queries, subset = self.load(name)
        except DatasetNotFound as exc:  # a built-in dataset not on this machine (a folder's errors raise)
            result.skipped = str(exc)
            self.echo(f"{name}: skipped, {exc}")
            return result
        name = result.dataset = dataset.name
        configs = [parse_run(spec, candidates=self.options.candidates, top_k=self.options.top_k) for spec in runs]
        grid_configs = grid_run_configs(grid, self.options)
        need_llm = any(config.uses_llm for config in [*configs, *grid_configs]) or (ablation and self.options.llm_settings is not None)
        if need_llm and self.options.llm_settings is None:
            raise ValueError("these runs need the LLM: pass llm_settings (ragctl eval --llm)")
        report_dir = self.options.reports / name
        report_dir.mkdir(parents=True, exist_ok=True)
        self.echo(
            f"{name}: {len(queries)} queries, corpus {len(dataset.corpus)} documents"
            f"{' (subset: judged + sample)' if subset else ''}"
        )
        async with AsyncExitStack() as stack:
            pipeline, index, reranker = await self.open(stack, dataset, need_llm=need_llm)
            extra = {"index": {k: v for k, v in index.items() if k != "fingerprint"}, "corpus_subset": subset,
                     "limit": self.options.limit}
            if ablation:
                await self._ablation(dataset, queries, pipeline, index, reranker, report_dir, result, extra)
            if configs:
                await self._runs(dataset, queries, pipeline, index, configs, report_dir, result, extra)
            if grid_configs:
                result.summaries.update(await self._execute(dataset, queries, pipeline, index, grid_configs, report_dir,
                                                            extra, label=f"{dataset.name}: grid"))
                self.echo(f"{dataset.name}: {len(grid_configs)} grid runs summarised in {report_dir}")
        return result

    async def _execute(
        self, dataset: Dataset, queries: Sequence[Query], pipeline: Pipeline, index: dict[str, Any],
        configs: Sequence[RunConfig], report_dir: Path, extra: dict[str, Any], *, label: str,
        dirs: dict[str, Path] | None = None,
    ) -> dict[str, dict[str, Any]]:
        context = self._context(index)
        logs: dict[str, Any] = {}
        for ctx in sorted({context(config) for config in configs}):
            group = [config for config in configs if context(config) == ctx]
            logs.update(await execute(pipeline, group, queries, report_dir, context=ctx, progress=self.options.progress,
                                      description=label, dirs=dirs))
        summaries = {}
        wanted = {query.id for query in queries}
        for config in configs:
            records = {qid: record for qid, record in logs[config.name].records.items() if qid in wanted}
            summary = summarize(config, dataset, records, ks=self.options.ks, metric_names=tuple(METRICS), extra=extra)
            if config.llm and self.options.judge_repeats > 0:
                summary["judge"] = await self._judge(dataset, records)
            write_summary(summary, (dirs or {}).get(config.name, report_dir))
            summaries[config.name] = summary
        return summaries

    async def _judge(self, dataset: Dataset, records: dict[str, dict[str, Any]]) -> dict[str, Any]:
        from rag_common.llm import build_chat_model
        from rag_eval.judge import JudgeItem, LLMJudge, judge_items

        by_id = {query.id: query for query in dataset.queries}
        items = [
            JudgeItem(qid, by_id[qid].text, tuple(record["contexts"]), None if record.get("abstained") else record.get("answer"))
            for qid, record in records.items()
            if record.get("contexts") and qid in by_id
        ][: self.options.judge_limit]
        if not items:
            return {"items": 0}
        llm = self.options.llm_settings
        judge = LLMJudge(build_chat_model(llm, max_tokens=min(llm.max_tokens, 256)))
        self.echo(f"{dataset.name}: LLM judge on {len(items)} answers × {self.options.judge_repeats} (+ negative control)")
        result = await judge_items(judge, items, repeats=self.options.judge_repeats, seed=self.options.seed)
        result["judge_model"] = llm.model
        return result

    async def _runs(
        self, dataset: Dataset, queries: Sequence[Query], pipeline: Pipeline, index: dict[str, Any],
        configs: Sequence[RunConfig], report_dir: Path, result: DatasetResult, extra: dict[str, Any],
    ) -> None:
        fitted = [config for config in configs if config.cross_fitted]
        if fitted:
            await self._cross_fit(dataset, queries, pipeline, index, fitted[0].candidates)
        summaries = await self._execute(dataset, queries, pipeline, index, configs, report_dir, extra,
                                        label=f"{dataset.name}: runs")
        result.summaries.update(summaries)
        metrics = headline(dataset.name, list(next(iter(summaries.values()))["metrics"]))
        baseline = configs[0].name
        table, delta_json = comparison_table(summaries, baseline, metrics, resamples=self.options.resamples,
                                             seed=self.options.seed)
        result.table = table
        if self.options.plots:
            result.files += self._plots(summaries, report_dir, prefix="runs_", title=dataset.name)
        self.echo(f"\n{dataset.name}: runs vs {baseline}\n\n{table}\n")

    async def _cross_fit(
        self, dataset: Dataset, queries: Sequence[Query], pipeline: Pipeline, index: dict[str, Any], depth: int
    ) -> None:
        """Learned fusion held out: the queries' candidates and features, one model per fold (k-fold by
        question within the dataset, ``rag_eval.fusion_training``; the served model's features and hard
        negatives, refitted), and each question's search service with the model of the folds it is not in."""
        from rag_eval.fusion_training import cache_path, extract, held_out_models
        from rag_retriever.backends.base import FusionSettings

        retriever = pipeline.retriever
        # The served model's recipe (its features, its hard negatives), refitted per fold, on candidates
        # extracted as it is served (PageRank's additions only for a model that reads PageRank).
        served = _served_fusion_model()
        recipe = {} if served is None else {"features": served.features,
                                            "hard_negatives": served.provenance["training"]["hard_negatives_per_query"]}
        ppr = served is None or served.uses_ppr
        cache = cache_path(self.options.reports / dataset.name, index["fingerprint"], depth, ppr=ppr)
        examples = await extract(retriever.search_services["min_max"], dataset, queries, depth, ppr=ppr, cache=cache,
                                 progress=self.options.progress)
        models = held_out_models(examples, "within", folds=self.options.fusion_folds, seed=self.options.seed, **recipe)
        first_pass = FusionSettings(method="min_max", dense_weight=retriever.settings.hybrid_dense_weight)
        services: dict[int, Any] = {}
        for query in queries:
            model = models[f"{dataset.name}/{query.id}"]
            if id(model) not in services:
                services[id(model)] = retriever.runtime.search_with(first_pass, learned=model)
            pipeline.held_out_search[query.text] = services[id(model)]
        self.echo(f"{dataset.name}: learned fusion cross-fitted, {len(services)} folds by question "
                  f"(each question ranked by a model trained without it)")

    async def _ablation(
        self, dataset: Dataset, queries: Sequence[Query], pipeline: Pipeline, index: dict[str, Any], reranker: RerankerRuntime,
        report_dir: Path, result: DatasetResult, extra: dict[str, Any],
    ) -> None:
        options = self.options
        main, sweep, ce = ablation_configs(options, cross_encoder=reranker.cross_encoder is not None)
        sweep_dir = report_dir / "sweep"
        dirs = {config.name: sweep_dir for config in sweep}
        started = time.perf_counter()
        summaries = await self._execute(dataset, queries, pipeline, index, [*main, *sweep, *ce], report_dir, extra,
                                        label=f"{dataset.name}: ablation", dirs=dirs)
        metrics = headline(dataset.name, list(summaries[BASELINE]["metrics"]))
        primary = metrics[0]
        sweeps: dict[str | None, dict[str, dict[float, float]]] = {
            relevance: {mode: {} for mode in MODES} for relevance in SWEEP_RELEVANCES
        }
        for config in sweep:
            stage = config.stages[0]
            sweeps[stage.relevance][config.mode][float(stage.param)] = summaries[config.name]["metrics"][primary]
        by_mode, by_mode_scores = sweeps[None], sweeps["scores"]
        lam, lam_scores = best_lambda(by_mode), best_lambda(by_mode_scores)
        order = [config.name for config in main[:3]]
        labels: dict[str, str] = {}
        for mode in MODES:
            order.append(f"{mode}+diffusion")
            gmmr = f"{mode}+gmmr:{lam:g}"
            order.append(gmmr)
            labels[gmmr] = f"{gmmr} (best fixed λ)"
            gmmr_scores = f"{mode}+gmmr:{lam_scores:g}:scores"
            order.append(gmmr_scores)
            labels[gmmr_scores] = f"{gmmr_scores} (best fixed λ)"
            if ce:
                order.append(f"{mode}+cross_encoder")
        llm_rows: list[RunConfig] = []
        if options.llm_settings is not None:
            llm_rows = llm_configs(options, dataset)
            subset = list(queries)[: options.adaptive_limit]
            summaries.update(await self._execute(dataset, subset, pipeline, index, llm_rows, report_dir, extra,
                                                 label=f"{dataset.name}: LLM runs ({len(subset)} queries)"))
            order += [config.name for config in llm_rows]
        else:
            result.notes.append("gmmr:adaptive, answers and refiner rows need --llm: not run")
        if not ce:
            result.notes.append("cross_encoder rows need RERANKER_CROSS_ENCODER_MODEL: not run")
        shown = {name: summaries[name] for name in order}
        table, delta_json = comparison_table(shown, BASELINE, metrics, order=order, labels=labels,
                                             resamples=options.resamples, seed=options.seed)
        own_table, own_json = vs_retriever_table(shown, metrics, order=order, labels=labels,
                                                 resamples=options.resamples, seed=options.seed)
        note = (f"best fixed gMMR λ = {lam:g} with the default (cosine) relevance, {lam_scores:g} with "
                f"relevance = scores (each by {pretty(primary)}, mean over bm25/dense/hybrid, chosen on these same "
                f"queries: optimistic); {options.candidates} candidates → top {options.top_k}")
        result.summaries.update(shown)
        result.table = table
        result.notes.insert(0, note)
        ablation = {
            "dataset": dataset.name,
            "queries": len(queries),
            "baseline": BASELINE,
            "metrics": metrics,
            "best_lambda": lam,
            "lambda_sweep": {mode: {f"{k:g}": v for k, v in values.items()} for mode, values in by_mode.items()},
            "best_lambda_scores": lam_scores,
            "lambda_sweep_scores": {mode: {f"{k:g}": v for k, v in values.items()}
                                    for mode, values in by_mode_scores.items()},
            "rows": {name: {"metrics": {m: shown[name]["metrics"][m] for m in metrics},
                            "evaluated": shown[name]["evaluated"],
                            "latency_total_ms": shown[name]["latency_ms"].get("total")} for name in order},
            "deltas_vs_baseline": delta_json,
            "deltas_vs_retriever": own_json,
            "notes": result.notes,
            "seconds": round(time.perf_counter() - started, 1),
            **extra,
        }
        answers = {name: shown[name]["answers"] for name in order if "answers" in shown[name]}
        if answers:
            ablation["answers"] = answers
        (report_dir / "ablation.json").write_text(json.dumps(ablation, indent=2, ensure_ascii=False))
        markdown = [f"# Ablation on {dataset.name}", "", f"{len(queries)} queries; " + "; ".join(result.notes), "",
                    table, "", "Each rerank chain against its own retriever's order:", "", own_table, ""]
        if answers:
            markdown += ["| run | EM | token F1 | ROUGE-L | citation P / R | abstention P / R |", "|---|---:|---:|---:|---:|---:|"]
            for name, a in answers.items():
                ab = a["abstention"]
                markdown.append(f"| {name} | {_f(a['exact_match'])} | {_f(a['token_f1'])} | {_f(a['rouge_l'])} | "
                                f"{_f(a['citation_precision'])} / {_f(a['citation_recall'])} | "
                                f"{_f(ab['precision'])} / {_f(ab['recall'])} |")
        (report_dir / "ablation.md").write_text("\n".join(markdown) + "\n")
        result.files += [report_dir / "ablation.json", report_dir / "ablation.md"]
        if options.plots:
            from rag_eval import plots

            result.files += self._plots({name: shown[name] for name in order}, report_dir, prefix="", title=dataset.name)
            baselines = {mode: summaries[mode]["metrics"][primary] for mode in MODES}
            result.files.append(plots.lambda_sweep(by_mode, baselines, pretty(primary), report_dir / "lambda_sweep.png",
                                                   best=lam, title=f"{dataset.name}: gMMR λ sweep"))
            result.files.append(plots.lambda_sweep(by_mode_scores, baselines, pretty(primary),
                                                   report_dir / "lambda_sweep_scores.png", best=lam_scores,
                                                   title=f"{dataset.name}: gMMR λ sweep, relevance = scores"))
        self.echo(f"\n{dataset.name}: ablation vs {BASELINE} ({len(queries)} queries)\n\n{table}\n")
        self.echo(f"{dataset.name}: each rerank chain vs its own retriever\n\n{own_table}\n")
        for line in result.notes:
            self.echo(f"  - {line}")

    def _plots(self, summaries: dict[str, dict[str, Any]], report_dir: Path, *, prefix: str, title: str) -> list[Path]:
        from rag_eval import plots

        names = [n for n in ("ndcg", "recall", "coverage" if title == "hotpotqa" else "mrr")]
        return [
            plots.metric_vs_k(summaries, names, report_dir / f"{prefix}metric_vs_k.png", title=title),
            plots.latency_by_stage(summaries, report_dir / f"{prefix}latency_by_stage.png", title=title),
        ]


def _served_fusion_model() -> Any:
    """The fusion model the retriever's settings name (``RETRIEVER_FUSION_MODEL`` or the shipped one),
    or None when there is none to read."""
    from rag_retriever.learned_fusion import SHIPPED_MODEL, FusionModel, FusionModelError
    from rag_retriever.settings import RetrieverSettings

    try:
        return FusionModel.load(RetrieverSettings().fusion_model or SHIPPED_MODEL)
    except FusionModelError:
        return None


def _served_fusion_model_digest() -> str:
    """The first 12 hex digits of the sha256 of the served fusion model file ("none" without one)."""
    import hashlib

    from rag_retriever.learned_fusion import SHIPPED_MODEL
    from rag_retriever.settings import RetrieverSettings

    path = Path(RetrieverSettings().fusion_model or SHIPPED_MODEL)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12] if path.exists() else "none"


def _f(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"
