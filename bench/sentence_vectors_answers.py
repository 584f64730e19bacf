"""Stored sentence vectors at answer time, on the demo corpus: how many answers change, how much work is saved.

Ingests the repository's docs/*.md (as Markdown, title = file name) into a fresh embedded index with
sentence vectors of ``--mode`` (``RETRIEVER_SENTENCE_VECTORS``: pooled, the default, or embedded, whose
vectors are the ones the answerer would compute, so its answers must be identical), then for each question searches (hybrid, top 5, with the stored vectors, as
the gateway asks) and runs the generator's ``ExtractiveAnswerer`` twice on the same passages:
with their stored sentence vectors and with them stripped (what the generator did before, and does
for an index without them). Reports how many answers (text, chosen sentence ids, candidate order)
are identical and how many keep the same best sentence, the largest score difference, the strings
embedded at answer time, and the answerer's time p50 both ways (alternating, ``--rounds`` times). Writes JSON.

    .venv/bin/python bench/sentence_vectors_answers.py [--mode pooled] [--rounds 5] [--out bench-results/sentence_vectors_answers.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from rag_common.embedders import Embedder
from rag_common.embedders.factory import build_embedder
from rag_common.identity import Identity
from rag_common.schemas import DocumentIn, SearchRequest
from rag_eval.harness import open_index
from rag_generator.extractive_answerer import ExtractiveAnswerer
from rag_generator.settings import GeneratorSettings
from rag_retriever.backends.base import AccessFilter
from rag_retriever.settings import RetrieverSettings
from harness import describe, result_path, write_result

REPO_ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "What does the reranker service do?",
    "Where are conversations stored?",
    "How long are conversations kept?",
    "What happens when a downstream service is down?",
    "Which status code does the gateway return on a timeout?",
    "Which library provides BM25 in the embedded backend?",
    "What is the answerability gate?",
    "How are documents chunked?",
    "What does the embed template do?",
    "How does hybrid search fuse dense and BM25 results?",
    "What is HyDE?",
    "How is access control enforced in search?",
    "What does the refiner do with follow-up questions?",
    "Which model embeds the chunks?",
    "How are citations checked in generative mode?",
    "What is graph retrieval?",
]


class CountingEmbedder:
    def __init__(self, inner: Embedder) -> None:
        self._inner = inner
        self.documents = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.documents += len(texts)
        return self._inner.encode_documents(texts)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    embedder = build_embedder("all-MiniLM-L6-v2", device="cpu")
    embedder.warm_up()
    documents = [
        DocumentIn(id=path.name, text=path.read_text(encoding="utf-8"), title=path.stem, source=path.name,
                   metadata={"content_type": "text/markdown"})
        for path in sorted((REPO_ROOT / "docs").glob("*.md"))
    ]
    settings = RetrieverSettings().model_copy(update={"sentence_vectors": args.mode})
    access = AccessFilter.of(Identity(tenant="default", user="bench"))
    counting = CountingEmbedder(embedder)
    answerer = ExtractiveAnswerer.of(GeneratorSettings(), counting)
    with tempfile.TemporaryDirectory() as tmp:
        async with open_index(Path(tmp) / "index", embedder, settings) as retriever:
            started = time.perf_counter()
            await retriever.ingest(documents)
            ingest_s = time.perf_counter() - started
            service = retriever.runtime.search
            found = []
            for question in QUESTIONS:
                request = SearchRequest(query=question, top_k=5, include_embeddings=True, include_sentence_vectors=True)
                found.append((question, await service.search(request, access)))

    identical, same_best, max_diff, embedded = 0, 0, 0.0, {"stored": 0, "stripped": 0}
    changed: list[dict[str, str]] = []  # questions whose best sentence differs, both answers
    times: dict[str, list[float]] = {"stored": [], "stripped": []}
    for question, response in found:
        stored = response.passages
        stripped = [p.model_copy(update={"sentence_vectors": None}) for p in stored]
        results = {}
        for round_ in range(args.rounds):
            for name, passages in (("stored", stored), ("stripped", stripped)):
                counting.documents = 0
                began = time.perf_counter()
                results[name] = answerer.answer(question, passages, query_vector=response.query_embedding)
                times[name].append((time.perf_counter() - began) * 1000)
                if round_ == 0:
                    embedded[name] += counting.documents
        a, b = results["stored"], results["stripped"]
        same = (a.text, [u.id for u in a.sentences], [c.unit.id for c in a.candidates]) == (
            b.text, [u.id for u in b.sentences], [c.unit.id for c in b.candidates]
        )
        identical += same
        if a.best and b.best and a.best.unit.id == b.best.unit.id:
            same_best += 1
        else:
            changed.append({"question": question, "with_stored": a.text, "embedded_at_answer_time": b.text})
        max_diff = max([max_diff, *(abs(x.score - y.score) for x, y in zip(a.candidates, b.candidates))])
    return {
        "documents": len(documents),
        "ingest_s_with_sentence_vectors": round(ingest_s, 1),
        "questions": len(QUESTIONS),
        "sentence_vectors": args.mode,
        "identical_answers": identical,
        "same_best_sentence": same_best,
        "best_sentence_changed": changed,
        "max_score_difference": max_diff,
        "strings_embedded_at_answer_time": embedded,
        "answerer_ms_p50": {name: describe(values, ("p50",), digits=1)["p50"] for name, values in times.items()},
        "rounds": args.rounds,
        "load_avg_at_end": [round(x, 2) for x in os.getloadavg()],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=["pooled", "embedded"], default="pooled", help="RETRIEVER_SENTENCE_VECTORS")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=result_path("sentence_vectors_answers"))
    args = parser.parse_args()
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    p50 = result["answerer_ms_p50"]
    print(
        f"\n{result['sentence_vectors']}: {result['identical_answers']}/{result['questions']} answers identical, "
        f"{result['same_best_sentence']} with the same best sentence (max score difference "
        f"{result['max_score_difference']:.1e}); extractive answerer p50 {p50['stripped']} ms → {p50['stored']} ms "
        f"with stored vectors; strings embedded at answer time {result['strings_embedded_at_answer_time']}"
    )
    write_result(args.out, result)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
