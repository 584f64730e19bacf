"""Extractive answers through the served chain (``rag_eval.served_chain``), scored per language.

On a dataset whose questions carry reference answers (a BEIR folder with ``answers.jsonl``, e.g.
XQuAD in any language): a seeded sample of the answerable questions (``sample_questions``: the same
ids in every language of a parallel set) is answered over an index of the whole corpus, by the
generator's runtime in extractive mode with the question's language as the gateway names it. Per
question: whether the answer contains a gold answer (``contains_gold``; an abstention contains none),
whether it abstained, whether the gold passage was among the passages the generator got. Then the
off-topic check: half of the document groups are held out (``held_out_split``), the other half
indexed, and a sample of the held-out groups' questions asked against it: none can be answered from
it, so every one should be abstained on.

On a counterfactual set (``rag_eval.counterfactual``: each question's record in its metadata) every
question is also scored for the planted conflict (``rag_eval.counterfactual_scoring``), and the summary
gets a ``counterfactual`` section (all questions, and per fit / held-out half).

The summary has the shape of a ``ragctl eval`` run summary (``metrics``, ``per_query``, ``evaluated``,
``latency_ms``), so ``ragctl eval-compare`` compares two of them on one dataset (e.g. before and
after a change); :func:`compare` pairs two datasets' summaries on the question ids they share (XQuAD
Romanian against English), both with paired bootstrap CIs (``rag_eval.stats.paired_delta``).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rag_common.embedders import Embedder
from rag_eval.answer_containment import (
    answerable_questions,
    contains_gold,
    held_out_split,
    sample_questions,
    strip_markers,
)
from rag_eval.counterfactual import ConflictRecord
from rag_eval.counterfactual_scoring import conflict_table, paired_conflicts, score_response, summarise_conflicts
from rag_eval.datasets.types import Dataset, Query
from rag_eval.served_chain import ServedChain, open_served_chain
from rag_eval.stats import DEFAULT_RESAMPLES, DeltaCI, paired_bootstrap, paired_delta, percentiles

RUN = "answers-extractive"
#: Answerable questions asked when no --limit is given.
DEFAULT_LIMIT = 200
#: Held-out (off-topic) questions asked.
DEFAULT_OFF_TOPIC = 50
METRICS = ("contains", "abstained", "gold_in_passages", "in_span")


def share(values: Sequence[float], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> DeltaCI:
    """Mean of 0/1 values and its percentile-bootstrap 95 % CI (a paired bootstrap against zeros)."""
    return paired_bootstrap(list(values), [0.0] * len(values), resamples=resamples, seed=seed)


def _ci(ci: DeltaCI) -> dict[str, Any]:
    return {"value": round(ci.delta, 4), "ci95": [round(ci.low, 4), round(ci.high, 4)], "n": ci.n}


async def _ask(chain: ServedChain, query: Query, dataset: Dataset) -> dict[str, Any]:
    started = time.perf_counter()
    record: dict[str, Any] = {"query_id": query.id, "question": query.text}
    try:
        retrieved, response = await chain.answer(query.text)
    except Exception as exc:  # noqa: BLE001 - a failing question is counted and shown, the run goes on
        record["error"] = f"{type(exc).__name__}: {exc}"[:300]
        record["ms"] = round((time.perf_counter() - started) * 1000.0, 1)
        return record
    gold = dataset.relevant(query.id)
    record.update(
        language=retrieved.language.code,
        language_reason=retrieved.language.reason,
        abstained=response.abstained,
        abstain_reason=response.abstain_reason,
        answer=response.answer,
        gold_answers=list(query.answers),
        contains=(not response.abstained) and contains_gold(strip_markers(response.answer), query.answers),
        # the marked answer phrase (issue 32): None when the response marks none
        answer_span=response.answer_span.text if response.answer_span else None,
        in_span=response.answer_span is not None and contains_gold(response.answer_span.text, query.answers),
        gold_in_passages=bool(gold) and any(p.doc_id in gold for p in retrieved.passages),
        passages=[p.doc_id for p in retrieved.passages],
        cited=[c.chunk_id for c in response.citations],
        degraded=list(response.degraded),
        ms=round((time.perf_counter() - started) * 1000.0, 1),
    )
    planted = query.metadata.get("counterfactual")
    if isinstance(planted, dict):  # a counterfactual set (rag_eval.counterfactual): score the conflict too
        doc_of = {p.chunk_id: p.doc_id for p in retrieved.passages}
        # ``conflict``: the response's field where the generator reports conflicts (issue 32); absent: None
        record["conflict"] = response.model_dump().get("conflict")
        record["counterfactual"] = score_response(
            ConflictRecord.from_json(planted), answer=strip_markers(response.answer), abstained=response.abstained,
            conflict=record["conflict"], passages=[p.doc_id for p in retrieved.passages],
            cited=[doc_of.get(c.chunk_id, "") for c in response.citations],
        )
    return record


async def _ask_all(
    chain: ServedChain, queries: Sequence[Query], dataset: Dataset, label: str, echo: Callable[[str], None]
) -> list[dict[str, Any]]:
    records = []
    step = max(25, len(queries) // 8)
    started = time.perf_counter()
    for position, query in enumerate(queries, start=1):
        records.append(await _ask(chain, query, dataset))
        if position % step == 0 or position == len(queries):
            echo(f"{label}: {position}/{len(queries)}, {time.perf_counter() - started:.0f} s")
    return records


def summarise(
    dataset: str, records: Sequence[dict[str, Any]], off_topic: Sequence[dict[str, Any]], *,
    resamples: int, seed: int, facts: dict[str, Any],
) -> dict[str, Any]:
    ok = [r for r in records if "error" not in r]
    per_query = {
        r["query_id"]: {"contains": float(r["contains"]), "abstained": float(r["abstained"]),
                        "gold_in_passages": float(r["gold_in_passages"]), "in_span": float(r.get("in_span", False))}
        for r in ok
    }
    cis = {metric: share([v[metric] for v in per_query.values()], resamples=resamples, seed=seed) for metric in METRICS}
    answered = [r for r in ok if not r["abstained"]]
    off_ok = [r for r in off_topic if "error" not in r]
    off_ci = share([float(r["abstained"]) for r in off_ok], resamples=resamples, seed=seed)
    return {
        "dataset": dataset,
        "run": RUN,
        "evaluated": len(per_query),
        "errors": len(records) - len(ok),
        "error_examples": sorted({r["error"] for r in records if "error" in r})[:3],
        "metrics": {metric: round(ci.delta, 4) for metric, ci in cis.items()},
        "ci95": {metric: _ci(ci) for metric, ci in cis.items()},
        "contains_if_answered": round(sum(r["contains"] for r in answered) / len(answered), 4) if answered else None,
        "abstain_reasons": dict(Counter(r["abstain_reason"] or "(answered)" for r in ok)),
        "languages": dict(Counter(f"{r['language'] or 'neutral'} ({r['language_reason']})" for r in ok)),
        "latency_ms": {"total": percentiles(r["ms"] for r in ok)},
        "per_query": per_query,
        "off_topic": {
            "evaluated": len(off_ok),
            "errors": len(off_topic) - len(off_ok),
            "abstained": _ci(off_ci),
            "abstain_reasons": dict(Counter(r["abstain_reason"] or "(answered)" for r in off_ok)),
            "per_query": {r["query_id"]: {"abstained": float(r["abstained"])} for r in off_ok},
        },
        **({"counterfactual": summarise_conflicts([r["counterfactual"] for r in ok if "counterfactual" in r])}
           if any("counterfactual" in r for r in ok) else {}),
        **facts,
        "questions": list(records),
        "off_topic_questions": list(off_topic),
    }


async def evaluate_answers(
    dataset: Dataset,
    embedder: Embedder,
    cache_dir: Path,
    *,
    limit: int | None = DEFAULT_LIMIT,
    off_topic: int = DEFAULT_OFF_TOPIC,
    seed: int = 0,
    resamples: int = DEFAULT_RESAMPLES,
    echo: Callable[[str], None] = print,
    progress: bool = False,
) -> dict[str, Any]:
    """The summary described in the module docstring. Raises ValueError when no question has answers."""
    pool = answerable_questions(dataset)
    if not pool:
        raise ValueError(f"{dataset.name}: no question has reference answers (answers.jsonl) to score answers against")
    questions = sample_questions(pool, limit, seed)
    async with open_served_chain(dataset, cache_dir, embedder, progress=progress) as (chain, index):
        echo(f"{dataset.name}: answering {len(questions)} of {len(pool)} answerable questions "
             f"({index['documents']} documents, {index['chunks']} chunks)")
        records = await _ask_all(chain, questions, dataset, f"{dataset.name} answers", echo)
        facts: dict[str, Any] = {
            "settings": {
                "limit": limit, "seed": seed, "generator_mode": chain.generator_mode,
                "search_mode": chain.policy.search_mode, "fusion": chain.retriever.settings.hybrid_normalization,
                "candidates": chain.policy.search_depth(chain.policy.default_top_k), "top_k": chain.policy.default_top_k,
                "rerank_chain": chain.reranker.default_chain, "embedder": embedder.model_id,
                "languages": chain.languages.languages,
            },
            "index": {k: v for k, v in index.items() if k != "fingerprint"},
        }
    off_records: list[dict[str, Any]] = []
    if off_topic > 0:
        try:
            split = held_out_split(dataset, seed)
        except ValueError as exc:
            echo(f"{dataset.name}: no off-topic check, {exc}")
            split = None
        if split is not None and split.off_topic:
            asked = sample_questions(split.off_topic, off_topic, seed)
            async with open_served_chain(split.kept, cache_dir, embedder, progress=progress) as (chain, index):
                echo(f"{dataset.name}: {len(asked)} off-topic questions against {index['documents']} documents "
                     f"({len(split.held_out_groups)} document groups held out)")
                off_records = await _ask_all(chain, asked, dataset, f"{dataset.name} off-topic", echo)
            facts["off_topic_split"] = {"held_out_groups": len(split.held_out_groups), "kept_documents": len(split.kept.corpus),
                                        "off_topic_pool": len(split.off_topic)}
    return summarise(dataset.name, records, off_records, resamples=resamples, seed=seed, facts=facts)


def write_summary(summary: dict[str, Any], reports: Path) -> Path:
    path = Path(reports) / summary["dataset"] / f"{RUN}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def load_summary(path: Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"missing answers summary {path}")
    summary = json.loads(path.read_text(encoding="utf-8"))
    if summary.get("run") != RUN:
        raise ValueError(f"{path} is not an answers summary (run {summary.get('run')!r}, expected {RUN!r})")
    return summary


def compare(summary: dict[str, Any], baseline: dict[str, Any], *, resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> dict[str, Any]:
    """``summary`` − ``baseline`` per metric on the question ids both asked (paired bootstrap 95 % CIs),
    the off-topic abstention too; works across datasets that share ids (XQuAD's languages)."""
    out: dict[str, Any] = {"system": summary["dataset"], "baseline": baseline["dataset"]}
    for metric in METRICS:
        # a summary from before answer spans existed marked none: in_span 0
        ci = paired_delta({q: v.get(metric, 0.0) for q, v in summary["per_query"].items()},
                          {q: v.get(metric, 0.0) for q, v in baseline["per_query"].items()}, resamples=resamples, seed=seed)
        out[metric] = ci.to_dict()
    off = paired_delta({q: v["abstained"] for q, v in summary["off_topic"]["per_query"].items()},
                       {q: v["abstained"] for q, v in baseline["off_topic"]["per_query"].items()},
                       resamples=resamples, seed=seed)
    out["off_topic_abstained"] = off.to_dict()
    if "counterfactual" in summary and "counterfactual" in baseline:  # the planted conflicts, held out
        out["counterfactual_held_out"] = paired_conflicts(
            _conflict_rows(summary), _conflict_rows(baseline), split="held-out", resamples=resamples, seed=seed)
    return out


def _conflict_rows(summary: dict[str, Any]) -> dict[str, Any]:
    return {r["query_id"]: r["counterfactual"] for r in summary["questions"] if "counterfactual" in r}


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def _pct_ci(cell: dict[str, Any]) -> str:
    if not cell["n"]:
        return "–"
    low, high = cell["ci95"]
    return f"{100 * cell['value']:.1f} % [{100 * low:.1f}, {100 * high:.1f}]"


def table(summaries: Sequence[dict[str, Any]]) -> str:
    """One Markdown row per dataset: contains gold [95 % CI], abstained, gold passage given, off-topic abstained."""
    lines = [
        "| dataset | n | contains gold [95% CI] | gold in answer span | abstained [95% CI] | gold passage in top k | off-topic abstained [95% CI] (n) |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for s in summaries:
        off = s["off_topic"]
        lines.append(
            f"| {s['dataset']} | {s['evaluated']} | {_pct_ci(s['ci95']['contains'])} | {_pct(s['metrics'].get('in_span'))} "
            f"| {_pct_ci(s['ci95']['abstained'])} "
            f"| {_pct(s['metrics']['gold_in_passages'])} | {_pct_ci(off['abstained'])} ({off['evaluated']}) |"
        )
    conflicts = [(s["dataset"], s["counterfactual"]) for s in summaries if "counterfactual" in s]
    for split in ("all", "held-out") if conflicts else ():
        lines += ["", conflict_table(conflicts, split)]
    return "\n".join(lines)


def comparison_lines(found: dict[str, Any]) -> str:
    def cell(d: dict[str, Any]) -> str:
        if not d["n"]:
            return "–"
        text = f"{100 * d['delta']:+.1f} [{100 * d['low']:+.1f}, {100 * d['high']:+.1f}] pts (n={d['n']})"
        return f"{text} (noise)" if d["noise"] else text

    line = (
        f"{found['system']} − {found['baseline']}: contains gold {cell(found['contains'])}; abstained "
        f"{cell(found['abstained'])}; gold passage in top k {cell(found['gold_in_passages'])}; off-topic abstained "
        f"{cell(found['off_topic_abstained'])}; gold in answer span {cell(found['in_span'])}"
    )
    if "counterfactual_held_out" in found:
        cf = found["counterfactual_held_out"]
        line += (f"; held-out planted: only false {cell(cf['states_only_false'])}, true {cell(cf['states_true'])}, "
                 f"conflict detected {cell(cf['conflict_detected'])}; control false alarms {cell(cf['control_false_alarms'])}")
    return line
