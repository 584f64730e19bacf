"""What learned fusion adds to a hybrid search, on the evaluation's cached indexes of real datasets.

For each dataset: the retriever's runtime over its cached index (``ragctl eval`` builds it under
``<reports>/.index``), one search service with min-max fusion and one with the shipped learned
fusion model; every question is searched by both, **alternately** (so machine load hits both
alike), ``--repeats`` times after a warm-up. The query embedding is computed once per question and
served by a stub, so only the search is timed (``timings_ms["search"]``: the first pass, and for
learned fusion the second hop's follow-ups, the features and the scoring). Prints p50 / p95 per
service and of the per-question difference; writes JSON. Nothing is asserted.

    .venv/bin/python bench/learned_fusion_latency.py [-d hotpotqa -d mtrag-un] [--top-k 20] [--repeats 3]
        [--reports reports] [--out bench-results/learned_fusion_latency.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.schemas import SearchRequest
from rag_eval.datasets import load_dataset
from rag_eval.harness import EVAL_ACCESS
from rag_eval.pipeline import open_retriever
from rag_eval.runner import select_queries
from rag_retriever.backends.base import FusionSettings
from rag_retriever.learned_fusion import SHIPPED_MODEL, FusionModel
from rag_retriever.runtime import build_embedder
from rag_retriever.settings import RetrieverSettings
from harness import describe, result_path, write_result

REPO_ROOT = Path(__file__).resolve().parents[1]


class PrecomputedEmbedder:
    """The real embedder's query vectors, computed once per question, served without model time."""

    def __init__(self, real: Any, queries: list[str]) -> None:
        self._real = real
        self._vectors = dict(zip(queries, real.encode_queries(queries)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._vectors[text] for text in texts])


async def measure(name: str, reports: Path, top_k: int, repeats: int) -> dict[str, Any]:
    dataset = load_dataset(name)
    dataset.name = name
    texts = [query.text for query in select_queries(dataset, None, require_gold=True)]
    real = build_embedder(RetrieverSettings())
    real.warm_up()
    model = FusionModel.load(SHIPPED_MODEL)
    async with open_retriever(dataset, reports / ".index", real, progress=False) as (retriever, _):
        runtime = retriever.runtime
        stub = PrecomputedEmbedder(real, texts)
        weight = runtime.settings.hybrid_dense_weight
        services = {
            "min_max": runtime.search_with(FusionSettings("min_max", weight)),
            "learned": runtime.search_with(FusionSettings("min_max", weight), learned=model),
        }
        for service in services.values():
            service._embedder = stub  # the search only: query embedding is not what is compared
        times: dict[str, list[float]] = {key: [] for key in services}
        differences: list[float] = []
        for repeat in range(repeats + 1):
            for text in texts:
                request = SearchRequest(query=text, top_k=top_k, mode="hybrid")
                taken = {}
                for key, service in services.items():
                    response = await service.search(request, EVAL_ACCESS)
                    taken[key] = response.timings_ms["search"]
                if repeat > 0:  # the first pass over the questions warms the index up
                    for key, value in taken.items():
                        times[key].append(value)
                    differences.append(taken["learned"] - taken["min_max"])
    return {"dataset": name, "questions": len(texts), "repeats": repeats, "top_k": top_k,
            "search_ms": {key: describe(values, digits=2) for key, values in times.items()},
            "added_ms": describe(differences, digits=2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-d", "--dataset", action="append", default=None)
    parser.add_argument("--top-k", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--reports", type=Path, default=REPO_ROOT / "reports")
    parser.add_argument("--out", type=Path, default=result_path("learned_fusion_latency"))
    args = parser.parse_args()
    results = [asyncio.run(measure(name, args.reports, args.top_k, args.repeats))
               for name in args.dataset or ["hotpotqa", "mtrag-un"]]
    for result in results:
        print(json.dumps(result))
    write_result(args.out, results)


if __name__ == "__main__":
    main()
