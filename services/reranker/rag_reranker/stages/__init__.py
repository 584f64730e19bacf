"""Post-scoring reranking stages: pure NumPy steps that reorder or select already-scored candidates.

Not wired into ``RerankService`` yet; each stage is a self-contained class with typed inputs/outputs.
"""

from rag_reranker.stages.diversity import GeometricMMR
from rag_reranker.stages.graph_diffusion import DiffusionResult, GraphDiffusionReranker

__all__ = ["DiffusionResult", "GeometricMMR", "GraphDiffusionReranker"]
