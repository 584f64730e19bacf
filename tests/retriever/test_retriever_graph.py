"""The structure-and-entity graph and its retrieval signals (issue 16), on real indexes with the real
embedder: the entity heuristic, personalised PageRank against networkx, the graph kept in step with
ingestion (incremental, persisted, rebuilt when lost), and the second hop / PageRank reaching a
bridge passage the first pass ranks low, never past the caller's access."""

from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest

from rag_common.schemas import DocumentAcl, DocumentIn, SearchRequest
from rag_retriever.document_access import DocumentAccess
from rag_retriever.backends.base import AccessFilter, FusionSettings, GraphOptions
from rag_retriever.backends import embedded
from rag_retriever.backends.embedded import EmbeddedBackend
from rag_retriever.entities import capitalised_spans, chunk_entities, query_entities, title_entity
from rag_retriever.entity_graph_store import GRAPH_DB, LEGACY_GRAPH_FILE, GraphStore
from rag_retriever.graph_retrieval import _walk
from rag_retriever.locking import ReadWriteLock
from rag_retriever.pagerank import personalised_pagerank
from rag_retriever.search_service import GraphDefaults, SearchService
from rag_retriever.settings import RetrieverSettings
from retriever_builders import HNSW, embedded_ingestor, settings_chunker

# ------------------------------------------------------------------------------ entities


def test_capitalised_spans_follow_the_documented_rules() -> None:
    text = (
        "Demon Dice, originally published as Chaos Progenitus, is a dice game created by Lester Smith "
        "(designer of the better-known Dragon Dice) and Tim Brown. The Bank of America is here. However, "
        "In 1999 he left."
    )
    assert capitalised_spans(text) == [
        "demon dice", "chaos progenitus", "lester smith", "dragon dice", "tim brown", "bank of america",
    ]


def test_titles_headings_and_queries() -> None:
    assert title_entity("Kiss and Tell (1945 film)") == "kiss and tell"
    title, names = chunk_entities("Shirley Temple", ["Career", "Diplomacy"], "Shirley Temple met Gerald Ford.")
    assert title == "shirley temple"
    assert names == ["career", "diplomacy", "gerald ford"]  # never the title itself
    known = {"first for women"}.__contains__
    assert query_entities("Which magazine was started first Arthur's Magazine or First for Women?", known) == [
        "arthur magazine", "first for women",
    ]
    assert query_entities("which magazine came first, arthur's or first for women?", known) == ["first for women"]


# ------------------------------------------------------------------------------ PageRank


def test_personalised_pagerank_equals_networkx() -> None:
    rng = np.random.default_rng(7)
    edges = sorted({tuple(sorted(map(int, rng.choice(30, 2, replace=False)))) for _ in range(60)})
    seeds = {0: 2.0, 5: 1.0}
    ours = personalised_pagerank(31, edges, seeds, damping=0.5, tol=1e-12, max_iter=500)  # node 30: isolated
    graph = nx.Graph()
    graph.add_nodes_from(range(31))
    graph.add_edges_from(edges)
    theirs = nx.pagerank(graph, alpha=0.5, personalization={0: 2.0, 5: 1.0}, tol=1e-14, max_iter=1000)
    assert ours.sum() == pytest.approx(1.0)
    assert np.allclose(ours, [theirs[node] for node in range(31)], atol=1e-9)


def test_pagerank_needs_a_seed() -> None:
    with pytest.raises(ValueError):
        personalised_pagerank(3, [(0, 1)], {}, 0.5)


# ------------------------------------------------------------------------------ the graph at ingestion

BRIDGE = [
    DocumentIn(
        id="kiss-and-tell", title="Kiss and Tell (1945 film)", source="kiss.txt",
        text="Kiss and Tell is a 1945 American comedy film starring then 17-year-old Shirley Temple as Corliss "
        "Archer. In the film, two teenage girls cause their respective parents much concern.",
    ),
    DocumentIn(
        id="shirley-temple", title="Shirley Temple", source="temple.txt",
        text="Shirley Temple Black was an American actress, singer and dancer, who later served as Chief of "
        "Protocol of the United States and as United States Ambassador to Ghana and to Czechoslovakia.",
    ),
    *[
        DocumentIn(
            id=f"film-{i}", title=f"Comedy film {i}", source=f"film{i}.txt",
            text=f"Comedy film {i} is an American comedy film about a teenage girl and her parents, who played "
            f"parts in a film of {1940 + i}; the woman who portrayed the mother held no position.",
        )
        for i in range(8)
    ],
]
QUESTION = "What government position was held by the woman who portrayed Corliss Archer in the film Kiss and Tell?"
EVERYONE = AccessFilter("default", ("*",))


