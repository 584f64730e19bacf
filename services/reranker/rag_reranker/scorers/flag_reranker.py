"""The cross-encoder stage through FlagEmbedding's ``FlagReranker`` (BAAI's own loader for bge-rerankers).

Same models, same interface and, in fp32, the same scores as :class:`CrossEncoderScorer`
(sentence-transformers); this backend adds fp16 on CUDA. Encoder-only rerankers only (any
``AutoModelForSequenceClassification`` with one output logit, e.g. BAAI/bge-reranker-v2-m3); the
LLM rerankers of FlagEmbedding (bge-reranker-v2-gemma, ...) are a different class.

Truncation follows FlagEmbedding: the query alone is cut to ``max_length * 3 // 4`` tokens, then
the passage is cut so the whole pair, special tokens included, fits in ``max_length``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence

import numpy as np

from rag_common.embedders import ModelNotAvailableError
from rag_reranker.scorers.local_cross_encoder import LocalCrossEncoder, ScorerOptions, model_token_limit


logger = logging.getLogger(__name__)

#: The release this scorer was written and tested against (pinned in requirements/constraints.txt).
FLAG_EMBEDDING_REQUIREMENT = "FlagEmbedding==1.4.2"


class FlagRerankerScorer(LocalCrossEncoder):
    """Reads query and passage together, like :class:`CrossEncoderScorer`, through ``FlagReranker``.

    ``model`` is a local directory or a Hugging Face id already in the offline cache; it is
    resolved at construction so a missing model fails at start-up, and ``FlagReranker`` is only
    ever given that local directory, so nothing is downloaded. ``device`` defaults to the first
    CUDA device when there is one, else the CPU; weights run in fp16 on CUDA and fp32 elsewhere.
    """

    _reranker = None

    def __init__(self, model: str, options: ScorerOptions, *, device: str | None = None) -> None:
        super().__init__(model, options, device=device)
        # FlagReranker is not safe to call from several threads at once: each call re-applies
        # truncation settings to the shared fast tokenizer and may move or cast the model.
        self._inference_lock = threading.Lock()
        #: Where the model runs and whether in fp16; known after :meth:`warm_up`.
        self.device = ""
        self.use_fp16 = False

    def warm_up(self) -> None:
        with self._lock:
            if self._reranker is not None:
                return
            try:
                from FlagEmbedding import FlagReranker
            except ImportError as exc:
                raise ModelNotAvailableError(
                    f"the FlagEmbedding cross-encoder backend needs the package: pip install "
                    f"{FLAG_EMBEDDING_REQUIREMENT} (with -c requirements/constraints.txt), "
                    f"or use the sentence-transformers backend: {exc}"
                ) from exc
            import torch

            device = self._requested_device or ("cuda:0" if torch.cuda.is_available() else "cpu")
            use_fp16 = torch.device(device).type == "cuda"
            try:
                # A single device string: a list, or None on a multi-GPU host, would make
                # FlagReranker spawn one worker process per device.
                reranker = FlagReranker(
                    str(self._path),
                    use_fp16=use_fp16,
                    devices=device,
                    batch_size=self._batch_size,
                    max_length=self._requested_max_length,
                    normalize=self._sigmoid,
                )
            except (OSError, ValueError) as exc:
                raise ModelNotAvailableError(
                    f"{self._path} does not hold a loadable sequence-classification model "
                    f"(config.json, weights and tokenizer files): {exc}"
                ) from exc
            num_labels = reranker.model.config.num_labels
            if num_labels != 1:
                raise ValueError(
                    f"cross-encoder {self.model_id!r} has {num_labels} output labels; "
                    "a reranker needs a single relevance logit (num_labels=1)"
                )
            # FlagReranker truncates to whatever max_length it is given; more than the model's
            # position embeddings would crash on long passages, so cap it here.
            max_length = self._requested_max_length
            model_limit = model_token_limit(reranker.model, reranker.tokenizer)
            if model_limit and max_length > model_limit:
                logger.warning(
                    "cross-encoder %s accepts at most %d tokens; using that instead of max_length=%d",
                    self.model_id, model_limit, max_length,
                )
                max_length = model_limit
            reranker.max_length = max_length
            with self._inference_lock:
                reranker.compute_score([("warm up", "warm up")], batch_size=1, max_length=max_length)
            self.max_length = max_length
            self.device = device
            self.use_fp16 = use_fp16
            self._reranker = reranker
            logger.info(
                "cross-encoder %s loaded by FlagEmbedding from %s on %s (fp16=%s, max_length=%d, sigmoid=%s)",
                self.model_id, self._path, device, use_fp16, max_length, self._sigmoid,
            )

    def score(self, query: str, passages: list[str]) -> np.ndarray:
        return self.score_pairs([(query, passage) for passage in passages])

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
        """One score per (query, passage) pair, in order; the pairs may come from many requests."""
        if not pairs:
            return np.zeros(0, dtype=np.float32)
        if self._reranker is None:
            self.warm_up()
        with self._inference_lock:
            scores = self._reranker.compute_score(
                [(query, passage) for query, passage in pairs],
                batch_size=self._batch_size,
                max_length=self.max_length,
                normalize=self._sigmoid,
            )
        return np.asarray(scores, dtype=np.float32).reshape(len(pairs))
