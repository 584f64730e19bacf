"""Offline evaluation of the RAG pipeline: dataset loaders (one internal form), ranking metrics, and a
small harness that drives the retriever's ingestion and search for the benchmarks in ``bench/``.

``rag_eval.datasets``, ``rag_eval.metrics``, ``rag_eval.answers`` (answer, citation, abstention
metrics) and ``rag_eval.stats`` (paired bootstrap) are light; ``rag_eval.harness`` and
``rag_eval.pipeline`` import the retriever and reranker (and so torch). ``rag_eval.evaluation`` runs
named pipelines and the ablation matrix resumably (``ragctl eval``; see docs/evaluation.md), with
``rag_eval.runner`` (logs, summaries), ``rag_eval.report`` (tables), ``rag_eval.plots`` and
``rag_eval.judge`` (LLM-as-judge).
"""

from rag_eval.datasets import (
    Corpus,
    Dataset,
    DatasetNotFound,
    Document,
    Query,
    Turn,
    datasets_dir,
    load_dataset,
)
from rag_eval.metrics import evaluate

__all__ = [
    "Corpus",
    "Dataset",
    "DatasetNotFound",
    "Document",
    "Query",
    "Turn",
    "datasets_dir",
    "evaluate",
    "load_dataset",
]
