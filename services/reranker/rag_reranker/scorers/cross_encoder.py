"""Any Hugging Face sequence-classification cross-encoder (e.g. BAAI/bge-reranker-v2-m3), loaded offline."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np

from rag_common.embedders import ModelNotAvailableError, resolve_model_path

logger = logging.getLogger(__name__)


class CrossEncoderScorer:
    """Reads query and passage together, so it sees which words of the passage answer the query.

    ``model`` is a local directory or a Hugging Face id already in the offline cache; it is
    resolved at construction so a missing model fails at start-up, never by downloading.
    """

    def __init__(
        self,
        model: str,
        max_length: int = 512,
        sigmoid: bool = True,
        batch_size: int = 32,
        device: str | None = None,
    ) -> None:
        if max_length < 1:
            raise ValueError(f"max_length must be positive, got {max_length}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be positive, got {batch_size}")
        self.model_id = model
        self._path = resolve_model_path(model)
        self._requested_max_length = max_length
        self._sigmoid = sigmoid
        self._batch_size = batch_size
        self._device = device
        self._model = None
        self._lock = threading.Lock()
        #: Tokens per (query, passage) pair the model sees; known after :meth:`warm_up`.
        self.max_length = 0

    @property
    def path(self) -> Path:
        return self._path

    def warm_up(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            import torch
            from sentence_transformers import CrossEncoder

            # The activation is fixed here rather than taken from the saved config, so
            # RERANKER_CROSS_ENCODER_SIGMOID means the same thing for every model.
            activation = torch.nn.Sigmoid() if self._sigmoid else torch.nn.Identity()
            try:
                model = CrossEncoder(
                    str(self._path), device=self._device, local_files_only=True, activation_fn=activation
                )
            except (OSError, ValueError) as exc:
                raise ModelNotAvailableError(
                    f"{self._path} does not hold a loadable sequence-classification model "
                    f"(config.json, weights and tokenizer files): {exc}"
                ) from exc
            if model.num_labels != 1:
                raise ValueError(
                    f"cross-encoder {self.model_id!r} has {model.num_labels} output labels; "
                    "a reranker needs a single relevance logit (num_labels=1)"
                )
            # Loaded without an explicit length, sentence-transformers caps the tokenizer at the
            # model's position embeddings; asking for more than that would crash on long passages.
            model_limit = model.max_seq_length
            max_length = self._requested_max_length
            if model_limit and max_length > model_limit:
                logger.warning(
                    "cross-encoder %s accepts at most %d tokens; using that instead of max_length=%d",
                    self.model_id, model_limit, max_length,
                )
                max_length = model_limit
            model.max_seq_length = max_length
            model.predict([("warm up", "warm up")], batch_size=1, show_progress_bar=False)
            self.max_length = max_length
            self._model = model
            logger.info(
                "cross-encoder %s loaded from %s on %s (max_length=%d, sigmoid=%s)",
                self.model_id, self._path, model.device, max_length, self._sigmoid,
            )

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        return self.score_pairs([(query, passage) for passage in passages])

    def score_pairs(self, pairs: list[tuple[str, str]]) -> np.ndarray:
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        if self._model is None:
            self.warm_up()
        scores = self._model.predict(
            pairs, batch_size=self._batch_size, show_progress_bar=False, convert_to_numpy=True
        )
        return np.asarray(scores, dtype=np.float32).reshape(len(pairs))
