"""Offline evaluation of retrieval: dataset loaders (one internal form), ranking metrics, and a
small harness that drives the retriever's ingestion and search for the benchmarks in ``bench/``.

``rag_eval.datasets`` and ``rag_eval.metrics`` are pure Python; ``rag_eval.harness`` imports the
retriever (and so torch) and is only needed to run a retriever over a dataset.
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
