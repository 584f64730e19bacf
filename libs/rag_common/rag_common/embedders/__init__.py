"""Embedders (bi-encoders): one implementation per file behind the :class:`Embedder` protocol.

``factory.build_embedder`` picks one by ``EMBEDDER_BACKEND``: ``onnx_runtime.OnnxEmbedder`` (default;
ONNX Runtime, the export made by ``onnx_export``) or ``sentence_transformer.SentenceTransformerEmbedder``
(torch), both on ``prefixed.PrefixedBiEncoder`` (weights, prefixes, load lock, the encode methods).
Importing this package loads neither runtime; each is imported when its embedder warms up."""

from rag_common.embedders.base import Embedder
from rag_common.embedders.models import ModelNotAvailableError, resolve_model_path

__all__ = ["Embedder", "ModelNotAvailableError", "resolve_model_path"]
