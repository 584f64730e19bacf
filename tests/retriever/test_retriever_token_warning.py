"""Ingesting long documents prints no "Token indices sequence length is longer than the specified
maximum" warning (it came from counting whole documents' tokens to chunk them), while a text the model
really truncates is still reported. Real MiniLM, real ingestion into an embedded index."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import DocumentIn
from rag_retriever.runtime import open_runtime
from rag_retriever.settings import RetrieverSettings

WARNING = "Token indices sequence length is longer than the specified maximum"
LONG = " ".join(f"Sentence number {i} talks about the history of the harbour and its lighthouse." for i in range(300))


@pytest.fixture
def fresh_embedder() -> SentenceTransformerEmbedder:
    # A tokenizer warns once per instance: a fresh model, so an earlier test cannot have used up the warning.
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    embedder.warm_up()
    return embedder


async def test_ingesting_a_long_document_does_not_warn(
    tmp_path: Path, fresh_embedder: SentenceTransformerEmbedder, capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert fresh_embedder.count_tokens(LONG) > 2 * fresh_embedder.model.tokenizer.model_max_length
    settings = RetrieverSettings(backend="embedded", index_dir=str(tmp_path / "index"))
    with caplog.at_level(logging.WARNING):
        async with open_runtime(settings, embedder=fresh_embedder) as runtime:
            response = await runtime.ingestor.ingest([DocumentIn(id="long", title="Harbour", text=LONG)])
    assert response.documents == 1 and response.chunks > 5
    captured = capfd.readouterr()
    assert WARNING not in captured.err + captured.out
    assert not fresh_embedder.model.tokenizer.deprecation_warnings  # the tokenizer never got to warn
    # Every chunk fits the model: nothing was truncated, so nothing is reported either.
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]


def test_real_truncation_is_still_reported(
    fresh_embedder: SentenceTransformerEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="rag_common.embedders"):
        fresh_embedder.encode_documents([LONG, "a short passage"])
    (record,) = [r for r in caplog.records if "truncated" in r.getMessage()]
    assert "1 of 2 texts exceed the embedder's max_seq_length (256 tokens" in record.getMessage()
