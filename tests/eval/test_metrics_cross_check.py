"""Our ranking metrics against ir-measures (trec_eval through pytrec_eval) on random rankings.

Both use trec_eval's conventions (linear-gain nDCG with the ideal ranking of all judged grades,
MAP cut at k dividing by all relevant documents, Precision@k dividing by k), so per query the values
must agree to floating-point precision.
"""

from __future__ import annotations

import numpy as np
import pytest

from rag_eval.metrics import METRICS

ir_measures = pytest.importorskip("ir_measures")

KS = (1, 3, 5, 10, 20)
#: our name → the ir-measures measure (called with @k)
PAIRS = {
    "ndcg": ir_measures.nDCG,
    "map": ir_measures.AP,
    "precision": ir_measures.P,
    "recall": ir_measures.R,
    "mrr": ir_measures.RR,
    "hit": ir_measures.Success,
}


def random_collection(seed: int = 11, queries: int = 40, docs: int = 60) -> tuple[dict, dict]:
    rng = np.random.default_rng(seed)
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, list[str]] = {}
    for q in range(queries):
        judged = rng.choice(docs, size=int(rng.integers(1, 15)), replace=False)
        grades = rng.integers(0, 4, size=len(judged))
        grades[0] = max(grades[0], 1)  # at least one relevant document per query
        qrels[f"q{q}"] = {f"d{d}": int(g) for d, g in zip(judged, grades)}
        run[f"q{q}"] = [f"d{d}" for d in rng.permutation(docs)[: int(rng.integers(0, 30))]]
    return qrels, run


def test_metrics_agree_with_ir_measures() -> None:
    qrels, run = random_collection()
    # ir-measures wants scores: strictly decreasing by rank, so there are no ties to break.
    scored = {q: {doc: float(len(ranking) - i) for i, doc in enumerate(ranking)} for q, ranking in run.items()}
    measures = [measure @ k for measure in PAIRS.values() for k in KS]
    theirs: dict[tuple[str, str], float] = {}
    for metric in ir_measures.iter_calc(measures, qrels, {q: s for q, s in scored.items() if s}):
        theirs[(metric.query_id, str(metric.measure))] = metric.value
    checked = 0
    for name, measure in PAIRS.items():
        for k in KS:
            for query_id, ranking in run.items():
                ours = METRICS[name](ranking, qrels[query_id], k)
                # Queries with an empty ranking are absent from trec_eval's per-query output: 0 for all.
                expected = theirs.get((query_id, str(measure @ k)), 0.0)
                assert ours == pytest.approx(expected, abs=1e-9), (name, k, query_id)
                checked += 1
    assert checked == len(PAIRS) * len(KS) * len(run)
