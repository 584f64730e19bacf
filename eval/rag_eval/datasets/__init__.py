"""Benchmark datasets, all loaded into one form: a :class:`Corpus` of :class:`Document`, a list of
:class:`Query` (with conversation history, reference answers and answerability when the dataset has
them) and qrels ``{query_id: {doc_id: grade}}``.

    from rag_eval.datasets import load_dataset
    dataset = load_dataset("vaswani")          # root: $RAG_DATASETS_DIR, or pass root=...
    dataset = load_dataset("path/to/my-beir-folder")   # your own data (rag_eval.datasets.folder)
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

from rag_eval.datasets.folder import DatasetFormatError, is_dataset_folder, load_folder
from rag_eval.datasets.formats import read_qrels, read_trec_documents, read_trec_topics
from rag_eval.datasets.loaders import (
    clapnq_passage_id,
    load_clapnq,
    load_generic,
    XQUAD_LANGUAGES,
    load_hotpotqa,
    load_mtrag_un,
    load_vaswani,
    load_xquad,
)
from rag_eval.datasets.paths import ENV_VAR, DatasetNotFound, datasets_dir
from rag_eval.datasets.types import Corpus, Dataset, Document, Qrels, Query, Turn

LOADERS: dict[str, Callable[[str | Path | None], Dataset]] = {
    "vaswani": load_vaswani,
    "hotpotqa": load_hotpotqa,
    "clapnq": load_clapnq,
    "mtrag-un": load_mtrag_un,
    **{f"xquad-{code}": partial(load_xquad, code) for code in XQUAD_LANGUAGES},
}


def load_dataset(name: str, root: str | Path | None = None) -> Dataset:
    """Load a named dataset (``vaswani``, ``hotpotqa``, ``clapnq``, ``mtrag-un``, ``xquad-<en|ro|de|es>``) from ``root``, or a
    folder in BEIR layout (:func:`load_folder`) when ``name`` is a path."""
    if is_dataset_folder(name):
        return load_folder(name)
    key = name.lower().replace("_", "-")
    if key == "mtrag":
        key = "mtrag-un"
    if key not in LOADERS:
        raise ValueError(f"unknown dataset {name!r}; known: {', '.join(LOADERS)} (or use load_generic)")
    return LOADERS[key](root)


__all__ = [
    "ENV_VAR",
    "LOADERS",
    "XQUAD_LANGUAGES",
    "Corpus",
    "Dataset",
    "DatasetFormatError",
    "DatasetNotFound",
    "Document",
    "Qrels",
    "Query",
    "Turn",
    "clapnq_passage_id",
    "datasets_dir",
    "is_dataset_folder",
    "load_clapnq",
    "load_dataset",
    "load_folder",
    "load_generic",
    "load_hotpotqa",
    "load_mtrag_un",
    "load_vaswani",
    "load_xquad",
    "read_qrels",
    "read_trec_documents",
    "read_trec_topics",
]
