"""Offline evaluation of the RAG pipeline: dataset loaders (one internal form), ranking and answer
metrics, and a harness that runs the services' own code in-process for ``ragctl eval`` and the
benchmarks in ``bench/``.

``rag_eval.datasets``, ``rag_eval.metrics``, ``rag_eval.answers`` (answer, citation, abstention
metrics) and ``rag_eval.stats`` (paired bootstrap) are light. ``rag_eval.harness`` and
``rag_eval.pipeline`` assemble nothing: they open the services' runtimes
(``rag_<service>.runtime.open_runtime``, the one assembly point each service's app uses too) and
import the services at module level (the retriever and the reranker, and so torch).
``rag_eval.evaluation`` runs named pipelines and the ablation matrix resumably (``ragctl eval``; see
docs/evaluation.md), opening the runtimes for a dataset on an ``AsyncExitStack`` it owns (it imports
``rag_eval.pipeline`` only then, so its light helpers load without torch), with ``rag_eval.runner``
(logs, summaries), ``rag_eval.report`` (tables), ``rag_eval.plots`` and ``rag_eval.judge``
(LLM-as-judge).
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