async def _ingested(path: Path, embedder, tokenizer, documents) -> tuple[EmbeddedBackend, ReadWriteLock]:
    backend = EmbeddedBackend(path, dim=embedder.dim, hnsw=HNSW, model_id=embedder.model_id)
    lock = ReadWriteLock()
    await embedded_ingestor(backend, embedder, settings_chunker(tokenizer), lock).ingest(documents, access=DocumentAccess.managing("default"))
    return backend, lock


def _label(graph, doc_id: str) -> int:
    """The label of ``doc_id``'s only chunk."""
    (label,) = [label for label, node in graph.nodes.items() if node.document == f"default\x00{doc_id}"]
    return label


async def test_graph_is_built_at_ingestion_incremental_and_persisted(tmp_path, embedder, tokenizer) -> None:
    path = tmp_path / "index"
    backend, lock = await _ingested(path, embedder, tokenizer, BRIDGE)
    graph = backend.index.graph
    assert graph.entity_documents["shirley temple"] == {"default\x00shirley-temple"}
    kiss = _label(graph, "kiss-and-tell")
    assert {"shirley temple", "corliss archer"} <= set(graph.nodes[kiss].entities)
    assert graph.entity_labels("shirley temple") >= {kiss, _label(graph, "shirley-temple")}

    # Re-ingesting a changed document replaces its part of the graph, and only its part.
    changed = BRIDGE[0].model_copy(update={"text": "Kiss and Tell is a 1945 film starring Jean Arthur."})
    await embedded_ingestor(backend, embedder, settings_chunker(tokenizer), lock).ingest([changed], access=DocumentAccess.managing("default"))
    kiss = _label(graph, "kiss-and-tell")
    assert "jean arthur" in graph.nodes[kiss].entities
    assert "corliss archer" not in graph.entity_chunks
    assert _label(graph, "shirley-temple") in graph.entity_labels("shirley temple")  # through its title
    assert backend.index.consistency().consistent
    saved = graph.to_json()
    await backend.close()

    reopened = EmbeddedBackend(path, dim=embedder.dim, hnsw=HNSW, model_id=embedder.model_id)
    assert reopened.index.graph.to_json() == saved  # read back from graph.sqlite
    await reopened.close()
    (path / GRAPH_DB).unlink()  # lost: rebuilt from the stored chunks on open
    rebuilt = EmbeddedBackend(path, dim=embedder.dim, hnsw=HNSW, model_id=embedder.model_id)
    assert rebuilt.index.graph.to_json() == saved
    await rebuilt.delete_document("kiss-and-tell", tenant="default")
    assert "jean arthur" not in rebuilt.index.graph.entity_chunks
    assert rebuilt.index.consistency().consistent
    await rebuilt.close()


async def test_a_write_stores_only_its_own_rows_and_a_restart_reads_them(tmp_path, embedder, tokenizer, monkeypatch) -> None:
    path = tmp_path / "index"
    backend, lock = await _ingested(path, embedder, tokenizer, BRIDGE)
    written: list[tuple[list[int], list[int]]] = []
    original = GraphStore.apply

    def apply(self, deleted, added):
        added = list(added)
        written.append((sorted(deleted), [label for label, _ in added]))
        return original(self, deleted, added)

    monkeypatch.setattr(GraphStore, "apply", apply)
    old = _label(backend.index.graph, "kiss-and-tell")
    changed = BRIDGE[0].model_copy(update={"text": "Kiss and Tell is a 1945 film starring Jean Arthur."})
    await embedded_ingestor(backend, embedder, settings_chunker(tokenizer), lock).ingest([changed], access=DocumentAccess.managing("default"))
    new = _label(backend.index.graph, "kiss-and-tell")
    assert written == [([old], [new])]  # one row out, one in: not the other nine documents' rows
    await backend.delete_document("film-3", tenant="default")
    assert written[-1][1] == [] and len(written[-1][0]) == 1
    saved = backend.index.graph.to_json()
    await backend.close()

    reopened = EmbeddedBackend(path, dim=embedder.dim, hnsw=HNSW, model_id=embedder.model_id)
    assert reopened.index.graph.to_json() == saved
    assert "jean arthur" in reopened.index.graph.nodes[new].entities
    assert not any(node.document == "default\x00film-3" for node in reopened.index.graph.nodes.values())
    assert GraphStore(path).labels() == set(reopened.index.graph.nodes)
    await reopened.close()


