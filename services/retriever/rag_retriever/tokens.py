"""Token counting with the embedder's own tokenizer, so chunk budgets are what the model sees."""

from __future__ import annotations

from rag_common.embedders.onnx_runtime import OnnxEmbedder
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder


class EmbedderTokenizer:
    """Counts and locates tokens with the embedder's tokenizer (no special tokens)."""

    def __init__(self, embedder: SentenceTransformerEmbedder | OnnxEmbedder) -> None:
        self._embedder = embedder

    @property
    def max_tokens(self) -> int:
        return self._embedder.max_seq_length

    def count(self, text: str) -> int:
        return self._embedder.count_tokens(text)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return self._embedder.token_offsets(text)
