"""Retriever fixtures: the real MiniLM embedder (loaded once) and a small corpus on distinct topics."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.schemas import DocumentIn
from rag_retriever.backends.embedded import EmbeddedBackend, EmbeddedIndex
from rag_retriever.chunking import Chunker
from rag_retriever.ingestion import Ingestor, to_source_document
from rag_retriever.records import ChunkRecord
from rag_retriever.tokens import EmbedderTokenizer
from retriever_builders import HNSW, embedded_ingestor, settings_chunker

#: (doc_id, tenant, title, text): one short document per topic, two tenants.
CORPUS = [
    ("photosynthesis", "acme", "Photosynthesis",
     "Photosynthesis lets green plants convert light energy into chemical energy. Chlorophyll in the "
     "chloroplasts absorbs light, and the plant builds glucose from carbon dioxide and water, releasing oxygen."),
    ("volcanoes", "globex", "Volcanoes",
     "A volcano erupts when magma rises through the crust. Lava, ash and volcanic gases escape from the vent, "
     "and stratovolcanoes such as Mount Fuji are built from layers of hardened lava and tephra."),
    ("sourdough", "acme", "Sourdough baking",
     "Sourdough bread is leavened by a starter of wild yeast and lactic acid bacteria. Bakers feed the starter "
     "with flour and water, and a high hydration dough gives an open crumb and a crisp crust."),
    ("chess", "globex", "Chess openings",
     "The Sicilian Defence answers 1.e4 with c5 and leads to sharp, unbalanced positions. The Queen's Gambit "
     "offers a pawn to gain control of the centre."),
    ("tcp", "acme", "TCP handshake",
     "TCP opens a connection with a three-way handshake: SYN, SYN-ACK and ACK. Sequence numbers and "
     "acknowledgements let the protocol retransmit lost segments and deliver bytes in order."),
    ("honeybees", "globex", "Honeybees",
     "Honeybees communicate the location of flowers with the waggle dance. A colony has one queen, thousands "
     "of worker bees and a few drones, and it stores nectar as honey in wax combs."),
    ("jazz", "acme", "Jazz improvisation",
     "Jazz musicians improvise melodies over chord changes. A saxophonist may play a solo over a twelve-bar "
     "blues, using swing rhythm and blue notes."),
    ("black-holes", "globex", "Black holes",
     "A black hole is a region of spacetime where gravity is so strong that nothing, not even light, can "
     "escape past the event horizon. Stellar black holes form when massive stars collapse."),
    ("marathon", "acme", "Marathon training",
     "Marathon runners build endurance with a weekly long run and gradually increase their mileage. Tapering "
     "in the final weeks before the race lets the legs recover."),
    ("python-gil", "globex", "The Python GIL",
     "CPython's global interpreter lock, the GIL, allows only one thread to execute Python bytecode at a time, "
     "so CPU-bound threads do not run in parallel; multiprocessing sidesteps it."),
    ("coral-reefs", "acme", "Coral reefs",
     "Coral reefs are built by colonies of tiny polyps that secrete calcium carbonate. Warming oceans cause "
     "coral bleaching, when the polyps expel the symbiotic algae living in their tissue."),
    ("tea-ceremony", "globex", "Japanese tea ceremony",
     "In the Japanese tea ceremony the host prepares powdered matcha green tea with a bamboo whisk. The ritual "
     "values harmony, respect, purity and tranquillity."),
]


@pytest.fixture(scope="session")
def corpus_documents() -> list[DocumentIn]:
    return [
        DocumentIn(id=doc_id, text=text, title=title, source=f"{doc_id}.txt", metadata={"tenant": tenant})
        for doc_id, tenant, title, text in CORPUS
    ]


@pytest.fixture(scope="session")
def embedder() -> SentenceTransformerEmbedder:
    model = SentenceTransformerEmbedder("all-MiniLM-L6-v2", device="cpu")
    model.warm_up()
    return model


class CountingEmbedder:
    """The real embedder, counting the document texts it is asked to embed (a re-ingest that reuses
    stored vectors embeds none)."""

    def __init__(self, embedder: SentenceTransformerEmbedder) -> None:
        self._embedder = embedder
        self.dim = embedder.dim
        self.model_id = embedder.model_id
        self.texts = 0

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return self._embedder.encode_documents(texts)

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self._embedder.encode_queries(texts)


@pytest.fixture
def counting_embedder(embedder: SentenceTransformerEmbedder) -> CountingEmbedder:
    return CountingEmbedder(embedder)


@pytest.fixture(scope="session")
def tokenizer(embedder: SentenceTransformerEmbedder) -> EmbedderTokenizer:
    return EmbedderTokenizer(embedder)


@pytest.fixture(scope="session")
def corpus_chunks(
    embedder: SentenceTransformerEmbedder, tokenizer: EmbedderTokenizer, corpus_documents: list[DocumentIn]
) -> tuple[list[ChunkRecord], np.ndarray]:
    """The corpus chunked (one chunk per document) and embedded once for the whole session."""
    chunker = settings_chunker(tokenizer)
    documents = [to_source_document(document, document.metadata["tenant"]) for document in corpus_documents]
    chunks = [chunk for document in documents for chunk in chunker.chunk_document(document)]
    assert len(chunks) == len(CORPUS)
    return chunks, embedder.encode_documents([chunk.text for chunk in chunks])


@pytest.fixture(scope="session")
def corpus() -> list[tuple[str, str, str, str]]:
    return CORPUS


@pytest.fixture(scope="session")
def open_index() -> Callable[[Path], EmbeddedIndex]:
    """Opens an index directory (the synchronous engine) the way the service does for the test embedder."""

    def open_at(path: Path) -> EmbeddedIndex:
        return EmbeddedIndex(path, dim=384, hnsw=HNSW, model_id="all-MiniLM-L6-v2")

    return open_at


@pytest.fixture
def index(tmp_path: Path, open_index: Callable[[Path], EmbeddedIndex]) -> Iterator[EmbeddedIndex]:
    engine = open_index(tmp_path / "index")
    yield engine
    engine.close()


@pytest.fixture
def loaded_index(index: EmbeddedIndex, corpus_chunks: tuple[list[ChunkRecord], np.ndarray]) -> EmbeddedIndex:
    index.upsert(*corpus_chunks)
    return index


@pytest.fixture
async def backend(tmp_path: Path) -> AsyncIterator[EmbeddedBackend]:
    """The async ``SearchBackend`` the service uses, over a fresh directory."""
    opened = EmbeddedBackend(tmp_path / "backend", dim=384, hnsw=HNSW, model_id="all-MiniLM-L6-v2")
    yield opened
    await opened.close()


@pytest.fixture
def ingestor(backend: EmbeddedBackend, embedder: SentenceTransformerEmbedder, tokenizer: EmbedderTokenizer) -> Ingestor:
    return embedded_ingestor(backend, embedder, Chunker(tokenizer, chunk_tokens=60, chunk_overlap_tokens=15))
