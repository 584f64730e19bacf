"""The structure-and-entity graph of the embedded index: sparse, built at ingestion, kept in memory
and stored row by row (``entity_graph_store``).

Nodes are the chunks (by their HNSW/tantivy ``label``), their sections, their documents and
entities (``rag_retriever.entities``). Edges, all undirected with weight 1:

- chunk — section, section — document: the structure. A section is the chunk's ``section_path``
  (Markdown/HTML headings); a PDF chunk without one is in the section of its ``page``; anything else
  is in its document's single root section;
- chunk — entity for each heading and capitalised span of the chunk;
- document — entity for the document's title entity (so a passage that mentions "Shirley Temple"
  reaches the document titled "Shirley Temple" in two steps: the bridge of a two-hop question).

Like the vector graph, it is *derived* from tantivy, the source of truth: the index adds a write's
chunks and drops its replaced labels right after the tantivy commit, then writes exactly those rows
to ``graph.sqlite`` in one transaction (``GraphStore.apply``); on open, labels tantivy no longer has
are dropped and stored chunks the file lacks are re-extracted from their stored payloads
(``EmbeddedIndex._reconcile``). So a kill -9 at any
point leaves a graph that, once the index is open, matches the stored chunks exactly, and re-ingesting
a document replaces exactly its part of the graph (its old labels go, its new ones come).

Node ids for PageRank are made per query over a local neighbourhood (``neighbourhood``): nothing
here holds a global matrix, so a write costs only its own chunks.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rag_retriever.entities import EXTRACTOR_VERSION, chunk_entities
from rag_retriever.records import ChunkRecord


@dataclass(frozen=True, slots=True)
class ChunkNode:
    chunk_id: str
    document: str
    section: str
    title_entity: str
    entities: tuple[str, ...]

    def to_json(self) -> list[Any]:
        return [self.chunk_id, self.document, self.section, self.title_entity, list(self.entities)]

    @classmethod
    def from_json(cls, row: list[Any]) -> ChunkNode:
        return cls(row[0], row[1], row[2], row[3], tuple(row[4]))


def chunk_node(chunk: ChunkRecord) -> ChunkNode:
    """A chunk's place in the graph, from what the chunker stored with it."""
    document = f"{chunk.tenant}\x00{chunk.doc_id}"
    if chunk.section_path:
        section = f"{document}\x00s\x00" + "\x1f".join(chunk.section_path)
    elif chunk.page is not None:
        section = f"{document}\x00p\x00{chunk.page}"
    else:
        section = f"{document}\x00root"
    title_name, names = chunk_entities(chunk.title, chunk.section_path, chunk.text)
    return ChunkNode(chunk.chunk_id, document, section, title_name, tuple(names))


class EntityGraph:
    """In-memory adjacency of the graph (sets keyed by node), kept in step with the index's writes."""

    def __init__(self) -> None:
        self.nodes: dict[int, ChunkNode] = {}
        self.label_of: dict[str, int] = {}
        self.entity_chunks: dict[str, set[int]] = defaultdict(set)
        #: title entity -> documents with that title
        self.entity_documents: dict[str, set[str]] = defaultdict(set)
        self.section_chunks: dict[str, set[int]] = defaultdict(set)
        self.document_sections: dict[str, set[str]] = defaultdict(set)
        self.section_document: dict[str, str] = {}
        #: document -> its title entity (one per document: its chunks share the title)
        self.document_title: dict[str, str] = {}
        self.document_chunks: dict[str, int] = defaultdict(int)

    # ------------------------------------------------------------------ writes

    def add(self, label: int, node: ChunkNode) -> None:
        if label in self.nodes:
            self.remove([label])
        self.nodes[label] = node
        self.label_of[node.chunk_id] = label
        for name in node.entities:
            self.entity_chunks[name].add(label)
        self.section_chunks[node.section].add(label)
        self.document_sections[node.document].add(node.section)
        self.section_document[node.section] = node.document
        self.document_chunks[node.document] += 1
        if node.title_entity:
            self.document_title[node.document] = node.title_entity
            self.entity_documents[node.title_entity].add(node.document)

    def add_chunks(self, labelled: Iterable[tuple[int, ChunkRecord]]) -> None:
        for label, chunk in labelled:
            self.add(label, chunk_node(chunk))

    def remove(self, labels: Iterable[int]) -> None:
        for label in labels:
            node = self.nodes.pop(label, None)
            if node is None:
                continue
            if self.label_of.get(node.chunk_id) == label:
                del self.label_of[node.chunk_id]
            for name in node.entities:
                _discard(self.entity_chunks, name, label)
            _discard(self.section_chunks, node.section, label)
            if node.section not in self.section_chunks:
                _discard(self.document_sections, node.document, node.section)
                self.section_document.pop(node.section, None)
            self.document_chunks[node.document] -= 1
            if self.document_chunks[node.document] <= 0:
                del self.document_chunks[node.document]
                title = self.document_title.pop(node.document, "")
                if title:
                    _discard(self.entity_documents, title, node.document)

    # ------------------------------------------------------------------ reads

    def labels(self) -> set[int]:
        return set(self.nodes)

    def is_entity(self, name: str) -> bool:
        return name in self.entity_chunks or name in self.entity_documents

    def is_title(self, name: str) -> bool:
        """Whether ``name`` is the title entity of an indexed document."""
        return name in self.entity_documents

    def entity_degree(self, name: str) -> int:
        """Chunks that mention ``name`` plus documents titled ``name``: what the hub cap counts."""
        return len(self.entity_chunks.get(name, ())) + len(self.entity_documents.get(name, ()))

    def entity_labels(self, name: str) -> set[int]:
        """Chunks that mention ``name`` and the chunks of documents titled ``name``."""
        labels = set(self.entity_chunks.get(name, ()))
        for document in self.entity_documents.get(name, ()):
            for section in self.document_sections.get(document, ()):
                labels.update(self.section_chunks.get(section, ()))
        return labels

    def neighbours(self, node: str) -> list[str]:
        """Neighbours of a node id (``c:<label>``, ``s:<section>``, ``d:<document>``, ``e:<entity>``)."""
        kind, key = node[0], node[2:]
        if kind == "c":
            chunk = self.nodes.get(int(key))
            if chunk is None:
                return []
            return [f"s:{chunk.section}", *(f"e:{name}" for name in chunk.entities)]
        if kind == "s":
            out = [f"c:{label}" for label in self.section_chunks.get(key, ())]
            document = self.section_document.get(key)
            return [*out, f"d:{document}"] if document is not None else out
        if kind == "d":
            out = [f"s:{section}" for section in self.document_sections.get(key, ())]
            title = self.document_title.get(key)
            return [*out, f"e:{title}"] if title else out
        out = [f"c:{label}" for label in self.entity_chunks.get(key, ())]
        return [*out, *(f"d:{document}" for document in self.entity_documents.get(key, ()))]

    # ------------------------------------------------------------------ comparison

    def to_json(self) -> dict[str, Any]:
        """Every chunk's node by label, with the extractor version: equal for equal graphs."""
        return {
            "extractor": EXTRACTOR_VERSION,
            "chunks": {str(label): node.to_json() for label, node in sorted(self.nodes.items())},
        }


def _discard(index: dict[str, set[Any]], key: str, value: Any) -> None:
    members = index.get(key)
    if members is None:
        return
    members.discard(value)
    if not members:
        del index[key]
