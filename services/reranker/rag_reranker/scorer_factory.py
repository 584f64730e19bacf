"""Which scorer the settings ask for: the configured cross-encoder, else the bi-encoder."""

from __future__ import annotations

import logging

from rag_common.embedders import ModelNotAvailableError
from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.bi_encoder import BiEncoderScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.settings import RerankerSettings
from rag_reranker.torch_runtime import resolve_device

logger = logging.getLogger(__name__)


def build_scorer(settings: RerankerSettings) -> PairScorer:
    """An un-warmed scorer. Raises ModelNotAvailableError, naming the model, if it is not on disk."""
    device = resolve_device(settings.device)
    if settings.cross_encoder_model:
        try:
            return CrossEncoderScorer(
                settings.cross_encoder_model,
                max_length=settings.cross_encoder_max_length,
                sigmoid=settings.cross_encoder_sigmoid,
                batch_size=settings.batch_size,
                device=device,
            )
        except ModelNotAvailableError as exc:
            raise ModelNotAvailableError(
                f"cross-encoder {settings.cross_encoder_model!r} (RERANKER_CROSS_ENCODER_MODEL) is not available: "
                f"{exc}. Point RERANKER_CROSS_ENCODER_MODEL at a local model directory, or leave it empty "
                "to rerank with the bi-encoder."
            ) from exc

    logger.info(
        "no cross-encoder configured (RERANKER_CROSS_ENCODER_MODEL is empty): reranking by cosine similarity "
        "of the bi-encoder %r; set RERANKER_CROSS_ENCODER_MODEL (e.g. a local copy of BAAI/bge-reranker-v2-m3) "
        "for better ranking",
        settings.embedding_model,
    )
    embedder = SentenceTransformerEmbedder(settings.embedding_model, device=device, batch_size=settings.batch_size)
    return BiEncoderScorer(embedder)
