"""Any Hugging Face sequence-classification cross-encoder (e.g. BAAI/bge-reranker-v2-m3), loaded offline."""

from __future__ import annotations

import logging

import numpy as np

from rag_common.embedders import ModelNotAvailableError
from rag_reranker.scorers.local_cross_encoder import LocalCrossEncoder, model_token_limit

logger = logging.getLogger(__name__)


class CrossEncoderScorer(LocalCrossEncoder):
    """Reads query and passage together, so it sees which words of the passage answer the query.

    Loaded through sentence-transformers' ``CrossEncoder`` from the local directory only.
    """

    _model = None

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
                    str(self._path), device=self._requested_device, local_files_only=True, activation_fn=activation
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
            # For an XLM-R (bge-reranker-v2-m3) that cap is 2 too many when its tokenizer states no
            # limit: its positions start at padding_idx + 1 (model_token_limit).
            limits = [n for n in (model.max_seq_length, model_token_limit(model.model, model.tokenizer)) if n]
            model_limit = min(limits) if limits else None
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
