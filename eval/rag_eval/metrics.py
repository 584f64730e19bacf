"""Ranking metrics, implemented once. A ranking is a sequence of document ids, best first; the
judgements of one query are ``{doc_id: grade}`` (grade > 0 = relevant, 0 or below = not relevant;
documents that are not judged count as not relevant).

Conventions (those of ``trec_eval`` unless said otherwise):

- A document id that appears again lower in the same ranking is ignored there (only its first,
  best position counts), so duplicates cannot inflate any metric.
- ``k`` is a cut-off on the ranking; a ranking shorter than ``k`` is not padded, except that
  Precision@k always divides by ``k``.
- ``R`` = number of relevant documents of the query.

=================  ===============================================================================
``precision@k``    relevant in the top k / k
``recall@k``       relevant in the top k / R
``hit@k``          1 if at least one relevant document is in the top k, else 0
``mrr@k``          1 / rank of the first relevant document in the top k, 0 if none
``ndcg@k``         DCG@k / IDCG@k, DCG = sum over ranks i <= k of gain(grade_i) / log2(i + 1);
                   gain is the grade itself (``linear``, as trec_eval) or 2^grade - 1
                   (``exponential``); IDCG = DCG of all judged grades sorted best first
``map@k``          average precision cut at k: sum of precision@i over the ranks i <= k that hold a
                   relevant document, divided by R (trec_eval's ``map_cut``; so a query with more
                   than k relevant documents cannot reach 1)
``coverage@k``     1 if *every* relevant document is in the top k, else 0 ("set coverage": did the
                   retriever bring all the evidence a multi-hop question needs?)
``f1@k`` ``f2@k``  F-beta of precision@k and recall@k: (1 + b^2) P R / (b^2 P + R), 0 when P = R = 0;
``f3@k``           beta = 1, 2, 3 (higher beta weighs recall more: what a generator given k passages
                   needs is mostly that the evidence is among them)
=================  ===============================================================================

**No relevant documents.** Recall, nDCG, MAP, coverage and F-beta divide by R (or by IDCG, which is 0), so
for a query with no relevant document they are undefined and return ``None``. Precision, hit and
MRR are well defined there (nothing relevant was found) and return 0.0. :func:`evaluate` averages
every metric over the queries that have at least one relevant document only, and reports how many
queries it skipped, as trec_eval does; unanswerable questions are judged by other means.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

Ranking = Sequence[str]
Judgements = Mapping[str, int]
Gain = Literal["linear", "exponential"]


def _check_k(k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, got {k!r}")


def _top(ranking: Ranking, k: int) -> list[str]:
    """The first ``k`` distinct ids of ``ranking``."""
    _check_k(k)
    seen: set[str] = set()
    top: list[str] = []
    for doc_id in ranking:
        if doc_id in seen:
            continue
        seen.add(doc_id)
        top.append(doc_id)
        if len(top) == k:
            break
    return top


def _relevant(judgements: Judgements) -> set[str]:
    return {doc_id for doc_id, grade in judgements.items() if grade > 0}


def precision_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float:
    relevant = _relevant(judgements)
    return sum(doc_id in relevant for doc_id in _top(ranking, k)) / k


def recall_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float | None:
    relevant = _relevant(judgements)
    top = _top(ranking, k)
    if not relevant:
        return None
    return sum(doc_id in relevant for doc_id in top) / len(relevant)


def hit_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float:
    relevant = _relevant(judgements)
    return 1.0 if any(doc_id in relevant for doc_id in _top(ranking, k)) else 0.0


def mrr_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float:
    relevant = _relevant(judgements)
    for rank, doc_id in enumerate(_top(ranking, k), start=1):
        if doc_id in relevant:
            return 1.0 / rank
    return 0.0


def _gain(grade: int, gain: Gain) -> float:
    if grade <= 0:
        return 0.0
    if gain == "linear":
        return float(grade)
    if gain == "exponential":
        return 2.0**grade - 1.0
    raise ValueError(f"unknown gain {gain!r}; use 'linear' or 'exponential'")


def dcg_at_k(grades: Sequence[int], k: int, gain: Gain = "linear") -> float:
    """DCG of grades listed in rank order (rank 1 first)."""
    _check_k(k)
    return sum(_gain(grade, gain) / math.log2(rank + 1) for rank, grade in enumerate(grades[:k], start=1))


def ndcg_at_k(ranking: Ranking, judgements: Judgements, k: int, gain: Gain = "linear") -> float | None:
    top = _top(ranking, k)
    ideal = dcg_at_k(sorted(judgements.values(), reverse=True), k, gain)
    if ideal == 0.0:
        return None
    return dcg_at_k([judgements.get(doc_id, 0) for doc_id in top], k, gain) / ideal


def average_precision_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float | None:
    relevant = _relevant(judgements)
    top = _top(ranking, k)
    if not relevant:
        return None
    found = 0
    total = 0.0
    for rank, doc_id in enumerate(top, start=1):
        if doc_id in relevant:
            found += 1
            total += found / rank
    return total / len(relevant)


def coverage_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float | None:
    relevant = _relevant(judgements)
    top = _top(ranking, k)
    if not relevant:
        return None
    return 1.0 if relevant <= set(top) else 0.0


def fbeta_at_k(ranking: Ranking, judgements: Judgements, k: int, beta: float = 1.0) -> float | None:
    """F-beta of precision@k and recall@k (precision divides by k, recall by R, as above)."""
    if beta <= 0:
        raise ValueError(f"beta must be positive, got {beta!r}")
    recall = recall_at_k(ranking, judgements, k)
    if recall is None:
        return None
    precision = precision_at_k(ranking, judgements, k)
    if precision == 0.0 and recall == 0.0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall)


def f1_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float | None:
    return fbeta_at_k(ranking, judgements, k, 1.0)


def f2_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float | None:
    return fbeta_at_k(ranking, judgements, k, 2.0)


def f3_at_k(ranking: Ranking, judgements: Judgements, k: int) -> float | None:
    return fbeta_at_k(ranking, judgements, k, 3.0)


MetricFunction = Callable[[Ranking, Judgements, int], "float | None"]

#: Metric name (as used in ``"name@k"``) → per-query function.
METRICS: dict[str, MetricFunction] = {
    "precision": precision_at_k,
    "recall": recall_at_k,
    "hit": hit_at_k,
    "mrr": mrr_at_k,
    "ndcg": ndcg_at_k,
    "map": average_precision_at_k,
    "coverage": coverage_at_k,
    "f1": f1_at_k,
    "f2": f2_at_k,
    "f3": f3_at_k,
}

#: The cut-offs reported by default.
DEFAULT_KS: tuple[int, ...] = (1, 3, 5, 10, 20)


def metric_grid(names: Iterable[str] = tuple(METRICS), ks: Iterable[int] = DEFAULT_KS) -> list[str]:
    """Every ``name@k`` of ``names`` × ``ks``, name-major: ``["ndcg@1", "ndcg@3", ..., "mrr@1", ...]``."""
    ks = sorted(set(ks))
    for k in ks:
        _check_k(k)
    unknown = [name for name in names if name not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; known: {', '.join(METRICS)}")
    return [f"{name}@{k}" for name in names for k in ks]


_SPEC = re.compile(r"^([a-z_][a-z0-9_]*)@(\d+)$")


def parse_metric(spec: str) -> tuple[str, int]:
    """``"ndcg@10"`` → ``("ndcg", 10)``."""
    match = _SPEC.match(spec.strip().lower())
    if not match or match.group(1) not in METRICS or int(match.group(2)) < 1:
        raise ValueError(f"bad metric {spec!r}: expected name@k with name in {', '.join(METRICS)} and k >= 1")
    return match.group(1), int(match.group(2))


def score(spec: str, ranking: Ranking, judgements: Judgements) -> float | None:
    """One metric of one query, e.g. ``score("recall@5", ranking, {"d1": 1})``."""
    name, k = parse_metric(spec)
    return METRICS[name](ranking, judgements, k)


@dataclass(slots=True)
class Evaluation:
    """Means over the evaluated queries (those with at least one relevant document)."""

    means: dict[str, float]
    per_query: dict[str, dict[str, float]]
    evaluated: int
    #: Query ids of the run or the qrels that were left out because they have no relevant document.
    skipped: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, object]:
        return {"means": self.means, "evaluated": self.evaluated, "skipped": len(self.skipped)}


def evaluate(
    run: Mapping[str, Ranking],
    qrels: Mapping[str, Judgements],
    metrics: Iterable[str] = ("ndcg@10", "mrr@10", "recall@100"),
) -> Evaluation:
    """Mean of each metric (``"name@k"``) over the queries of ``qrels`` with a relevant document.

    A query that has relevant documents but no entry in ``run`` counts with an empty ranking (it
    scores 0); queries without any relevant document are skipped and listed in ``skipped``.
    """
    specs = [(spec, *parse_metric(spec)) for spec in metrics]
    query_ids = list(dict.fromkeys([*qrels, *run]))
    per_query: dict[str, dict[str, float]] = {}
    skipped: list[str] = []
    for query_id in query_ids:
        judgements = qrels.get(query_id, {})
        if not _relevant(judgements):
            skipped.append(query_id)
            continue
        ranking = run.get(query_id, ())
        values: dict[str, float] = {}
        for spec, name, k in specs:
            value = METRICS[name](ranking, judgements, k)
            assert value is not None  # only None without relevant documents
            values[spec] = value
        per_query[query_id] = values
    means = {
        spec: (sum(values[spec] for values in per_query.values()) / len(per_query)) if per_query else 0.0
        for spec, _, _ in specs
    }
    return Evaluation(means=means, per_query=per_query, evaluated=len(per_query), skipped=skipped)
