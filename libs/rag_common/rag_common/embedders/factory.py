"""The embedder the ``EMBEDDER_*`` settings ask for: every service and the eval harness build it here."""

from __future__ import annotations

import logging

from rag_common.embedders.base import Embedder
from rag_common.embedders.prefixed import EMBED_BATCH_SIZE
from rag_common.settings import EmbedderSettings

logger = logging.getLogger("rag_common.embedders")


def build_embedder(
    model: str,
    *,
    device: str | None = None,
    batch_size: int = EMBED_BATCH_SIZE,
    settings: EmbedderSettings | None = None,
    query_prefix: str | None = None,
    document_prefix: str | None = None,
) -> Embedder:
    # A prefix the caller gives wins over EMBEDDER_QUERY_PREFIX / _DOCUMENT_PREFIX; both unset: the model's own.
    """``EMBEDDER_BACKEND=onnx`` (ONNX Runtime, CPU) or ``torch`` (sentence-transformers on ``device``).

    A prefix left ``None`` is the one the model folder declares (``config_sentence_transformers.json``'s
    ``prompts``: e5-style ``"query: "`` / ``"passage: "``), else none.

    ONNX Runtime is run on the CPU only: with a GPU ``device`` the torch backend is used (and logged),
    since there the GPU is the faster path. Nothing heavy is imported until the chosen one is built.
    """
    settings = settings or EmbedderSettings()
    query_prefix = query_prefix if query_prefix is not None else settings.query_prefix
    document_prefix = document_prefix if document_prefix is not None else settings.document_prefix
    on_gpu = bool(device) and not str(device).startswith("cpu")
    if settings.backend == "onnx" and not on_gpu:
        from rag_common.embedders.onnx_runtime import OnnxEmbedder

        return OnnxEmbedder(
            model, cache_dir=settings.onnx_cache_dir or None, threads=settings.onnx_threads, batch_size=batch_size,
            query_prefix=query_prefix, document_prefix=document_prefix,
        )
    if settings.backend == "onnx":
        logger.info("EMBEDDER_BACKEND=onnx runs on the CPU only: device %s uses the torch embedder", device)
    from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder(
        model, device=device, batch_size=batch_size, query_prefix=query_prefix, document_prefix=document_prefix
    )
