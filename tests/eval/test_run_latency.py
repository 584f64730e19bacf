"""Each run's latency is its own (issue 17): two runs with identical rankings each make and time their
own search, and a run that may share (the ablation's λ sweep) says when it reused another run's search
and leaves that time out. Real MiniLM, real index (eval/examples/tiny-beir), real reranker; the second
run's search is slowed by holding the index's real write lock while it runs, so only its time grows.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import pytest

from rag_eval.datasets import load_folder
from rag_eval.pipeline import Pipeline, open_retriever
from rag_eval.runner import summarize
from rag_eval.runs import parse_run
from rag_reranker.runtime import open_runtime as open_reranker

TINY = Path(__file__).resolve().parents[2] / "eval" / "examples" / "tiny-beir"
HOLD_S = 2.0  # far above a search under heavy load (a 0.3 s hold once lost to a 267 ms search at load 20)


@pytest.fixture(scope="module")
def embedder() -> Any:
    from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


async def test_identical_rankings_report_their_own_times(tmp_path: Path, embedder: Any) -> None:
    dataset = load_folder(TINY)
    query = dataset.query("q2")
    plain = parse_run("hybrid", top_k=5)
    chain = parse_run("hybrid+gmmr:1:scores", top_k=5)  # λ = 1 on the retriever's scores: hybrid's own order
    async with open_retriever(dataset, tmp_path / "cache", embedder, progress=False) as (retriever, _):
        async with open_reranker(use_llm=False, embedder=embedder, default_chain=[]) as reranker:
            pipeline = Pipeline(retriever, reranker.rerank)
            await pipeline.run(plain, query)  # warm-up (first search of the index)
            pipeline.clear_cache()
            first = await pipeline.run(plain, query)

            async def hold_index() -> None:
                async with retriever.runtime.lock.write():
                    await asyncio.sleep(HOLD_S)

            holder = asyncio.create_task(hold_index())
            await asyncio.sleep(0.02)  # the holder has the lock now
            second = await pipeline.run(chain, query)  # its search waits for the lock
            await holder

            assert second["ranking"] == first["ranking"]
            assert "search_reused" not in first and "search_reused" not in second
            # Each reports its own search: the second's includes the wait, the first's does not.
            assert second["latency_ms"]["retrieve"] >= HOLD_S * 1000 * 0.9
            assert first["latency_ms"]["retrieve"] < HOLD_S * 1000 * 0.9
            assert second["latency_ms"]["total"] >= second["latency_ms"]["retrieve"] + second["latency_ms"]["rerank"] - 0.01

            # A sweep run may take the cached search: then it is marked and its latency has no search.
            sweep = dataclasses.replace(parse_run("hybrid+gmmr:0.5:scores", top_k=5), share_search=True)
            shared = await pipeline.run(sweep, query)
            assert shared["search_reused"] is True
            assert "retrieve" not in shared["latency_ms"] and "total" not in shared["latency_ms"]
            assert "rerank" in shared["latency_ms"]  # its own stage, still timed
            summary = summarize(sweep, dataset, {query.id: shared})
            assert summary["searches_reused"] == 1 and "total" not in summary["latency_ms"]
            # …while a run that may share but finds nothing cached searches (and is timed) itself.
            pipeline.clear_cache()
            alone = await pipeline.run(sweep, query)
            assert "search_reused" not in alone and "retrieve" in alone["latency_ms"]
