"""A process that writes to an ``EmbeddedIndex`` until it is killed: the subject of
``test_crash_consistency.py``.

    python crash_writer.py INDEX_DIR SEED ROUND [--die-at POINT --die-on-call N]

It replaces, deletes and multi-document-replaces documents drawn from a pool of 24, with random
unit vectors (dimension ``DIM``). Before each write it prints ``begin {json}`` (the chunk ids every
touched document will have after it, [] for a delete) and after it returns ``done``, both flushed,
so the parent knows what was acknowledged and what was in flight when the kill came.

``--die-at`` makes the process SIGKILL itself at a chosen point of the ``N``th write instead of
waiting for the parent's random kill:
- ``after_commit``: tantivy committed, the graph not yet updated;
- ``mid_graph_write``: half of the new graph file written to its temporary name;
- ``before_meta``: the new graph renamed into place, ``meta.json`` not yet written;
- ``before_entity_graph``: tantivy committed, the structure-and-entity graph not yet updated;
- ``mid_entity_graph_write``: inside the SQLite transaction of the graph's rows (``graph.sqlite``),
  the replaced rows deleted, the new ones not yet inserted nor committed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
from pathlib import Path

import numpy as np

from rag_retriever.backends import embedded
from rag_retriever.backends.embedded import EmbeddedIndex
from rag_retriever.entity_graph_store import GraphStore
from rag_retriever.records import ChunkRecord
from retriever_builders import HNSW

DIM = 32
POOL = [f"doc{i:02d}" for i in range(24)]
TENANT = "default"


def die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def arm(point: str, on_call: int) -> None:
    """Replace the index's method at ``point`` by one that kills the process on its ``on_call``th call."""
    calls = {"n": 0}

    def due() -> bool:
        calls["n"] += 1
        return calls["n"] == on_call

    if point == "after_commit":
        original_update = EmbeddedIndex._update_graph

        def update_graph(self, *args, **kwargs):
            if due():
                die()
            return original_update(self, *args, **kwargs)

        EmbeddedIndex._update_graph = update_graph
    elif point == "mid_graph_write":
        original_save = EmbeddedIndex._save_graph

        def save_graph(self):
            if due():
                tmp = self.index_dir / (embedded.HNSW_FILE + ".tmp")
                self._hnsw.save_index(str(tmp))
                with open(tmp, "r+b") as handle:
                    handle.truncate(tmp.stat().st_size // 2)
                die()
            return original_save(self)

        EmbeddedIndex._save_graph = save_graph
    elif point == "before_meta":
        original_meta = EmbeddedIndex._write_meta

        def write_meta(self):
            if due():
                die()
            return original_meta(self)

        EmbeddedIndex._write_meta = write_meta
    elif point == "before_entity_graph":
        original_entity = EmbeddedIndex._update_entity_graph

        def update_entity_graph(self, *args, **kwargs):
            if due():
                die()
            return original_entity(self, *args, **kwargs)

        EmbeddedIndex._update_entity_graph = update_entity_graph
    elif point == "mid_entity_graph_write":
        original_apply = GraphStore.apply

        def apply(self, deleted, added):
            if due():
                self._db.execute("BEGIN IMMEDIATE")
                self._db.executemany("DELETE FROM chunks WHERE label = ?", [(int(label),) for label in deleted])
                self._db.executemany("INSERT INTO chunks (label, node) VALUES (?, '[')", [(int(label),) for label, _ in list(added)[:1]])
                die()
            return original_apply(self, deleted, added)

        GraphStore.apply = apply
    else:
        raise SystemExit(f"unknown --die-at {point!r}")


def version(rng: random.Random, doc_id: str, round_: int, op: int) -> list[ChunkRecord]:
    return [
        ChunkRecord(
            chunk_id=f"{doc_id}-r{round_}-o{op}-{i}",
            doc_id=doc_id,
            text=f"{doc_id} round {round_} write {op} part {i} " + " ".join(rng.choices(["ice", "sand", "lake", "dune"], k=8))
            + " near " + rng.choice(["Lake Baikal", "the Sahara Desert", "Mount Fuji", "Port of Spain"]) + ".",
            chunk_index=i,
            source=f"{doc_id}.txt",
            title=doc_id.upper(),
            section_path=["Part " + str(i % 2)],
            tenant=TENANT,
        )
        for i in range(rng.randint(1, 6))
    ]


def unit_vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    vectors = rng.standard_normal((n, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("index_dir", type=Path)
    parser.add_argument("seed", type=int)
    parser.add_argument("round", type=int)
    parser.add_argument("--die-at")
    parser.add_argument("--die-on-call", type=int, default=1)
    args = parser.parse_args()
    if args.die_at:
        arm(args.die_at, args.die_on_call)
    rng = random.Random(args.seed)
    vector_rng = np.random.default_rng(args.seed)
    index = EmbeddedIndex(args.index_dir, DIM, HNSW)
    print("open", flush=True)
    op = 0
    while True:
        op += 1
        roll = rng.random()
        if roll < 0.15:
            doc_id = rng.choice(POOL)
            print("begin " + json.dumps({doc_id: []}), flush=True)
            index.delete_document(doc_id, tenant=TENANT)
        else:
            doc_ids = rng.sample(POOL, 3 if roll < 0.4 else 1)
            versions = {doc_id: version(rng, doc_id, args.round, op) for doc_id in doc_ids}
            chunks = [chunk for doc_chunks in versions.values() for chunk in doc_chunks]
            print("begin " + json.dumps({d: [c.chunk_id for c in v] for d, v in versions.items()}), flush=True)
            index.replace_documents(doc_ids, chunks, unit_vectors(vector_rng, len(chunks)), tenant=TENANT)
        print("done", flush=True)


if __name__ == "__main__":
    sys.exit(main())
