"""Any sentence-transformers bi-encoder, loaded from a local path or the offline HF cache.

Counting tokens (``count_tokens``, the chunker's budget) is not embedding: whole documents are
counted without the tokenizer's "Token indices sequence length is longer than the specified maximum"
warning, which is about feeding such a sequence to the model. What the model really truncates is
reported where it happens: ``encode_documents`` logs a warning (``rag_common.embedders``) naming how
many of its texts exceed ``max_seq_length`` and were cut.
"""

from __future__ import annotations


import numpy as np

from rag_common.embedders.prefixed import EMBED_BATCH_SIZE, PrefixedBiEncoder
from rag_common.embedders.span_pooling import Pool, pool_spans, shift_pools
from rag_common.embedders.truncation import warn_truncation


class SentenceTransformerEmbedder(PrefixedBiEncoder):
    backend = "torch"

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        batch_size: int = EMBED_BATCH_SIZE,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
    ) -> None:
        super().__init__(model, batch_size=batch_size, query_prefix=query_prefix, document_prefix=document_prefix)
        self._device = device
        self._model = None

    def warm_up(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            from sentence_transformers import SentenceTransformer

            model = SentenceTransformer(str(self._path), device=self._device, local_files_only=True)
            # The prefixes are put on by PrefixedBiEncoder (the folder's declared prompts by default), as the
            # ONNX embedder does; a default prompt applied by encode() as well would prefix twice.
            model.default_prompt_name = None
            self.dim = int(model.get_embedding_dimension())
            self.max_seq_length = int(model.max_seq_length)
            model.encode(["warm up"], normalize_embeddings=True, show_progress_bar=False)
            self._model = model

    @property
    def model(self):  # noqa: ANN201 - SentenceTransformer, imported lazily
        if self._model is None:
            self.warm_up()
        return self._model

    def _encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.model.get_embedding_dimension()), dtype=np.float32)
        vectors = self.model.encode(
            texts, batch_size=self._batch_size, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        return np.asarray(vectors, dtype=np.float32)

    def encode_documents_pooled(
        self, texts: list[str], pools: list[list[Pool]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`encode_documents` and each text's ``pools`` mean-pooled from the same pass
        (:mod:`rag_common.embedders.span_pooling`)."""
        prefixed = self._prefixed_documents(texts)
        if not texts:
            return np.zeros((0, self.model.get_embedding_dimension()), dtype=np.float32), []
        outputs = self.model.encode(
            prefixed, batch_size=self._batch_size, output_value=None, normalize_embeddings=True, show_progress_bar=False
        )
        # The tokenizer's own cut, as encode() made it: offsets of exactly the tokens the model saw.
        encoded = self.model.tokenizer(
            prefixed, truncation=True, max_length=self.model.max_seq_length, return_offsets_mapping=True,
            return_special_tokens_mask=True, verbose=False,
        )
        vectors = np.stack([out["sentence_embedding"].float().cpu().numpy() for out in outputs]).astype(np.float32)
        pooled = []
        for row, out in enumerate(outputs):
            real = int(out["attention_mask"].sum())
            hidden = out["token_embeddings"][:real].float().cpu().numpy()
            pooled.append(pool_spans(
                hidden, encoded["offset_mapping"][row][:real], encoded["special_tokens_mask"][row][:real],
                shift_pools(pools[row], len(self._document_prefix)),
            ))
        return vectors, pooled

    def input_tokens(self, texts: list[str]) -> list[int]:
        """Tokens the model would get for each text, special tokens included, before truncation."""
        if not texts:
            return []
        encoded = self.model.tokenizer(texts, add_special_tokens=True, truncation=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    def warn_truncation(self, texts: list[str]) -> int:
        """Log (warning) how many of ``texts`` the model will cut at ``max_seq_length``; returns that number."""
        if not texts:
            return 0
        return warn_truncation(texts, self.model.max_seq_length, self.input_tokens)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens, however long (whole documents are counted to chunk
        them; nothing is truncated here, so the tokenizer's over-length warning is not emitted)."""
        return len(self.model.tokenizer(text, add_special_tokens=False, truncation=False, verbose=False)["input_ids"])

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each token of ``text`` (no special tokens, no truncation)."""
        encoded = self.model.tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
        )
        return [(int(start), int(end)) for start, end in encoded["offset_mapping"]]
