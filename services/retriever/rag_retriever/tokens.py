"""Token counting with the embedder's own tokenizer, so chunk budgets are what the model sees."""

from __future__ import annotations

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder


class EmbedderTokenizer:
    """Counts and locates tokens with a sentence-transformers model's tokenizer (no special tokens)."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self._embedder = embedder

    @property
    def max_tokens(self) -> int:
        return self._embedder.max_seq_length

    def count(self, text: str) -> int:
        return self._embedder.count_tokens(text)

    def offsets(self, text: str) -> list[tuple[int, int]]:
        encoded = self._embedder.model.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
        )
        return [(int(start), int(end)) for start, end in encoded["offset_mapping"]]
