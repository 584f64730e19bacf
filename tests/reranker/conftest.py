"""Real models only: the packaged MiniLM embedder and a tiny randomly initialised cross-encoder.

The tiny cross-encoder is a genuine ``BertForSequenceClassification`` saved the way any Hugging
Face reranker is, so it exercises the same loading, tokenising, truncating and scoring code as
BAAI/bge-reranker-v2-m3; its scores are meaningless, only their mechanics are tested.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from rag_common.embedders import resolve_model_path
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.scorers.local_cross_encoder import ScorerOptions
from rag_reranker.settings import RerankerSettings

#: How the scorers read pairs by default (``RerankerSettings``, the one source); tests pin values with ``replace``.
SCORER_OPTIONS = ScorerOptions.of(RerankerSettings())


@pytest.fixture(scope="session")
def tiny_cross_encoder_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    directory = tmp_path_factory.mktemp("tiny-cross-encoder")
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model_path("all-MiniLM-L6-v2")))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=tokenizer.vocab_size,
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        num_labels=1,
        # The default init (0.02) leaves every logit near 0; a wider one spreads scores well
        # beyond (0, 1), so "raw logits" and "after sigmoid" are distinguishable.
        initializer_range=1.0,
    )
    BertForSequenceClassification(config).save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


@pytest.fixture(scope="session")
def tiny_cross_encoder(tiny_cross_encoder_dir: Path) -> CrossEncoderScorer:
    scorer = CrossEncoderScorer(str(tiny_cross_encoder_dir), SCORER_OPTIONS, device="cpu")
    scorer.warm_up()
    return scorer


@pytest.fixture(scope="session")
def tiny_cross_encoder_raw(tiny_cross_encoder_dir: Path) -> CrossEncoderScorer:
    scorer = CrossEncoderScorer(str(tiny_cross_encoder_dir), replace(SCORER_OPTIONS, sigmoid=False), device="cpu")
    scorer.warm_up()
    return scorer


@pytest.fixture(scope="session")
def minilm() -> SentenceTransformerEmbedder:
    """The packaged MiniLM bi-encoder (384-d), warmed: the embedder the reranker uses by default."""
    embedder = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    embedder.warm_up()
    return embedder
