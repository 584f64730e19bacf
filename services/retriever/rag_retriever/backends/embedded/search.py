"""The embedded index's searches: which stored chunks answer a query, and with what score. Dense from
the HNSW graph (filtered by the access map or by tantivy's field filters), hybrid fused by label
before any document is read, and stored chunks by label for the graph signals. Each returns tantivy
documents with their scores; the index decodes them (``EmbeddedIndex._scored``) and holds its lock
around every call here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

import numpy as np
import tantivy
from tantivy import Occur, Query

from rag_retriever.backends.base import AccessFilter, Filters, FusionSettings
from rag_retriever.backends.embedded.access_map import AccessMap
from rag_retriever.backends.embedded.text_index import TextIndex, all_hits
from rag_retriever.backends.embedded.vector_graph import VectorGraph
from rag_retriever.fusion import candidates_per_list, min_max_scores, rrf_scores

#: A stored chunk's document and its score.
Found = tuple[tantivy.Document, float]


@dataclass(frozen=True, slots=True)
class LabelLists:
    """A query's dense and BM25 lists as ``(label, score)``, best first, before any document is read;
    ``address_of``: the BM25 hits' document addresses."""

    dense: list[tuple[int, float]]
    bm25: list[tuple[int, float]]
    address_of: dict[int, tantivy.DocAddress]


class IndexSearch:
    def __init__(self, text: TextIndex, vectors: VectorGraph, access: AccessMap, dim: int) -> None:
        self._text = text
        self._vectors = vectors
        self._access = access
        self._dim = dim

    def dense(
        self, searcher: tantivy.Searcher, vector: np.ndarray, k: int, filters: Filters | None,
        access: AccessFilter | None, *, pending: bool,
    ) -> list[Found]:
        """The ``k`` nearest readable chunks (``pending``: a write is prepared and not committed)."""
        labels, scores = self._dense_labels(searcher, vector, k, filters, access, pending=pending)
        documents = self._text.documents_by_label(searcher, labels)
        return [(documents[label], score) for label, score in zip(labels, scores, strict=True) if label in documents]

    def _dense_labels(
        self, searcher: tantivy.Searcher, vector: np.ndarray, k: int, filters: Filters | None,
        access: AccessFilter | None, *, pending: bool,
    ) -> tuple[list[int], list[float]]:
        """The ``k`` nearest readable labels and their ``(1 + cosine) / 2`` scores."""
        query = np.asarray(vector, dtype=np.float32).reshape(-1)
        if query.shape[0] != self._dim:
            raise ValueError(f"query vector has dimension {query.shape[0]}, index has {self._dim}")
        filter_query = self._text.filter_query(filters)
        allowed: Callable[[int], bool] | None = None
        k = min(k, self._vectors.live)
        if filter_query is not None:
            # Field filters: the exact set of matching (and readable) labels, from tantivy.
            matching = set(self._text.labels_matching(searcher, self._text.restricted(filter_query, access)))
            allowed = matching.__contains__
            k = min(k, len(matching))
        elif access is not None and not self._access.reads_everything(access):
            allowed = self._access.readable_by(access)
        elif pending:
            # A write is being prepared: its vectors are in the graph but not live yet (the access map
            # has the live labels only).
            allowed = self._access.is_live
        if k <= 0:
            return [], []
        labels, distances = self._vectors.nearest(query, k, allowed, self._access)
        # hnswlib's cosine distance is 1 - cos; (1 + cos) / 2 = 1 - distance / 2.
        scores = np.clip(1.0 - np.asarray(distances, dtype=np.float64) / 2.0, 0.0, 1.0)
        return labels, [float(score) for score in scores]

    def hybrid(
        self, searcher: tantivy.Searcher, text_query: tantivy.Query | None, vector: np.ndarray, k: int,
        filters: Filters | None, fusion: FusionSettings, access: AccessFilter | None, *, pending: bool,
    ) -> list[Found]:
        """Both lists as labels and scores, fused, and only then the documents of the fused top ``k``
        read, with their fused scores: reading and decoding a stored chunk (its payload, with its
        sentence vectors) is most of a list's cost, and fusion keeps ``k`` of ``2 *
        candidates_per_list(k)``. Every label tied with the ``k``-th is read, so the caller can break
        ties by chunk id as ``min_max_fusion`` / ``rrf_fusion`` do."""
        lists = self.lists(searcher, text_query, vector, candidates_per_list(k), filters, access, pending=pending)
        if fusion.method == "rrf":
            fused = rrf_scores(lists.dense, lists.bm25, fusion.rank_constant)
        else:
            fused = min_max_scores(lists.dense, lists.bm25, fusion.dense_weight)
        documents = self.best_documents(searcher, fused, k, lists.address_of)
        return [(document, fused[label]) for label, document in documents.items()]

    def lists(
        self, searcher: tantivy.Searcher, text_query: tantivy.Query | None, vector: np.ndarray, depth: int,
        filters: Filters | None, access: AccessFilter | None, *, pending: bool,
    ) -> LabelLists:
        """The dense and BM25 lists of ``depth`` hits each, as labels and scores (no document read)."""
        labels, scores = self._dense_labels(searcher, vector, depth, filters, access, pending=pending)
        bm25 = searcher.search(text_query, limit=depth).hits if text_query is not None else []
        addresses = [address for _, address in bm25]
        bm25_labels = [int(label) for label in searcher.fast_field_values("label", addresses)] if addresses else []
        return LabelLists(
            list(zip(labels, scores, strict=True)),
            [(label, float(score)) for label, (score, _) in zip(bm25_labels, bm25, strict=True)],
            dict(zip(bm25_labels, addresses, strict=True)),
        )

    def best_documents(
        self, searcher: tantivy.Searcher, fused: dict[int, float], k: int, address_of: dict[int, tantivy.DocAddress]
    ) -> dict[int, tantivy.Document]:
        """The documents of the best ``k`` labels of ``fused`` and of every label tied with the ``k``-th
        (``address_of``: the ones BM25 found, read by address; the others looked up by label)."""
        ranked = sorted(fused, key=lambda label: -fused[label])
        documents: dict[int, tantivy.Document] = {}
        start = 0
        # Normally one round: the top k and their ties. More only if a label has no document.
        while start < len(ranked) and len(documents) < k:
            stop = min(start + k - len(documents), len(ranked))
            while stop < len(ranked) and fused[ranked[stop]] == fused[ranked[stop - 1]]:
                stop += 1
            chosen = ranked[start:stop]
            documents.update((label, searcher.doc(address_of[label])) for label in chosen if label in address_of)
            documents.update(self._text.documents_by_label(searcher, [label for label in chosen if label not in address_of]))
            start = stop
        return documents

    def restricted_labels_query(
        self, labels: Collection[int], filters: Filters | None, access: AccessFilter | None
    ) -> tantivy.Query:
        """The stored chunks of ``labels`` that pass ``filters`` and ``access``."""
        query = self._text.labels_query(labels)
        restriction = self._text.restricted(self._text.filter_query(filters), access)
        if restriction is not None:
            query = Query.boolean_query([(Occur.Must, query), (Occur.Must, restriction)])
        return query

    @staticmethod
    def by_labels(searcher: tantivy.Searcher, query: tantivy.Query) -> dict[int, tantivy.Document]:
        """The documents ``query`` (``restricted_labels_query``) matches, by label."""
        addresses = all_hits(searcher, query)
        if not addresses:
            return {}
        found = searcher.fast_field_values("label", addresses)
        return {int(label): searcher.doc(address) for label, address in zip(found, addresses, strict=True)}
