"""Pair scorers: given a query and passages, one relevance score per passage (higher = more relevant)."""

from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.bi_encoder import BiEncoderScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer

__all__ = ["BiEncoderScorer", "CrossEncoderScorer", "PairScorer"]
