"""Sentence vectors at ingestion (``RETRIEVER_SENTENCE_VECTORS``): what they cost and what they save.

Takes ``--docs`` documents of ``--dataset`` (HotpotQA paragraphs by default: titled, several
sentences each, as most real documents; Vaswani abstracts have no sentence punctuation, so each is
one "sentence" that equals its chunk and costs nothing) and, ``--repeats`` times, alternating:

- embed only: the chunks' embedded strings alone, length-sorted batches of the Ingestor's size, in
  a worker thread per batch (what ingestion cannot go below);
- ingest off: the retriever's ``Ingestor`` into a fresh embedded index, sentence vectors off;
- ingest pooled / embedded: the same with each mode of ``RETRIEVER_SENTENCE_VECTORS`` (pooled: from
  the chunk's own pass; embedded: each sentence string embedded on its own).

for each embedder backend of ``--backends`` (``EMBEDDER_BACKEND``: onnx, torch). Medians are compared
(``overhead = (mode - off) / off``; the issue's goal: <= 15 %), in CPU seconds of this process (all
threads: the work done, steady whatever the machine's load) and in wall seconds. Also: strings
embedded per chunk, index size on disk, and a re-ingest of every document with changed metadata
(nothing should be embedded again). Prints a table, writes JSON.

    .venv/bin/python bench/sentence_vectors.py [--dataset hotpotqa] [--docs 200] [--repeats 3]
        [--backends onnx,torch] [--modes pooled,embedded]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rag_common.embedders import Embedder
from rag_common.embedders.factory import build_embedder
from rag_common.schemas import DocumentIn
from rag_eval.harness import open_index
from rag_common.sentence_vectors import sentence_inputs
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import EMBED_BATCH_SIZE, to_source_document
from rag_retriever.settings import RetrieverSettings
from rag_common.settings import EmbedderSettings
from rag_retriever.tokens import EmbedderTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from retrieval_ingest import TimedEmbedder, add_ingest_arguments, dataset_documents, embed_only  # noqa: E402 - the same helpers as the ingest bench
from harness import write_result  # noqa: E402

GOAL_OVERHEAD = 0.15


def cpu_seconds() -> float:
    """CPU time of this process, all threads: the work done, whatever the machine's load (wall time
    on a 2-core machine shared with other jobs mostly measures the others)."""
    return time.process_time()


def directory_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


async def ingest(
    embedder: Embedder, documents: list[DocumentIn], settings: RetrieverSettings, workdir: Path | None,
    *, reingest: bool = False,
) -> dict[str, Any]:
    counting = TimedEmbedder(embedder)
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        async with open_index(Path(tmp) / "index", counting, settings) as retriever:
            cpu = cpu_seconds()
            stats = await retriever.ingest(documents)
            result = {"seconds": stats.seconds, "cpu_seconds": cpu_seconds() - cpu, "chunks": stats.chunks,
                      "strings": counting.strings, "embed_seconds": counting.seconds, "failed": stats.failed}
            if reingest:
                changed = [d.model_copy(update={"metadata": {**d.metadata, "rev": 2}}) for d in documents]
                counting.strings, started = 0, time.perf_counter()
                again = await retriever.ingest(changed)
                result["reingest"] = {"seconds": time.perf_counter() - started, "documents": again.documents,
                                      "strings_embedded": counting.strings}
        result["index_bytes"] = directory_bytes(Path(tmp) / "index")
    if result["failed"]:
        print(f"  warning: {result['failed']} documents failed to ingest", file=sys.stderr)
    return result


def measure(
    embedder: Embedder, documents: list[DocumentIn], modes: list[str], repeats: int, workdir: Path | None
) -> dict[str, Any]:
    """One backend: embed only, ingest off and each of ``modes``, alternating ``repeats`` times."""
    base = RetrieverSettings()
    settings = {mode: base.model_copy(update={"sentence_vectors": mode}) for mode in ["off", *modes]}
    chunker = Chunker(EmbedderTokenizer(embedder), base.chunk_tokens, base.chunk_overlap_tokens, base.embed_template)
    chunks = [c for d in documents for c in chunker.chunk_document(to_source_document(d))]
    texts = [chunk.embed_text or chunk.text for chunk in chunks]
    asyncio.run(embed_only(embedder, texts[:256]))  # warm-up
    ordered = sorted(texts, key=len)  # as the Ingestor batches them
    runs: dict[str, list[dict[str, Any]]] = {"embed_only": [], **{mode: [] for mode in settings}}
    for repeat in range(repeats):
        cpu = cpu_seconds()
        seconds = asyncio.run(embed_only(embedder, ordered))
        runs["embed_only"].append({"seconds": seconds, "cpu_seconds": cpu_seconds() - cpu})
        for mode, mode_settings in settings.items():
            runs[mode].append(asyncio.run(ingest(embedder, documents, mode_settings, workdir, reingest=repeat == 0)))
        print(
            f"  run {repeat + 1}: " + ", ".join(
                f"{name} {values[-1]['seconds']:.1f} s / {values[-1]['cpu_seconds']:.1f} CPU s" for name, values in runs.items()
            ) + f"; load {os.getloadavg()[0]:.2f}",
            flush=True,
        )
    median = {name: statistics.median(run["seconds"] for run in values) for name, values in runs.items()}
    cpu = {name: statistics.median(run["cpu_seconds"] for run in values) for name, values in runs.items()}
    sentence_tokens = 0
    for chunk in chunks:
        _, _, strings = sentence_inputs(chunk.text, chunk.title, chunk.section_path)
        sentence_tokens += sum(embedder.count_tokens(string) for string in dict.fromkeys(strings))
    return {
        "chunks": len(chunks),
        "median_wall_s": {name: round(value, 2) for name, value in median.items()},
        "median_cpu_s": {name: round(value, 2) for name, value in cpu.items()},
        "chunks_per_wall_s": {name: round(len(chunks) / seconds, 1) for name, seconds in median.items()},
        "chunks_per_cpu_s": {name: round(len(chunks) / seconds, 1) for name, seconds in cpu.items()},
        "overhead_vs_off_cpu": {mode: round((cpu[mode] - cpu["off"]) / cpu["off"], 4) for mode in modes},
        "overhead_vs_off_wall": {mode: round((median[mode] - median["off"]) / median["off"], 4) for mode in modes},
        "tokens": {"chunks": sum(embedder.count_tokens(text) for text in texts), "sentences": sentence_tokens},
        "strings_embedded": {name: runs[name][0]["strings"] for name in settings},
        "index_bytes": {name: runs[name][0]["index_bytes"] for name in settings},
        "reingest_changed_metadata": {name: runs[name][0]["reingest"] for name in settings},
        "runs_wall_s": {name: [round(run["seconds"], 2) for run in values] for name, values in runs.items()},
        "runs_cpu_s": {name: [round(run["cpu_seconds"], 2) for run in values] for name, values in runs.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_ingest_arguments(parser, dataset="hotpotqa", docs=200, out="sentence_vectors.json")
    parser.add_argument("--backends", default="onnx,torch", help="EMBEDDER_BACKEND values, comma-separated")
    parser.add_argument("--modes", default="pooled,embedded", help="RETRIEVER_SENTENCE_VECTORS modes besides off")
    args = parser.parse_args()

    loaded = dataset_documents(args.dataset, args.docs, "sentence_vectors")
    if loaded is None:
        return
    dataset, documents = loaded
    modes = [mode for mode in args.modes.split(",") if mode]
    result: dict[str, Any] = {
        "dataset": dataset.name, "documents": len(documents), "repeats": args.repeats,
        "embed_batch_size": EMBED_BATCH_SIZE, "goal_overhead": GOAL_OVERHEAD, "load_avg_at_start": list(os.getloadavg()),
        "backends": {},
    }
    for backend in args.backends.split(","):
        embedder = build_embedder("all-MiniLM-L6-v2", device="cpu", settings=EmbedderSettings(backend=backend))
        embedder.warm_up()
        print(f"== {backend}: {len(documents)} {dataset.name} documents; load {os.getloadavg()}", flush=True)
        result["backends"][backend] = measure(embedder, documents, modes, args.repeats, args.workdir)
    result["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]

    print("\nchunks per CPU-second (wall-clock chunks/s in brackets); overhead = extra CPU vs off:")
    print(f"| backend | chunks | embed only | ingest off | {' | '.join(f'ingest {m} | {m} vs off' for m in modes)} | index off | "
          f"{' | '.join(f'index {m}' for m in modes)} |")
    print("|---|---:|---:|---:|" + "---:|---:|" * len(modes) + "---:|" + "---:|" * len(modes))
    for backend, r in result["backends"].items():
        cpu_rate, rate, size = r["chunks_per_cpu_s"], r["chunks_per_wall_s"], r["index_bytes"]
        cells = [f"{cpu_rate[m]} ({rate[m]}) | {r['overhead_vs_off_cpu'][m]:+.1%}" for m in modes]
        print(f"| {backend} | {r['chunks']:,} | {cpu_rate['embed_only']} ({rate['embed_only']}) | {cpu_rate['off']} ({rate['off']}) | "
              f"{' | '.join(cells)} | {size['off'] / 2**20:.1f} MiB | {' | '.join(f'{size[m] / 2**20:.1f} MiB' for m in modes)} |")
    for backend, r in result["backends"].items():
        for mode in modes:
            again = r["reingest_changed_metadata"][mode]
            overhead = r["overhead_vs_off_cpu"][mode]
            verdict = "meets" if overhead <= GOAL_OVERHEAD else "MISSES"
            print(f"{backend}, {mode}: {r['strings_embedded'][mode] / r['chunks']:.2f} strings per chunk through the encoder; "
                  f"metadata re-ingest embedded {again['strings_embedded']} strings; overhead goal <= {GOAL_OVERHEAD:.0%}: "
                  f"{overhead:+.1%} CPU ({verdict})")
    print(f"load at end {result['load_avg_at_end']}")
    write_result(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
