"""The leak test on OpenSearch, by request shape (issue 13): no cluster runs here, so what is
checked is every search body the real ``OpenSearchBackend`` sends for randomised identities, modes,
HyDE-shaped texts and field filters, through the real ``SearchService`` the ``/v1/search`` route
runs. A body leaks when any clause that selects documents (a ``knn``, a full-text match) is not under
a filter on exactly the caller's tenant and principals. The walk refuses clause types it does not
know, so a new query shape must be taught here before it can pass.

The same identities against a live cluster are the conformance suite's ACL cases
(``make test-opensearch``).
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest
from opensearch_fake import FakeCluster

from rag_common.identity import Identity
from rag_common.schemas import SearchRequest
from rag_retriever.backends.base import AccessFilter, FusionSettings
from rag_retriever.backends.opensearch import OpenSearchBackend
from rag_retriever.backends.opensearch_requests import IndexConfig
from rag_retriever.locking import ReadWriteLock
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings

SEARCHES = 1500
TEXTS = (
    "zqk3x9abq7",
    "What does record zqk3x9abq7 say about the boiler inspection procedure?",
    "Record zq00aa11bb describes the payroll correction procedure of the finance unit. Every payroll "
    "correction request of the finance unit is filed under zq00aa11bb and reviewed weekly.",
    "exam scheduling procedure of the admissions unit",
)
#: A tenant filter naming another tenant must narrow nothing open: the access filter still applies.
FILTERS = ({}, {"content_type": "text/markdown"}, {"doc_id": ["record-01", "record-02"]}, {"source": ["a.md"], "tenant": "south"})


def expected_clauses(identity: Identity) -> list[dict[str, Any]]:
    return [{"term": {"tenant": identity.tenant}}, {"terms": {"readers": identity.principals()}}]


def unguarded(node: Any, guard: list[dict[str, Any]], guarded: bool = False) -> list[str]:
    """The document-selecting clauses of ``node`` that are not under a filter holding ``guard``."""
    if not isinstance(node, dict) or len(node) != 1:
        return [f"unexpected query node {node!r:.80}"]
    [(kind, spec)] = node.items()
    if kind == "knn":
        return [
            f"knn on {field} without the access filter"
            for field, knn in spec.items()
            if not all(clause in knn.get("filter", {}).get("bool", {}).get("filter", []) for clause in guard)
        ]
    if kind == "bool":
        here = guarded or all(clause in spec.get("filter", []) for clause in guard)
        return [problem for clause in spec.get("must", []) + spec.get("should", []) for problem in unguarded(clause, guard, here)]
    if kind == "hybrid":
        return [problem for query in spec["queries"] for problem in unguarded(query, guard, guarded)]
    if kind in ("multi_match", "match"):
        return [] if guarded else [f"{kind} without the access filter"]
    return [f"unknown clause {kind}: teach this test whether it selects documents"]


class RepeatingQueries:
    """The real embedder, each of the few query texts embedded once (the bodies are what is tested)."""

    def __init__(self, embedder) -> None:
        self._embedder = embedder
        self._vectors: dict[str, np.ndarray] = {}

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        missing = [text for text in texts if text not in self._vectors]
        if missing:
            self._vectors.update(zip(missing, self._embedder.encode_queries(missing), strict=True))
        return np.stack([self._vectors[text] for text in texts])


@pytest.fixture
async def opensearch_search(embedder):
    cluster = FakeCluster()
    settings = RetrieverSettings()
    config = IndexConfig.of(
        RetrieverSettings(opensearch_index="rag-chunks", hnsw_ef_search=100), dim=384, model_id="m", languages=("ro", "en")
    )
    backend = OpenSearchBackend(cluster.client(), config, fusion=FusionSettings.of(settings))
    yield cluster, SearchService(
        backend, RepeatingQueries(embedder), ReadWriteLock(), fusion=FusionSettings.of(settings),
        default_top_k=settings.default_top_k, graph=GraphDefaults.of(settings), graph_searcher=backend,
    )
    await backend.close()


async def test_every_search_body_for_random_identities_filters_on_tenant_and_readers(opensearch_search):
    cluster, search = opensearch_search
    rng = random.Random(20261124)
    sent = []
    for _ in range(SEARCHES):
        identity = Identity(
            tenant=rng.choice(("north", "south", "east")),
            user=rng.choice(("u0", "u1", "ann", "über")),
            groups=sorted(rng.sample(("g0", "g1", "g2", "g3", "staff"), rng.randint(0, 3))),
            scopes=["chat"],
        )
        request = SearchRequest(
            query=rng.choice(TEXTS), mode=rng.choice(("dense", "bm25", "hybrid")),
            top_k=rng.randint(1, 50), filters=rng.choice(FILTERS),
        )
        before = len(cluster.calls)
        await search.search(request, AccessFilter.of(identity))
        searches = [call for call in cluster.calls[before:] if call.path.endswith("/_search")]
        assert len(searches) == 1, [call.path for call in cluster.calls[before:]]
        sent.append((identity, request.mode, searches[0].body))

    assert {mode for _, mode, _ in sent} == {"dense", "bm25", "hybrid"}
    leaks = [
        (identity.model_dump(), mode, problem)
        for identity, mode, body in sent
        for problem in unguarded(body["query"], expected_clauses(identity))
    ]
    assert leaks == []


def test_the_walk_finds_an_unguarded_clause() -> None:
    # The checker itself: a body missing the access filter in one branch is reported.
    guard = expected_clauses(Identity(tenant="north", user="u0", scopes=["chat"]))
    bm25 = {"bool": {"must": [{"multi_match": {"query": "q"}}], "filter": guard}}
    bare_knn = {"knn": {"embedding": {"vector": [0.1], "k": 5}}}
    other_tenant = {"bool": {"must": [{"multi_match": {"query": "q"}}], "filter": [{"term": {"tenant": "south"}}, guard[1]]}}
    assert unguarded(bm25, guard) == []
    assert unguarded({"hybrid": {"queries": [bare_knn, bm25]}}, guard) == ["knn on embedding without the access filter"]
    assert unguarded(other_tenant, guard) == ["multi_match without the access filter"]
    assert unguarded({"function_score": {}}, guard) == ["unknown clause function_score: teach this test whether it selects documents"]
