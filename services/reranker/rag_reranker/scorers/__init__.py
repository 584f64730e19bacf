"""Cross-encoders: given (query, passage) pairs, one relevance score per pair (higher = more relevant)."""

from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer

__all__ = ["CrossEncoderScorer", "PairScorer"]
