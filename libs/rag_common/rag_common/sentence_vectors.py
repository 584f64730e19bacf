"""Which sentences of a chunk get a vector, what string is embedded for each, and how vectors travel.

The extractive answerer scores each sentence of a passage by the cosine of the question with
``encode_documents([context + sentence])``, where ``context`` is the passage's ``"Title > Section: "``
(:func:`sentence_context`). The retriever can compute those vectors once per chunk at ingestion
(``RETRIEVER_SENTENCE_VECTORS``) and return them with the hits; answering then embeds nothing but
the question. That only changes no answer if both sides agree on every detail, so the rule lives
here, in the shared package, and neither service keeps a copy:

- sentences are :func:`rag_common.sentences.sentence_spans` of the chunk's text (the evidence units'
  own cut), kept when they have at least :data:`MIN_WORDS` words (:func:`word_count`), the answerer's
  default eligibility;
- the embedded string is ``sentence_context(title, section_path) + text[start:end]``.

How the vectors are made is the retriever's ``RETRIEVER_SENTENCE_VECTORS`` (:data:`SentenceVectorMode`):
``pooled`` (default) averages each sentence's token states, with those of the chunk's context lines,
in the chunk's own encoder pass (:func:`chunk_pools`; ingestion pays a mean per sentence, not a second
pass); ``embedded`` embeds each string on its own (a second pass, about twice the ingestion CPU, and
the exact vector the answerer would compute); ``off`` stores none. The stored
:class:`~rag_common.schemas.SentenceVectors` says which (``method``).

A consumer never trusts the rule blindly: :func:`known_vectors` keys each stored vector by the exact
string that was embedded for it, and a consumer uses a vector only for that exact string (embedding
the rest). A passage whose title changed since ingestion, a sentence the answerer cut short, or an
answerer configured with fewer ``min_words`` simply falls back to embedding.
"""

from __future__ import annotations

import base64
from collections.abc import Collection, Iterable, Sequence
from typing import Literal

import numpy as np

from rag_common.embedders.base import Embedder
from rag_common.schemas import Passage, SentenceVectors
from rag_common.sentences import sentence_spans

__all__ = [
    "MIN_WORDS",
    "SentenceVectorMode",
    "chunk_pools",
    "encode_unknown",
    "known_vectors",
    "pack",
    "scorable_spans",
    "sentence_context",
    "sentence_inputs",
    "sentence_texts",
    "stored_vectors",
    "unpack",
    "word_count",
]

#: ``RETRIEVER_SENTENCE_VECTORS``: how each chunk's sentence vectors are made at ingestion, if at all.
SentenceVectorMode = Literal["off", "pooled", "embedded"]
#: Every method a stored vector can have: what a consumer accepts unless it says otherwise.
ANY_METHOD = ("embedded", "pooled")

#: Fewest words a sentence needs to be scored (the extractive answerer's default ``min_words``):
#: shorter units (headings, bullets) rarely answer anything.
MIN_WORDS = 4


#: How far from length 1 a stored vector may be (float32 rounding of a normalised vector is ~1e-7).
UNIT_TOLERANCE = 1e-3


def word_count(text: str) -> int:
    """Whitespace-separated tokens with a letter or digit in them."""
    return sum(1 for token in text.split() if any(char.isalnum() for char in token))


def sentence_context(title: str, section_path: Sequence[str]) -> str:
    """``"Title > Section: "``: what a sentence is about when it does not say so itself; ``""`` when
    the passage has neither a title nor a section path (a section equal to the title is skipped)."""
    parts = [title.strip()] if title.strip() else []
    parts += [part.strip() for part in section_path if part.strip() and part.strip() != title.strip()]
    return f"{' > '.join(parts)}: " if parts else ""


