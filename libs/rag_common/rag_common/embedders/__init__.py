"""Embedders (bi-encoders). Import costs torch: only the retriever and reranker use this package."""

from rag_common.embedders.base import Embedder
from rag_common.embedders.models import ModelNotAvailableError, resolve_model_path

__all__ = ["Embedder", "ModelNotAvailableError", "resolve_model_path"]
