"""Does an extractive answer contain a gold answer, in any language; which questions to ask; which
documents to hold out so that some questions have no answer in the index.

- :func:`normalise_answer`: NFC, Romanian's cedilla ş/ţ read as the comma-below ș/ț
  (``rag_common.languages.normalise_text``), casefolded, every punctuation character a space, spaces
  collapsed; the ``[n]`` citation markers of an answer are removed first (a marker's digit is no answer).
- :func:`contains_gold`: some normalised gold answer occurs in the normalised answer as whole words
  (``"1"`` is not found in ``"1990"``).
- :func:`sample_questions`: a seeded sample that depends on the question ids only, so XQuAD's parallel
  languages (the same ids) get the same questions, and a larger sample holds a smaller one.
- :func:`held_out_split`: documents grouped by their id without a trailing ``-<number>`` (XQuAD's
  ``xquad-<article>-<paragraph>`` → the article), half of the groups held out (seeded, ids only). The
  questions whose gold documents are all held out cannot be answered from the rest: asked against an
  index of the rest, every one of them should be abstained on (off-topic questions in the corpus's
  own language and style, on a topic it does not cover).
"""

from __future__ import annotations

import random
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from rag_common.languages import normalise_text
from rag_eval.datasets.types import Corpus, Dataset, Query

_MARKERS = re.compile(r"\[\d+\]")
_GROUP = re.compile(r"^(.+)-\d+$")


def strip_markers(answer: str) -> str:
    """The answer without its ``[n]`` citation markers."""
    return " ".join(_MARKERS.sub(" ", answer).split())


def normalise_answer(text: str) -> str:
    """Casefolded NFC text, ş/ţ folded to ș/ț, punctuation as spaces, spaces collapsed (see the module)."""
    text = normalise_text(strip_markers(text)).casefold()
    # casefold may decompose (e.g. "İ" → "i̇"): compose again before dropping punctuation.
    text = unicodedata.normalize("NFC", text)
    return " ".join("".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text).split())


def contains_gold(answer: str, golds: Iterable[str]) -> bool:
    """Whether some non-empty gold answer occurs in ``answer`` as whole words, both normalised."""
    haystack = f" {normalise_answer(answer)} "
    for gold in golds:
        needle = normalise_answer(gold)
        if needle and f" {needle} " in haystack:
            return True
    return False


def sample_questions(queries: Sequence[Query], limit: int | None, seed: int) -> list[Query]:
    """``limit`` questions drawn with ``seed`` from the ids alone (all when ``limit`` is None or
    larger), returned in id order."""
    by_id = {query.id: query for query in queries}
    ids = sorted(by_id)
    if limit is not None:
        if limit < 1:
            raise ValueError(f"limit must be positive, got {limit}")
        random.Random(f"questions:{seed}").shuffle(ids)
        ids = sorted(ids[:limit])
    return [by_id[query_id] for query_id in ids]


def answerable_questions(dataset: Dataset) -> list[Query]:
    """The questions with reference answers that the dataset does not mark unanswerable."""
    return [q for q in dataset.queries if q.answers and q.answerable is not False]


def document_group(doc_id: str) -> str:
    """The group a document belongs to: its id without a trailing ``-<number>`` (else the id itself)."""
    match = _GROUP.match(doc_id)
    return match.group(1) if match else doc_id


@dataclass(frozen=True)
class HeldOutSplit:
    """``kept``: the dataset with the held-out groups' documents removed (its name says so, so its
    index is cached apart); ``off_topic``: the questions whose gold documents are all held out;
    ``on_topic``: the questions whose gold documents are all kept."""

    kept: Dataset
    held_out_groups: tuple[str, ...]
    off_topic: list[Query]
    on_topic: list[Query]


def held_out_split(dataset: Dataset, seed: int) -> HeldOutSplit:
    """Half of the document groups (rounded down, at least one) held out, chosen with ``seed`` from the
    group names alone (the same groups in every language of a parallel dataset)."""
    groups = sorted({document_group(doc_id) for doc_id in dataset.corpus})
    if len(groups) < 2:
        raise ValueError(f"{dataset.name}: {len(groups)} document group(s); holding some out needs at least two")
    random.Random(f"held-out:{seed}").shuffle(groups)
    held = frozenset(groups[: max(1, len(groups) // 2)])
    corpus = Corpus(doc for doc in dataset.corpus.values() if document_group(doc.id) not in held)
    off_topic: list[Query] = []
    on_topic: list[Query] = []
    for query in dataset.queries:
        gold = [doc for doc, grade in dataset.relevant(query.id).items() if grade > 0]
        if not gold:
            continue
        in_held = [document_group(doc) in held for doc in gold]
        if all(in_held):
            off_topic.append(query)
        elif not any(in_held):
            on_topic.append(query)
    kept_ids = {q.id for q in on_topic}
    qrels = {qid: judged for qid, judged in dataset.qrels.items() if qid in kept_ids}
    kept = Dataset(f"{dataset.name}-kept{seed}", corpus, list(on_topic), qrels)
    return HeldOutSplit(kept, tuple(sorted(held)), off_topic, on_topic)
