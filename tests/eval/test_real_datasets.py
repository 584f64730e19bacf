"""The loaders on the real, shared datasets; counts from the datasets' README.

Skipped (with the reason) when ``RAG_DATASETS_DIR`` (default ``../shared/datasets``) lacks a dataset.
"""

from __future__ import annotations

from collections import Counter

import pytest

from rag_eval.datasets import Dataset, datasets_dir, load_dataset


def real(name: str) -> Dataset:
    folder = datasets_dir() / name
    if not folder.is_dir():
        pytest.skip(f"dataset {name!r} not found at {folder}; set RAG_DATASETS_DIR to the shared datasets folder")
    dataset = load_dataset(name)
    dataset.check()  # every relevant document is in the corpus, every qrels query exists
    return dataset


def test_vaswani() -> None:
    dataset = real("vaswani")
    assert len(dataset.corpus) == 11_429
    assert len(dataset.queries) == 93
    assert sum(len(judged) for judged in dataset.qrels.values()) == 2_083
    assert all(grade == 1 for judged in dataset.qrels.values() for grade in judged.values())
    assert dataset.corpus["1"].text.startswith("compact memories have flexible capacities")
    assert dataset.queries[0].text == "MEASUREMENT OF DIELECTRIC CONSTANT OF LIQUIDS BY THE USE OF MICROWAVE TECHNIQUES"


def test_hotpotqa() -> None:
    dataset = real("hotpotqa")
    assert len(dataset.corpus) == 994
    assert len(dataset.queries) == 100
    assert Counter(query.metadata["type"] for query in dataset.queries) == {"bridge": 78, "comparison": 22}
    # Two gold passages per question, 200 in all.
    assert all(len(judged) == 2 for judged in dataset.qrels.values())
    assert sum(len(judged) for judged in dataset.qrels.values()) == 200
    assert all(query.answers for query in dataset.queries)


def test_clapnq() -> None:
    dataset = real("clapnq")
    assert len(dataset.queries) == 600
    assert Counter(query.answerable for query in dataset.queries) == {True: 300, False: 300}
    assert len(dataset.qrels) == 300  # only answerable questions have a gold passage
    # The README counts 597 passages; two of them differ only by a trailing space, so 596 here.
    assert len(dataset.corpus) == 596
    assert all(query.answers for query in dataset.queries if query.answerable)


def test_mtrag_un() -> None:
    dataset = real("mtrag-un")
    assert len(dataset.queries) == 507
    assert len(dataset.corpus) == 1_152
    assert Counter(query.answerability for query in dataset.queries) == {
        "answerable": 285, "unanswerable": 97, "underspecified": 78, "partial": 47,
    }
    # Qrels cover exactly the answerable and partial tasks.
    assert {query.id for query in dataset.queries if query.answerable} == set(dataset.qrels)
    assert sum(1 for query in dataset.queries if query.history) > 400
