"""The retriever killed with SIGKILL in the middle of ingest requests, then the ingest run again: the
index holds exactly what a build without kills holds (``bench/ingest_chaos.py``, small: 160
generated documents, 3 kills; ``make ingest-chaos`` runs 5,000 Vaswani documents and 20 kills).

Real retriever processes (the MiniLM embedder, the embedded backend) behind their HTTP API. Not
asserted here: that the approximate (HNSW) dense top-10 is identical, since it depends on the order
vectors entered the graph and the chaos build re-inserts the lost requests last; the exact dense
top-10 and the stored vectors are asserted identical instead.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from ingest_chaos import run, synthetic_corpus  # noqa: E402

CONTENT_GOALS = (
    "chaos_index_consistent",
    "same_chunk_count",
    "same_chunks",
    "no_duplicate_chunks",
    "rerun_failed_nothing",
    "identical_vectors",
    "identical_exact_dense_top10",
    "identical_bm25_top10",
)


def test_an_ingest_killed_three_times_and_run_again_equals_a_clean_build(tmp_path: Path) -> None:
    documents, queries = synthetic_corpus(160, seed=14)

    report = run(documents, queries, kills=3, batch=20, seed=14, workdir=tmp_path, control=False)

    clean, chaos, rerun = report["passes"]
    assert chaos["kills"] >= 1, report["settings"]
    # Each kill cost exactly the request it landed in, and the re-run wrote exactly what those lost.
    assert chaos["failed_requests"] == chaos["kills"]
    assert clean["documents_written"] == rerun["documents_written"] + rerun["documents_skipped"] == len(documents)
    assert rerun["documents_written"] <= 20 * chaos["failed_requests"]
    assert {goal: report["goals"][goal] for goal in CONTENT_GOALS} == dict.fromkeys(CONTENT_GOALS, True), report["comparison"]