def scorable_spans(text: str, *, min_words: int = MIN_WORDS, language: str | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of each sentence of ``text`` (cut for ``language``, the chunk's) with at least
    ``min_words`` words."""
    return [
        (start, end) for start, end in sentence_spans(text, language) if word_count(text[start:end]) >= min_words
    ]


def sentence_texts(context: str, text: str, spans: Iterable[tuple[int, int]]) -> list[str]:
    """The strings embedded for ``spans`` of ``text``: ``context`` then the sentence, verbatim."""
    return [f"{context}{text[start:end]}" for start, end in spans]


def sentence_inputs(
    text: str, title: str, section_path: Sequence[str], *, min_words: int = MIN_WORDS, language: str | None = None
) -> tuple[str, list[tuple[int, int]], list[str]]:
    """What to embed for one chunk (in ``language``, ``ChunkRecord.language``): its context, its
    scorable spans and the string of each."""
    context = sentence_context(title, section_path)
    spans = scorable_spans(text, min_words=min_words, language=language)
    return context, spans, sentence_texts(context, text, spans)


def chunk_pools(embedded: str, text: str, spans: Sequence[tuple[int, int]]) -> list[tuple[tuple[int, int], ...]] | None:
    """Per sentence span of ``text``, the character ranges of ``embedded`` (the string the chunk was
    embedded as: ``text`` within the embedding template's context) whose tokens make its pooled vector:
    the context lines before the text, then the sentence. None when ``text`` is not in ``embedded``."""
    offset = embedded.rfind(text)
    if offset < 0:
        return None
    context = ((0, offset),) if embedded[:offset].strip() else ()
    return [(*context, (offset + start, offset + end)) for start, end in spans]


def pack(
    context: str, spans: Sequence[tuple[int, int]], vectors: np.ndarray, *, method: str = "embedded"
) -> SentenceVectors:
    """The wire form of ``vectors`` (one row per span, made by ``method``), float32 values exact."""
    array = np.ascontiguousarray(vectors, dtype="<f4")
    if array.ndim != 2 or array.shape[0] != len(spans):
        raise ValueError(f"expected {len(spans)} rows of vectors, got shape {array.shape}")
    return SentenceVectors(
        context=context,
        spans=[[int(start), int(end)] for start, end in spans],
        dim=int(array.shape[1]),
        method=method,
        vectors=base64.b64encode(array.tobytes()).decode("ascii"),
    )


def unpack(stored: SentenceVectors) -> np.ndarray:
    """``(len(spans), dim)`` float32, as packed (the schema already checked the size)."""
    raw = base64.b64decode(stored.vectors)
    return np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(len(stored.spans), stored.dim)


def known_vectors(
    passages: Iterable[Passage], dim: int, *, methods: Collection[str] = ANY_METHOD
) -> dict[str, np.ndarray]:
    """``{embedded string: vector}`` of every stored sentence vector of ``passages`` (see
    :func:`stored_vectors`)."""
    unique = {id(passage): passage for passage in passages}.values()
    return stored_vectors(((passage.text, passage.sentence_vectors) for passage in unique), dim, methods=methods)


def stored_vectors(
    chunks: Iterable[tuple[str, SentenceVectors | None]], dim: int, *, methods: Collection[str] = ANY_METHOD
) -> dict[str, np.ndarray]:
    """``{embedded string: vector}`` of the sentence vectors stored with ``(text, vectors)`` chunks,
    those of dimension ``dim`` (the consumer's embedder's) that are unit vectors, as every embedder
    makes them (anything else did not come from one: it is ignored, and that string embedded). Keyed
    by the string itself, so a consumer that looks up the string it would embed gets a vector only
    when it is that string's; only vectors made by one of ``methods``."""
    known: dict[str, np.ndarray] = {}
    for text, stored in chunks:
        if stored is None or stored.dim != dim or stored.method not in methods:
            continue
        spans = [(start, end) for start, end in stored.spans]
        rows = unpack(stored)
        with np.errstate(all="ignore"):
            unit = np.isfinite(rows).all(axis=1) & (np.abs(np.linalg.norm(rows, axis=1) - 1.0) <= UNIT_TOLERANCE)
        for string, row, ok in zip(sentence_texts(stored.context, text, spans), rows, unit):
            if ok:
                known.setdefault(string, row)
    return known


def encode_unknown(embedder: Embedder, texts: Sequence[str], known: dict[str, np.ndarray]) -> np.ndarray:
    """``embedder.encode_documents(texts)``, except that a text in ``known`` takes its stored vector:
    one call for the texts not known (none when all are), rows in ``texts`` order."""
    vectors = np.empty((len(texts), embedder.dim), dtype=np.float32)
    missing = [row for row, text in enumerate(texts) if text not in known]
    for row, text in enumerate(texts):
        if text in known:
            vectors[row] = known[text]
    if missing:
        vectors[missing] = embedder.encode_documents([texts[row] for row in missing])
    return vectors
