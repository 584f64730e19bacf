"""What every cross-encoder loader shares: the checked settings and the model resolved on local disk."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rag_common.embedders import resolve_model_path

if TYPE_CHECKING:
    from rag_reranker.settings import RerankerSettings


@dataclass(frozen=True, slots=True)
class ScorerOptions:
    """How a cross-encoder reads its pairs: at most ``max_length`` tokens of a (query, passage) pair
    (capped at what the model supports), scores through a sigmoid (probabilities) or as raw logits,
    ``batch_size`` pairs per forward pass. No defaults of its own: ``of(settings)``, whose
    ``cross_encoder_max_length``, ``cross_encoder_sigmoid`` and ``batch_size`` are the one source."""

    max_length: int
    sigmoid: bool
    batch_size: int

    @classmethod
    def of(cls, settings: RerankerSettings) -> ScorerOptions:
        """``RERANKER_CROSS_ENCODER_MAX_LENGTH``, ``_CROSS_ENCODER_SIGMOID`` and ``_BATCH_SIZE``."""
        return cls(settings.cross_encoder_max_length, settings.cross_encoder_sigmoid, settings.batch_size)


def model_token_limit(model, tokenizer) -> int | None:  # noqa: ANN001 - a transformers model and tokenizer
    """Most tokens per input the model can embed, or ``None`` when neither side states a limit: the
    tokenizer's stated limit and the position embeddings, less the RoBERTa offset (XLM-R numbers positions
    from padding_idx + 1, so bge-reranker-v2-m3's 8194 position embeddings hold 8192 tokens)."""
    limits: list[int] = []
    tokenizer_limit = getattr(tokenizer, "model_max_length", None)
    # Tokenizers without a stated limit report a huge sentinel (int(1e30)).
    if isinstance(tokenizer_limit, int) and 0 < tokenizer_limit < 1_000_000:
        limits.append(tokenizer_limit)
    positions = getattr(model.config, "max_position_embeddings", -1)
    if isinstance(positions, int) and positions > 0:
        # RoBERTa-family embeddings (XLM-R, so bge-reranker-v2-m3) number positions from
        # padding_idx + 1: 8194 position embeddings hold 8192 tokens.
        offset = 0
        for module in model.modules():
            padding_idx = getattr(module, "padding_idx", None)
            embeddings = getattr(module, "position_embeddings", None)
            if isinstance(padding_idx, int) and embeddings is not None and hasattr(embeddings, "num_embeddings"):
                offset = padding_idx + 1
                break
        limits.append(positions - offset)
    return min(limits) if limits else None


class LocalCrossEncoder:
    """Base of the loaders (sentence-transformers, FlagEmbedding): one model, one place to check its settings.

    ``model`` is a local directory or a Hugging Face id already in the offline cache; it is
    resolved at construction so a missing model fails at start-up, never by downloading.
    """

    def __init__(self, model: str, options: ScorerOptions, *, device: str | None = None) -> None:
        max_length, sigmoid, batch_size = options.max_length, options.sigmoid, options.batch_size
        if max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.model_id = model
        self._path = resolve_model_path(model)
        self._requested_max_length = max_length
        self._sigmoid = sigmoid
        self._batch_size = batch_size
        self._requested_device = device
        self._lock = threading.Lock()
        #: Tokens per (query, passage) pair the model sees; known after ``warm_up``.
        self.max_length = 0

    @property
    def path(self) -> Path:
        return self._path