async def test_a_graph_json_of_format_1_is_migrated_into_graph_sqlite(tmp_path, embedder, tokenizer, monkeypatch) -> None:
    path = tmp_path / "index"
    backend, _ = await _ingested(path, embedder, tokenizer, BRIDGE)
    saved = backend.index.graph.to_json()
    await backend.close()
    # What the previous code left: graph.json (format 1), no graph.sqlite.
    legacy = {"format": 1, "extractor": saved["extractor"], "chunks": saved["chunks"]}
    (path / LEGACY_GRAPH_FILE).write_text(json.dumps(legacy))
    (path / GRAPH_DB).unlink()

    def no_extraction(chunk):
        raise AssertionError("migrated, not re-extracted from the stored chunks")

    monkeypatch.setattr(embedded.entity_upkeep, "chunk_node", no_extraction)
    reopened = EmbeddedBackend(path, dim=embedder.dim, hnsw=HNSW, model_id=embedder.model_id)
    assert reopened.index.graph.to_json() == saved
    assert not (path / LEGACY_GRAPH_FILE).exists() and (path / GRAPH_DB).exists()
    assert reopened.index.consistency().consistent
    await reopened.close()
    store = GraphStore(path)
    assert store.current() and len(store.labels()) == len(saved["chunks"])
    store.close()


# ------------------------------------------------------------------------------ search signals


async def _search(backend, lock, embedder, *, graph: bool, hop: bool, access=EVERYONE, top_k: int = 3) -> list[str]:
    settings = RetrieverSettings()
    service = SearchService(
        backend, embedder, lock, fusion=FusionSettings.of(settings), default_top_k=settings.default_top_k,
        graph=GraphDefaults.of(settings), graph_searcher=backend,
    )
    request = SearchRequest(query=QUESTION, top_k=top_k, mode="hybrid", graph=graph, second_hop=hop)
    response = await service.search(request, access)
    if graph or hop:
        assert "graph" in response.timings_ms
    return [passage.doc_id for passage in response.passages]


async def test_the_second_hop_and_pagerank_reach_the_bridge_passage(tmp_path, embedder, tokenizer) -> None:
    backend, lock = await _ingested(tmp_path / "index", embedder, tokenizer, BRIDGE)
    plain = await _search(backend, lock, embedder, graph=False, hop=False)
    assert plain[0] == "kiss-and-tell" and "shirley-temple" not in plain
    assert "shirley-temple" in await _search(backend, lock, embedder, graph=False, hop=True)
    # PageRank alone walks four steps to it (passage → entity → document → section → passage): the
    # walk reaches it, but with less mass than the seeds pass among themselves, so it does not move
    # it up here (nor, measured, on HotpotQA: docs/evaluation.md); PPR stays off by default.
    index = backend.index
    seeds = index.search_bm25(QUESTION, 5, access=EVERYONE)
    walk = _walk(index, seeds, {"corliss archer"}, GraphOptions.of(RetrieverSettings()))
    assert walk.get(_label(index.graph, "shirley-temple"), 0.0) > 0.0
    both = await _search(backend, lock, embedder, graph=True, hop=True)
    assert both[0] == "kiss-and-tell" and "shirley-temple" in both
    await backend.close()


async def test_graph_signals_never_return_what_the_caller_may_not_read(tmp_path, embedder, tokenizer) -> None:
    private = [d.model_copy(update={"acl": DocumentAcl(users=["ann"])}) if d.id == "shirley-temple" else d for d in BRIDGE]
    backend, lock = await _ingested(tmp_path / "index", embedder, tokenizer, private)
    bob = AccessFilter("default", ("*", "user:bob"))
    ann = AccessFilter("default", ("*", "user:ann"))
    for graph, hop in ((True, False), (False, True), (True, True)):
        assert "shirley-temple" not in await _search(backend, lock, embedder, graph=graph, hop=hop, access=bob, top_k=10)
        assert "shirley-temple" in await _search(backend, lock, embedder, graph=graph, hop=hop, access=ann, top_k=10)
    other_tenant = AccessFilter("globex", ("*",))
    assert await _search(backend, lock, embedder, graph=True, hop=True, access=other_tenant) == []
    await backend.close()


async def test_the_setting_is_the_default_and_the_request_overrides_it(tmp_path, embedder, tokenizer) -> None:
    backend, lock = await _ingested(tmp_path / "index", embedder, tokenizer, BRIDGE)
    settings = RetrieverSettings(graph_ppr=True, graph_second_hop=True)
    on = SearchService(
        backend, embedder, lock, fusion=FusionSettings.of(settings), default_top_k=settings.default_top_k,
        graph=GraphDefaults.of(settings), graph_searcher=backend,
    )
    response = await on.search(SearchRequest(query=QUESTION, top_k=3), EVERYONE)
    assert "graph" in response.timings_ms
    response = await on.search(SearchRequest(query=QUESTION, top_k=3, graph=False, second_hop=False), EVERYONE)
    assert "graph" not in response.timings_ms
    await backend.close()
