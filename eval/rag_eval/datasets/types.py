"""The one internal form every loader produces."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

#: ``{query_id: {doc_id: grade}}``. A grade > 0 is relevant (higher = more relevant); 0 or below is a
#: judged non-relevant document. A query with no entry has no relevant document (e.g. unanswerable).
Qrels = dict[str, dict[str, int]]


@dataclass(frozen=True, slots=True)
class Document:
    """One retrievable unit of a corpus (a passage, an abstract)."""

    id: str
    text: str
    title: str = ""
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Turn:
    """One earlier turn of a conversation: ``speaker`` is ``"user"`` or ``"agent"``."""

    speaker: str
    text: str


@dataclass(frozen=True, slots=True)
class Query:
    """A question, with the conversation before it (oldest first) when the dataset is multi-turn.

    ``answers`` are reference answers (empty when the dataset has none or the question is
    unanswerable). ``answerable`` is None when the dataset does not say; ``answerability`` keeps the
    dataset's own finer label when it has one (MTRAG-UN: answerable, partial, unanswerable,
    underspecified).
    """

    id: str
    text: str
    history: tuple[Turn, ...] = ()
    answers: tuple[str, ...] = ()
    answerable: bool | None = None
    answerability: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)


class Corpus(Mapping[str, Document]):
    """Documents by id, in the order they were given. Duplicate ids are an error."""

    def __init__(self, documents: Iterable[Document] = ()) -> None:
        self._documents: dict[str, Document] = {}
        for document in documents:
            self.add(document)

    def add(self, document: Document) -> None:
        if document.id in self._documents:
            raise ValueError(f"duplicate document id {document.id!r}")
        self._documents[document.id] = document

    def __getitem__(self, doc_id: str) -> Document:
        return self._documents[doc_id]

    def __iter__(self) -> Iterator[str]:
        return iter(self._documents)

    def __len__(self) -> int:
        return len(self._documents)

    def documents(self) -> list[Document]:
        return list(self._documents.values())

    def __repr__(self) -> str:
        return f"Corpus({len(self)} documents)"


@dataclass(slots=True)
class Dataset:
    name: str
    corpus: Corpus
    queries: list[Query]
    qrels: Qrels

    @property
    def answers(self) -> dict[str, tuple[str, ...]]:
        return {query.id: query.answers for query in self.queries}

    @property
    def answerable(self) -> dict[str, bool | None]:
        return {query.id: query.answerable for query in self.queries}

    def query(self, query_id: str) -> Query:
        for query in self.queries:
            if query.id == query_id:
                return query
        raise KeyError(query_id)

    def relevant(self, query_id: str) -> dict[str, int]:
        """Judged documents of ``query_id`` with a positive grade."""
        return {doc_id: grade for doc_id, grade in self.qrels.get(query_id, {}).items() if grade > 0}

    def check(self) -> None:
        """Raise ValueError when qrels name a query or a relevant document the dataset does not have."""
        query_ids = {query.id for query in self.queries}
        if len(query_ids) != len(self.queries):
            raise ValueError(f"{self.name}: duplicate query ids")
        unknown_queries = sorted(set(self.qrels) - query_ids)
        if unknown_queries:
            raise ValueError(f"{self.name}: qrels for unknown queries {unknown_queries[:5]}")
        missing = sorted(
            {doc_id for judged in self.qrels.values() for doc_id, grade in judged.items() if grade > 0}
            - set(self.corpus)
        )
        if missing:
            raise ValueError(f"{self.name}: {len(missing)} relevant documents not in the corpus, e.g. {missing[:5]}")

    def __repr__(self) -> str:
        judged = sum(1 for judged in self.qrels.values() if any(grade > 0 for grade in judged.values()))
        return (
            f"Dataset({self.name!r}, {len(self.corpus)} documents, {len(self.queries)} queries, "
            f"{judged} with relevant documents)"
        )
