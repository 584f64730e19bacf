"""A sentence-transformers bi-encoder run by ONNX Runtime: the same vectors as the torch path, no torch.

The network is the model's own weights exported to ONNX (:mod:`rag_common.embedders.onnx_export`,
cached next to a hash of those weights). Around it, what sentence-transformers does for a mean- or
CLS-pooling model (``st_config.pooling_mode``), written out: the model's ``tokenizer.json`` (the fast
tokenizer sentence-transformers uses) truncating at ``max_seq_length`` (``sentence_bert_config.json``) and
padding each batch to its longest text with the tokenizer's own pad token; texts length-sorted into
batches of ``batch_size``; mean pooling over the attention mask, or the first token's state; L2
normalisation. Vectors match the torch embedder to float noise (cosine ≥ 0.99999, tests/common/embedders).

Loading needs ``onnxruntime`` and ``tokenizers`` only (``rag-common[onnx]``); the export, made once,
needs torch. Counting tokens and the truncation warning behave as in
:class:`~rag_common.embedders.sentence_transformer.SentenceTransformerEmbedder`.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from rag_common.embedders.models import ModelNotAvailableError
from rag_common.embedders.prefixed import EMBED_BATCH_SIZE, PrefixedBiEncoder
from rag_common.embedders.span_pooling import Pool, pool_spans, shift_pools
from rag_common.embedders.st_config import Pooling, pad_token, pooling_mode
from rag_common.embedders.truncation import warn_truncation

ONNX_REQUIREMENT = "onnxruntime==1.31.1 tokenizers (pip install -c requirements/constraints.txt 'rag-common[onnx]')"


class OnnxEmbedder(PrefixedBiEncoder):
    backend = "onnx"

    def __init__(
        self,
        model: str,
        *,
        cache_dir: str | Path | None = None,
        threads: int,
        batch_size: int = EMBED_BATCH_SIZE,
        query_prefix: str | None = None,
        document_prefix: str | None = None,
    ) -> None:
        super().__init__(model, batch_size=batch_size, query_prefix=query_prefix, document_prefix=document_prefix)
        self._cache_dir = Path(cache_dir) if cache_dir else None
        self._threads = threads
        self._session = None
        self.onnx_path: Path | None = None

    def warm_up(self) -> None:
        with self._lock:
            if self._session is not None:
                return
            try:
                import onnxruntime
                from tokenizers import Tokenizer
            except ImportError as exc:
                raise ModelNotAvailableError(f"EMBEDDER_BACKEND=onnx needs {ONNX_REQUIREMENT}") from exc
            from rag_common.embedders.onnx_export import ensure_export

            self._pooling = pooling_mode(self._path)  # before the export: an unsupported model fails at once
            self.onnx_path = ensure_export(self._path, self._cache_dir)
            self.max_seq_length = _max_seq_length(self._path)
            self._batch_tokenizer = _load_tokenizer(Tokenizer, self._path)
            self._batch_tokenizer.enable_truncation(max_length=self.max_seq_length, strategy="longest_first")
            pad = pad_token(self._path)  # XLM-R's <pad> is id 1; its id 0 is <s>
            pad_id = self._batch_tokenizer.token_to_id(pad)
            self._batch_tokenizer.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token=pad)
            self._plain_tokenizer = _load_tokenizer(Tokenizer, self._path)
            options = onnxruntime.SessionOptions()
            options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
            options.intra_op_num_threads = self._threads
            options.inter_op_num_threads = 1
            session = onnxruntime.InferenceSession(
                str(self.onnx_path), options, providers=["CPUExecutionProvider"]
            )
            self._input_names = {i.name for i in session.get_inputs()}
            self.dim = int(session.get_outputs()[0].shape[-1])
            self._session = session
            self._run(["warm up"])

    def _hidden(self, texts: list[str]):  # noqa: ANN202 - (token states, mask, tokenizers encodings)
        encodings = self._batch_tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}
        hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._input_names})[0]
        return hidden, mask, encodings

    def _forward(self, texts: list[str]) -> np.ndarray:
        hidden, mask, _ = self._hidden(texts)
        return _pool(hidden, mask, self._pooling)

    def _run(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for chosen in self._batches(texts):
            out[chosen] = self._forward([texts[i] for i in chosen])
        return out

    def _batches(self, texts: list[str]) -> list[np.ndarray]:
        # Longest first in batches of batch_size (less padding), as sentence-transformers' encode does.
        order = np.argsort([-len(t) for t in texts], kind="stable")
        return [order[start : start + self._batch_size] for start in range(0, len(texts), self._batch_size)]

    def encode_documents_pooled(
        self, texts: list[str], pools: list[list[Pool]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """:meth:`encode_documents` and each text's ``pools`` mean-pooled from the same pass
        (:mod:`rag_common.embedders.span_pooling`)."""
        if self._session is None:
            self.warm_up()
        prefixed = self._prefixed_documents(texts)
        vectors = np.empty((len(texts), self.dim), dtype=np.float32)
        pooled: list[np.ndarray] = [np.empty((0, self.dim), dtype=np.float32)] * len(texts)
        for chosen in self._batches(prefixed):
            hidden, mask, encodings = self._hidden([prefixed[i] for i in chosen])
            vectors[chosen] = _pool(hidden, mask, self._pooling)
            for row, i in enumerate(chosen):
                real = int(mask[row].sum())
                pooled[i] = pool_spans(
                    hidden[row, :real], encodings[row].offsets[:real], encodings[row].special_tokens_mask[:real],
                    shift_pools(pools[i], len(self._document_prefix)),
                )
        return vectors, pooled

    def _encode(self, texts: list[str]) -> np.ndarray:
        if self._session is None:
            self.warm_up()
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run(texts)

    def _plain(self):  # noqa: ANN202 - tokenizers.Tokenizer, imported lazily
        if self._session is None:
            self.warm_up()
        return self._plain_tokenizer

    def input_tokens(self, texts: list[str]) -> list[int]:
        """Tokens the model would get for each text, special tokens included, before truncation."""
        if not texts:
            return []
        return [len(e.ids) for e in self._plain().encode_batch(texts, add_special_tokens=True)]

    def warn_truncation(self, texts: list[str]) -> int:
        """Log (warning) how many of ``texts`` the model will cut at ``max_seq_length``; returns that number."""
        if not texts:
            return 0
        self._plain()  # warmed up: max_seq_length known
        return warn_truncation(texts, self.max_seq_length, self.input_tokens)

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` without special tokens, however long (nothing is truncated here)."""
        return len(self._plain().encode(text, add_special_tokens=False).ids)

    def token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character span of each token of ``text`` (no special tokens, no truncation)."""
        return [(int(s), int(e)) for s, e in self._plain().encode(text, add_special_tokens=False).offsets]


def _pool(hidden: np.ndarray, mask: np.ndarray, mode: Pooling) -> np.ndarray:
    """The mean over real tokens or the first token's state (CLS, ``<s>``; padding is on the right), then
    L2 normalisation: sentence-transformers' Pooling + Normalize."""
    if mode == "cls":
        pooled = hidden[:, 0, :]
    else:
        weights = mask[:, :, None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


def _load_tokenizer(tokenizer_class, model_dir: Path):  # noqa: ANN001, ANN202
    path = model_dir / "tokenizer.json"
    if not path.is_file():
        raise ModelNotAvailableError(
            f"{model_dir} has no tokenizer.json (the fast tokenizer): EMBEDDER_BACKEND=onnx cannot tokenise "
            "exactly as the torch path does; use EMBEDDER_BACKEND=torch for this model"
        )
    tokenizer = tokenizer_class.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def _max_seq_length(model_dir: Path) -> int:
    """sentence-transformers' rule: sentence_bert_config.json's max_seq_length, else the tokenizer's and
    the position embeddings' limit."""
    config = json.loads((model_dir / "config.json").read_text())
    limit = int(config.get("max_position_embeddings", 512))
    st_config = model_dir / "sentence_bert_config.json"
    if st_config.is_file():
        value = json.loads(st_config.read_text()).get("max_seq_length")
        if value:
            return min(int(value), limit)
    tokenizer_config = model_dir / "tokenizer_config.json"
    if tokenizer_config.is_file():
        value = json.loads(tokenizer_config.read_text()).get("model_max_length")
        if isinstance(value, int) and value < limit:
            return value
    return limit
