"""Abstention and citation precision on ClapNQ with the local LLM, and a retrieval-score baseline.

Pipeline, in-process: the ClapNQ corpus (596 passages) in an embedded index built by the retriever's
own ``Ingestor`` (``rag_eval.pipeline.open_retriever``, cached under ``--index-cache``) → hybrid search
(min_max fusion, the default) top 5 through ``SearchService`` → the ``AnswerGenerator`` of the
generator's runtime (``rag_generator.runtime.open_runtime``, as the service builds it, with the
default ``GeneratorSettings``; ``GENERATOR_*`` env vars apply) on SmolLM2-135M served by llama.cpp
(``ragctl.stack.start_llm_server``).

Sample: ``--limit N`` answerable + N unanswerable questions (default 60 + 60), each class a seeded
random sample; ``--all`` = 300 + 300. Each class's sample is split in two seeded halves:
*calibration* (A) and *evaluation* (B).

- **Abstention** (positive = abstained, truth = unanswerable; ``rag_eval.answers.abstention_scores``):
  the LLM pipeline, and the baseline "abstain when the top retrieval score < t" for two scores: the
  hybrid top score the pipeline sees (min-max fused, so relative to the query's own candidates) and
  the top dense cosine similarity (absolute). t maximises F1 on A and is scored on B; the LLM is
  reported on B (the same questions) and on the whole sample; "A↔B" pools t_A scored on B with t_B
  scored on A. 95 % CIs: percentile bootstrap over questions (2000 resamples, seeded; the ratio
  statistics are bootstrapped here because ``rag_eval.stats`` only has the mean-difference one).
- **Citation precision against gold** (answerable questions the generator answered): ClapNQ gives
  each answerable question one gold passage and the annotators' selected sentences in it. A kept
  citation (verified by the generator, after selection) is *gold-passage* when the cited chunk belongs
  to the gold passage, and *gold-sentence* when its quote overlaps a selected sentence (folded with
  ``rag_eval.answers.fold_text``; rapidfuzz ``partial_ratio`` of the shorter against the longer ≥
  90, the threshold the generator's former quote verifier used). Micro = over all kept citations; macro = mean per answer.
- **The generator's own** ``citation_precision`` (verified / produced, per response) and the
  ``abstain_reason`` counts.

    .venv/bin/python bench/answer_quality.py [--limit 60 | --all] [--concurrency 2] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
from rapidfuzz import fuzz  # noqa: E402

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder  # noqa: E402
from rag_common.schemas import GenerateRequest, SearchRequest  # noqa: E402
from rag_common.settings import LLMSettings  # noqa: E402
from rag_eval.answers import abstention_scores, citation_scores, fold_text, token_f1  # noqa: E402
from rag_eval.datasets import DatasetNotFound, load_dataset  # noqa: E402
from rag_eval.datasets.types import Query  # noqa: E402
from rag_eval.pipeline import open_retriever  # noqa: E402
from rag_eval.stats import percentiles  # noqa: E402
from rag_generator.runtime import open_runtime as open_generator  # noqa: E402
from rag_generator.settings import GeneratorSettings  # noqa: E402
from rag_retriever.settings import RetrieverSettings  # noqa: E402
from ragctl.stack import free_port, start_llm_server  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
TOP_K = 5
RESAMPLES = 2000
#: ≈ 8-10 s per question at concurrency 2 on the loaded 2-core machine: 60 + 60 ≈ 15-20 min.
DEFAULT_PER_CLASS = 60
#: rapidfuzz ``partial_ratio`` from which a cited quote matches a gold selected sentence.
GOLD_MATCH_THRESHOLD = 90.0

# ------------------------------------------------------------------------------------ sample


def sample(queries: Sequence[Query], per_class: int | None, seed: int) -> tuple[list[Query], set[str]]:
    """A seeded stratified sample (``per_class`` of each class, all if None) and the ids of its
    calibration half A (the first half of each class's permutation)."""
    rng = np.random.default_rng(seed)
    chosen: list[Query] = []
    half_a: set[str] = set()
    for label in (True, False):
        pool = [q for q in queries if q.answerable is label]
        order = rng.permutation(len(pool))[: per_class or len(pool)]
        picked = [pool[i] for i in order]
        chosen += picked
        half_a |= {q.id for q in picked[: len(picked) // 2]}
    return chosen, half_a


# ------------------------------------------------------------------------------------ statistics


def prf(abstained: Sequence[bool], unanswerable: Sequence[bool]) -> dict[str, Any]:
    ids = [str(i) for i in range(len(abstained))]
    scores = abstention_scores(dict(zip(ids, abstained)), {i: not u for i, u in zip(ids, unanswerable)})
    return scores.to_dict()


def bootstrap(statistic: Callable[[np.ndarray], float | None], n: int, seed: int = 0) -> tuple[float, float] | None:
    """Percentile 95 % CI of ``statistic(indices)`` over ``RESAMPLES`` resamples of ``range(n)``."""
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(RESAMPLES):
        value = statistic(rng.integers(0, n, size=n))
        if value is not None:
            values.append(value)
    if not values:
        return None
    low, high = np.percentile(values, [2.5, 97.5])
    return round(float(low), 4), round(float(high), 4)


def prf_with_ci(abstained: Sequence[bool], unanswerable: Sequence[bool], seed: int = 0) -> dict[str, Any]:
    a = np.asarray(abstained, dtype=bool)
    u = np.asarray(unanswerable, dtype=bool)
    out = prf(a.tolist(), u.tolist())
    for key in ("precision", "recall", "f1"):
        out[f"{key}_ci"] = bootstrap(lambda idx, key=key: prf(a[idx].tolist(), u[idx].tolist())[key], len(a), seed)
    out["abstain_rate"] = round(float(a.mean()), 4) if len(a) else None
    return out


def f1_delta_ci(a1: Sequence[bool], a2: Sequence[bool], unanswerable: Sequence[bool], seed: int = 0) -> dict[str, Any]:
    """F1(a1) − F1(a2) on the same questions, paired bootstrap 95 % CI."""
    x, y, u = (np.asarray(v, dtype=bool) for v in (a1, a2, unanswerable))

    def delta(idx: np.ndarray) -> float | None:
        f1x = prf(x[idx].tolist(), u[idx].tolist())["f1"]
        f1y = prf(y[idx].tolist(), u[idx].tolist())["f1"]
        return None if f1x is None or f1y is None else f1x - f1y

    point = delta(np.arange(len(u)))
    ci = bootstrap(delta, len(u), seed)
    return {"delta": None if point is None else round(point, 4), "ci": ci}


def best_threshold(scores: Sequence[float], unanswerable: Sequence[bool]) -> float:
    """The t maximising abstention F1 of "abstain when score < t" (ties → the smallest t)."""
    values = sorted(set(scores))
    candidates = [values[0] - 1e-9] + [(a + b) / 2 for a, b in zip(values, values[1:])] + [values[-1] + 1e-9]
    best_t, best_f1 = candidates[0], -1.0
    for t in candidates:
        f1 = prf([s < t for s in scores], unanswerable)["f1"] or 0.0
        if f1 > best_f1 + 1e-12:
            best_t, best_f1 = t, f1
    return best_t


def auroc(scores: Sequence[float], unanswerable: Sequence[bool]) -> float | None:
    """P(score of a random answerable > score of a random unanswerable), ties count half."""
    pos = [s for s, u in zip(scores, unanswerable) if not u]
    neg = [s for s, u in zip(scores, unanswerable) if u]
    if not pos or not neg:
        return None
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return round(wins / (len(pos) * len(neg)), 4)


# ------------------------------------------------------------------------------------ citations


def quote_in_selected(quote: str, selected: Sequence[str], threshold: float = GOLD_MATCH_THRESHOLD) -> bool:
    q = fold_text(quote)
    if not q:
        return False
    for sentence in selected:
        s = fold_text(sentence)
        if not s:
            continue
        shorter, longer = (q, s) if len(q) <= len(s) else (s, q)
        if shorter in longer or fuzz.partial_ratio(shorter, longer) >= threshold:
            return True
    return False


# ------------------------------------------------------------------------------------ run


async def run(args: argparse.Namespace) -> dict[str, Any]:
    dataset = load_dataset("clapnq")
    dataset.check()
    per_class = None if args.all else args.limit
    queries, half_a = sample(dataset.queries, per_class, args.seed)
    settings = RetrieverSettings()
    embedder = SentenceTransformerEmbedder(settings.embedding_model, device="cpu")
    embedder.warm_up()
    generator_settings = GeneratorSettings()
    rows: dict[str, dict[str, Any]] = {}
    async with AsyncExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(dir=args.workdir))
        print(f"{len(queries)} questions; starting the LLM server; index (cache {args.index_cache}) ...", flush=True)
        llm = start_llm_server(free_port(), Path(tmp) / "logs")
        stack.callback(llm.stop)
        retriever, index = await stack.enter_async_context(
            open_retriever(dataset, args.index_cache, embedder, settings=settings, progress=False)
        )
        print(f"   {index['documents']} documents → {index['chunks']} chunks "
              f"({'reused' if index['reused'] else 'ingested'}, ingest took {index['ingest_seconds']} s)", flush=True)
        search = retriever.search_services["min_max"]
        passages_of: dict[str, list[Any]] = {}
        for query in queries:
            hybrid = await search.search(SearchRequest(query=query.text, top_k=TOP_K, mode="hybrid"))
            dense = await search.search(SearchRequest(query=query.text, top_k=1, mode="dense"))
            passages_of[query.id] = hybrid.passages
            gold = dataset.relevant(query.id)
            rows[query.id] = {
                "query_id": query.id,
                "answerable": bool(query.answerable),
                "half": "A" if query.id in half_a else "B",
                "hybrid_top_score": hybrid.passages[0].score if hybrid.passages else 0.0,
                "dense_top_score": dense.passages[0].score if dense.passages else 0.0,
                "retrieved_doc_ids": list(dict.fromkeys(p.doc_id for p in hybrid.passages)),
                "gold_in_top5": bool(gold) and any(p.doc_id in gold for p in hybrid.passages),
            }
        runtime = await stack.enter_async_context(open_generator(generator_settings, LLMSettings(base_url=llm.url)))
        generator = runtime.generator
        semaphore = asyncio.Semaphore(args.concurrency)
        done = 0
        started = time.perf_counter()

        async def answer(query: Query) -> None:
            nonlocal done
            passages = passages_of[query.id]
            by_chunk = {p.chunk_id: p.doc_id for p in passages}
            row = rows[query.id]
            async with semaphore:
                t0 = time.perf_counter()
                try:
                    response = await generator.generate(GenerateRequest(query=query.text, passages=passages))
                except Exception as exc:  # the LLM failed (DependencyFailed): recorded, excluded from the scores
                    row["error"] = f"{type(exc).__name__}: {exc}"[:300]
                    response = None
                row["generate_ms"] = round((time.perf_counter() - t0) * 1000.0, 1)
            if response is not None:
                row.update(
                    abstained=response.abstained,
                    abstain_reason=response.abstain_reason,
                    citation_precision=response.citation_precision,
                    repaired=response.repaired,
                    answer=response.answer,
                    citations=[{"doc_id": by_chunk.get(c.chunk_id, c.chunk_id), "quote": c.quote}
                               for c in response.citations],
                )
            done += 1
            if done % 10 == 0 or done == len(queries):
                print(f"   {done}/{len(queries)} answered, {time.perf_counter() - started:.0f} s", flush=True)

        try:  # llama.cpp's first call is slow: not measured
            await generator.generate(GenerateRequest(query="warm-up", passages=passages_of[queries[0].id][:1]))
        except Exception as exc:  # noqa: BLE001
            print(f"   warm-up failed: {type(exc).__name__}: {exc}", flush=True)
        await asyncio.gather(*(answer(query) for query in queries))
        generate_seconds = time.perf_counter() - started

    return summarise(dataset, queries, rows, args, index, generator_settings, generate_seconds)


def summarise(dataset: Any, queries: list[Query], rows: dict[str, dict[str, Any]], args: argparse.Namespace,
              index: dict[str, Any], generator_settings: GeneratorSettings, generate_seconds: float) -> dict[str, Any]:
    ok = [rows[q.id] for q in queries if "abstained" in rows[q.id]]
    errors = [r for r in rows.values() if "error" in r]
    by_half = {h: [r for r in ok if r["half"] == h] for h in ("A", "B")}

    def col(rs: list[dict[str, Any]], key: str) -> list[Any]:
        return [r[key] for r in rs]

    def unans(rs: list[dict[str, Any]]) -> list[bool]:
        return [not r["answerable"] for r in rs]

    abstention: dict[str, Any] = {
        "llm (whole sample)": prf_with_ci(col(ok, "abstained"), unans(ok), args.seed),
        "llm (half B)": prf_with_ci(col(by_half["B"], "abstained"), unans(by_half["B"]), args.seed),
    }
    baselines: dict[str, Any] = {}
    for feature, label in (("hybrid_top_score", "hybrid top score"), ("dense_top_score", "dense top cosine")):
        t_a = best_threshold(col(by_half["A"], feature), unans(by_half["A"]))
        t_b = best_threshold(col(by_half["B"], feature), unans(by_half["B"]))
        on_b = [r[feature] < t_a for r in by_half["B"]]
        pooled_rows = by_half["B"] + by_half["A"]
        pooled = on_b + [r[feature] < t_b for r in by_half["A"]]
        abstention[f"{label} < t (t from A, half B)"] = prf_with_ci(on_b, unans(by_half["B"]), args.seed)
        abstention[f"{label} < t (A↔B pooled)"] = prf_with_ci(pooled, unans(pooled_rows), args.seed)
        baselines[feature] = {
            "t_from_A": round(t_a, 4),
            "t_from_B": round(t_b, 4),
            "auroc_whole_sample": auroc(col(ok, feature), unans(ok)),
            "f1_llm_minus_baseline_half_B": f1_delta_ci(col(by_half["B"], "abstained"), on_b, unans(by_half["B"]), args.seed),
        }

    # Citations against gold: answerable questions the generator answered.
    answered = [r for r in ok if r["answerable"] and not r["abstained"]]
    kept = passage_hits = sentence_hits = 0
    macro_passage: list[float] = []
    macro_sentence: list[float] = []
    cites_gold: list[float] = []
    f1s: list[float] = []
    query_of = {q.id: q for q in queries}
    for r in answered:
        gold = dataset.relevant(r["query_id"])
        selected = query_of[r["query_id"]].metadata.get("selected_sentences", [])
        p_hits = [c["doc_id"] in gold for c in r["citations"]]
        s_hits = [c["doc_id"] in gold and quote_in_selected(c["quote"], selected) for c in r["citations"]]
        r["citation_gold_passage"] = p_hits
        r["citation_gold_sentence"] = s_hits
        kept += len(p_hits)
        passage_hits += sum(p_hits)
        sentence_hits += sum(s_hits)
        if p_hits:
            macro_passage.append(sum(p_hits) / len(p_hits))
            macro_sentence.append(sum(s_hits) / len(s_hits))
        scores = citation_scores([c["doc_id"] for c in r["citations"]], gold)
        if scores.recall is not None:
            cites_gold.append(scores.recall)
        f1 = token_f1(r["answer"], query_of[r["query_id"]].answers)
        if f1 is not None:
            f1s.append(f1)
    answerable_ok = [r for r in ok if r["answerable"]]
    citations = {
        "answerable_questions": len(answerable_ok),
        "answered": len(answered),
        "gold_in_top5_all_answerable": round(float(np.mean(col(answerable_ok, "gold_in_top5"))), 4) if answerable_ok else None,
        "gold_in_top5_answered": round(float(np.mean(col(answered, "gold_in_top5"))), 4) if answered else None,
        "kept_citations": kept,
        "gold_passage_micro": round(passage_hits / kept, 4) if kept else None,
        "gold_passage_macro": round(float(np.mean(macro_passage)), 4) if macro_passage else None,
        "gold_sentence_micro": round(sentence_hits / kept, 4) if kept else None,
        "gold_sentence_macro": round(float(np.mean(macro_sentence)), 4) if macro_sentence else None,
        "answers_citing_gold_passage": round(float(np.mean(cites_gold)), 4) if cites_gold else None,
        "answer_token_f1_mean": round(float(np.mean(f1s)), 4) if f1s else None,
    }
    # Bootstrap CI of the micro shares, resampling answers (clusters of citations).
    if kept:
        hits_p = np.array([sum(r["citation_gold_passage"]) for r in answered], dtype=float)
        hits_s = np.array([sum(r["citation_gold_sentence"]) for r in answered], dtype=float)
        counts = np.array([len(r["citations"]) for r in answered], dtype=float)
        citations["gold_passage_micro_ci"] = bootstrap(lambda i: hits_p[i].sum() / counts[i].sum() if counts[i].sum() else None, len(counts), args.seed)
        citations["gold_sentence_micro_ci"] = bootstrap(lambda i: hits_s[i].sum() / counts[i].sum() if counts[i].sum() else None, len(counts), args.seed)

    own: dict[str, Any] = {}
    for name, rs in (("all", ok), ("answerable", [r for r in ok if r["answerable"]]),
                     ("unanswerable", [r for r in ok if not r["answerable"]])):
        values = [r["citation_precision"] for r in rs if r["citation_precision"] is not None]
        own[name] = {
            "responses": len(rs),
            "with_citations_produced": len(values),
            "mean": round(float(np.mean(values)), 4) if values else None,
            **{k: (round(v, 4) if v is not None else None) for k, v in percentiles(values, (10, 50, 90)).items()},
            "share_1.0": round(sum(v == 1.0 for v in values) / len(values), 4) if values else None,
            "share_0.0": round(sum(v == 0.0 for v in values) / len(values), 4) if values else None,
        }
    reasons = {
        "answerable": dict(Counter(r["abstain_reason"] or "(answered)" for r in ok if r["answerable"])),
        "unanswerable": dict(Counter(r["abstain_reason"] or "(answered)" for r in ok if not r["answerable"])),
    }
    latency = percentiles([r["generate_ms"] for r in rows.values()], (50, 95))
    n_ans = sum(q.answerable is True for q in queries)
    return {
        "dataset": "clapnq-dev",
        "sample": {"answerable": n_ans, "unanswerable": len(queries) - n_ans, "seed": args.seed,
                   "half_A": len(by_half["A"]), "half_B": len(by_half["B"]), "all": bool(args.all)},
        "errors": len(errors),
        "error_examples": [r["error"] for r in errors[:5]],
        "retrieval": {"mode": "hybrid", "fusion": "min_max", "top_k": TOP_K,
                      "index": {k: v for k, v in index.items() if k != "fingerprint"}},
        "generator_settings": generator_settings.model_dump(mode="json", exclude={"port", "host"}),
        "llm": "SmolLM2-135M-Instruct Q4_1 (llama.cpp, ragctl.stack.start_llm_server, 2 slots)",
        "concurrency": args.concurrency,
        "abstention": abstention,
        "baselines": baselines,
        "citations_vs_gold": citations,
        "generator_citation_precision": own,
        "abstain_reasons": reasons,
        "repaired": sum(bool(r.get("repaired")) for r in ok),
        "generate_ms": {k: round(v, 1) for k, v in latency.items() if v is not None},
        "generate_seconds": round(generate_seconds, 1),
        "records": list(rows.values()),
    }


def fmt(value: float | None, ci: Any = None) -> str:
    if value is None:
        return "–"
    return f"{value:.3f}" + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def tables(result: dict[str, Any]) -> str:
    s = result["sample"]
    lines = [
        f"**Abstention on ClapNQ dev** ({s['answerable']} answerable + {s['unanswerable']} unanswerable, seed "
        f"{s['seed']}; half A = {s['half_A']} for choosing t, half B = {s['half_B']}; positive = abstained; "
        "95 % bootstrap CI)",
        "",
        "| system | n | abstain rate | precision | recall | F1 | TP/FP/FN/TN |",
        "|---|---:|---:|---|---|---|---|",
    ]
    for name, a in result["abstention"].items():
        lines.append(
            f"| {name} | {a['evaluated']} | {fmt(a['abstain_rate'])} | {fmt(a['precision'], a['precision_ci'])} | "
            f"{fmt(a['recall'], a['recall_ci'])} | {fmt(a['f1'], a['f1_ci'])} | "
            f"{a['true_positives']}/{a['false_positives']}/{a['false_negatives']}/{a['true_negatives']} |"
        )
    lines += ["", "| baseline score | t (from A) | AUROC (whole sample) | F1 llm − baseline on B [95 % CI] |",
              "|---|---:|---:|---|"]
    for feature, b in result["baselines"].items():
        d = b["f1_llm_minus_baseline_half_B"]
        ci = f" [{d['ci'][0]:+.2f}, {d['ci'][1]:+.2f}]" if d["ci"] else ""
        delta = "–" if d["delta"] is None else f"{d['delta']:+.3f}{ci}"
        lines.append(f"| {feature} | {b['t_from_A']:.3f} | {b['auroc_whole_sample']} | {delta} |")
    c = result["citations_vs_gold"]
    lines += [
        "",
        f"**Citations vs gold** (answerable questions answered: {c['answered']} of {c['answerable_questions']}; "
        f"{c['kept_citations']} kept citations; gold passage in the top 5: {fmt(c['gold_in_top5_answered'])} of the answered, "
        f"{fmt(c['gold_in_top5_all_answerable'])} of all answerable)",
        "",
        "| citation precision | micro (per citation) [95 % CI] | macro (per answer) |",
        "|---|---|---:|",
        f"| gold passage | {fmt(c['gold_passage_micro'], c.get('gold_passage_micro_ci'))} | {fmt(c['gold_passage_macro'])} |",
        f"| gold selected sentence | {fmt(c['gold_sentence_micro'], c.get('gold_sentence_micro_ci'))} | {fmt(c['gold_sentence_macro'])} |",
        "",
        "**Generator's own citation_precision** (verified / produced per response, responses where the model cited)",
        "",
        "| questions | responses | with citations | mean | p10 | p50 | p90 | = 1.0 | = 0.0 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, o in result["generator_citation_precision"].items():
        lines.append(f"| {name} | {o['responses']} | {o['with_citations_produced']} | {fmt(o['mean'])} | {fmt(o['p10'])} | "
                     f"{fmt(o['p50'])} | {fmt(o['p90'])} | {fmt(o['share_1.0'])} | {fmt(o['share_0.0'])} |")
    reasons = result["abstain_reasons"]
    keys = sorted(set(reasons["answerable"]) | set(reasons["unanswerable"]))
    lines += ["", "**abstain_reason**", "", "| reason | answerable | unanswerable |", "|---|---:|---:|"]
    for key in keys:
        lines.append(f"| {key} | {reasons['answerable'].get(key, 0)} | {reasons['unanswerable'].get(key, 0)} |")
    g = result["generate_ms"]
    lines += ["", f"generate latency p50 {g.get('p50', 0):.0f} ms, p95 {g.get('p95', 0):.0f} ms at concurrency "
              f"{result['concurrency']}; {result['repaired']} repaired; {result['errors']} errors (excluded)"]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", type=int, default=DEFAULT_PER_CLASS,
                        help=f"Questions per class (answerable, unanswerable), seeded sample (default {DEFAULT_PER_CLASS})")
    parser.add_argument("--all", action="store_true", help="All 300 + 300 questions")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--concurrency", type=int, default=2, help="Generations in flight (the LLM server has 2 slots)")
    parser.add_argument("--workdir", type=Path, default=None, help="Where the LLM server's log goes (a temp dir)")
    parser.add_argument("--index-cache", type=Path, default=REPO_ROOT / "bench-results" / ".index")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "bench-results" / "answer_quality.json")
    args = parser.parse_args()
    if args.limit < 2 and not args.all:
        parser.error("--limit must be at least 2 (each class is split in two halves)")
    started = time.perf_counter()
    try:
        result = asyncio.run(run(args))
    except DatasetNotFound as exc:
        print(f"clapnq: skipped, {exc}")
        return
    result["total_seconds"] = round(time.perf_counter() - started, 1)
    result["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print("\n" + tables(result) + "\n")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False))
    print(f"wrote {args.out} ({result['total_seconds']} s)")


if __name__ == "__main__":
    main()
