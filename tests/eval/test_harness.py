"""The benchmark harness: the retriever's own runtime over an embedded index (settings forced to the
embedded backend in the given folder), one real run over a tiny dataset (real MiniLM embedder, real
embedded backend) scored with the metrics, and the pipeline's cached index (ingested once, reused
while corpus, embedder and chunking are unchanged)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_eval.datasets import Dataset, load_generic
from rag_eval.harness import FUSIONS, dedupe_doc_ids, embedded_settings, open_index
from rag_eval.metrics import evaluate
from rag_eval.pipeline import corpus_fingerprint, open_retriever
from rag_retriever.backends.base import FusionSettings
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.settings import RetrieverSettings


def test_embedded_settings_force_the_embedded_backend_in_the_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RETRIEVER_BACKEND", "opensearch")
    monkeypatch.setenv("RETRIEVER_CHUNK_TOKENS", "120")
    monkeypatch.setenv("RETRIEVER_HYBRID_DENSE_WEIGHT", "0.7")
    from_env = embedded_settings(tmp_path / "index")
    assert (from_env.backend, from_env.index_dir) == ("embedded", str(tmp_path / "index"))
    assert (from_env.chunk_tokens, from_env.hybrid_dense_weight) == (120, 0.7)  # the rest is the environment's
    given = RetrieverSettings(backend="opensearch", chunk_tokens=90, chunk_overlap_tokens=10)
    forced = embedded_settings(tmp_path / "other", given)
    assert (forced.backend, forced.index_dir, forced.chunk_tokens) == ("embedded", str(tmp_path / "other"), 90)
    assert given.backend == "opensearch"  # the caller's settings are not changed


def test_dedupe_keeps_best_rank() -> None:
    assert dedupe_doc_ids(["a", "b", "a", "c", "b"]) == ["a", "b", "c"]


@pytest.fixture(scope="module")
def embedder() -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


async def test_real_retriever_on_a_tiny_dataset(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    corpus = [
        {"_id": "bees", "title": "Honeybees", "text": "Honeybees tell each other where flowers are with the waggle dance."},
        {"_id": "tcp", "title": "TCP", "text": "TCP opens a connection with a three-way handshake: SYN, SYN-ACK, ACK."},
        {"_id": "bread", "title": "Sourdough", "text": "Sourdough bread rises thanks to wild yeast in the starter."},
        {"_id": "volcano", "title": "Volcanoes", "text": "A volcano erupts when magma rises through the crust."},
    ]
    queries = [
        {"_id": "q1", "text": "how do bees communicate the location of flowers"},
        {"_id": "q2", "text": "three-way handshake of a network connection"},
    ]
    (tmp_path / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (tmp_path / "queries.jsonl").write_text("".join(json.dumps(r) + "\n" for r in queries))
    (tmp_path / "qrels.tsv").write_text("q1\tbees\t1\nq2\ttcp\t1\n")
    dataset = load_generic(tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl", tmp_path / "qrels.tsv")

    settings = RetrieverSettings(hybrid_dense_weight=0.3, hybrid_normalization="learned")
    async with open_index(tmp_path / "index", embedder, settings) as retriever:
        assert isinstance(retriever.backend, EmbeddedBackend) and retriever.embedder is embedder
        assert retriever.settings.index_dir == str(tmp_path / "index")
        # One search service per fusion, each with the settings' dense weight (private: no public accessor).
        assert {name: service._fusion for name, service in retriever.search_services.items()} == {
            **{fusion: FusionSettings(method=fusion, dense_weight=0.3) for fusion in FUSIONS},
            # The served learned fusion (when set), over a min-max first pass.
            "learned": FusionSettings(method="min_max", dense_weight=0.3),
        }
        stats = await retriever.ingest_corpus(dataset.corpus, source="tiny")
        assert (stats.documents, stats.chunks, stats.failed) == (4, 4, 0)
        for mode, fusion in [("bm25", "min_max"), ("dense", "min_max"), ("hybrid", "min_max"), ("hybrid", "rrf")]:
            run = await retriever.run(dataset, mode, 3, fusion)
            result = evaluate(run, dataset.qrels, ["hit@1", "recall@3"])
            assert result.evaluated == 2
            assert result.means == {"hit@1": 1.0, "recall@3": 1.0}, (mode, fusion, run)
        with pytest.raises(ValueError, match="top_k"):
            await retriever.search("bees", "dense", 201)
    assert (tmp_path / "index").is_dir()


def tiny_dataset(folder: Path, extra: str = "") -> Dataset:
    folder.mkdir(parents=True, exist_ok=True)
    corpus = [
        {"_id": "bees", "title": "Honeybees", "text": "Honeybees tell each other where flowers are with the waggle dance."},
        {"_id": "tcp", "title": "TCP", "text": "TCP opens a connection with a three-way handshake: SYN, SYN-ACK, ACK." + extra},
    ]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(r) + "\n" for r in corpus))
    (folder / "queries.jsonl").write_text(json.dumps({"_id": "q1", "text": "how do bees find flowers"}) + "\n")
    (folder / "qrels.tsv").write_text("q1\tbees\t1\n")
    dataset = load_generic(folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels.tsv")
    dataset.name = "tiny"
    return dataset


async def test_cached_index_is_ingested_once_and_reused(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    dataset = tiny_dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    async with open_retriever(dataset, cache, embedder, progress=False) as (retriever, info):
        assert info["reused"] is False and (info["documents"], info["chunks"], info["failed"]) == (2, 2, 0)
        assert info["fingerprint"] == corpus_fingerprint(dataset, embedder, RetrieverSettings())
        assert info["embedder"] == embedder.model_id
        first = await retriever.search("bees and flowers", "hybrid", 2)
    (folder,) = cache.iterdir()
    assert folder.name == f"tiny-{info['fingerprint'][:16]}" and (folder / "ingested.json").is_file()

    async with open_retriever(dataset, cache, embedder, progress=False) as (retriever, again):
        assert again["reused"] is True
        assert {k: v for k, v in again.items() if k != "reused"} == {k: v for k, v in info.items() if k != "reused"}
        assert await retriever.backend.count() == 2  # not ingested a second time
        assert await retriever.search("bees and flowers", "hybrid", 2) == first

    # Another corpus, or other chunking settings: another fingerprint, a fresh index.
    changed = tiny_dataset(tmp_path / "changed", extra=" Then data flows.")
    async with open_retriever(changed, cache, embedder, progress=False) as (_, other):
        assert other["reused"] is False and other["fingerprint"] != info["fingerprint"]
    rechunked = RetrieverSettings(chunk_tokens=100, chunk_overlap_tokens=20)
    assert corpus_fingerprint(dataset, embedder, rechunked) != info["fingerprint"]
    assert len(list(cache.iterdir())) == 2


async def test_an_interrupted_ingestion_starts_over(tmp_path: Path, embedder: SentenceTransformerEmbedder) -> None:
    dataset = tiny_dataset(tmp_path / "data")
    cache = tmp_path / "cache"
    folder = cache / f"tiny-{corpus_fingerprint(dataset, embedder, RetrieverSettings())[:16]}"
    (folder / "index").mkdir(parents=True)
    (folder / "leftover").write_text("half an index")
    async with open_retriever(dataset, cache, embedder, progress=False) as (retriever, info):
        assert info["reused"] is False and info["documents"] == 2
        assert await retriever.backend.count() == 2
    assert not (folder / "leftover").exists()
