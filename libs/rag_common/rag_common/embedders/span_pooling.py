"""Vectors of parts of a text from the text's own encoder pass: mean pooling over a span's tokens.

A mean-pooling bi-encoder's text vector is the normalised mean of its token states. The same states,
averaged over only the tokens of a part of the text (a sentence, with the lines of context before
it), give that part a vector *in context* — at the cost of a mean, not of a second encoder pass
(late chunking, Günther et al. 2024, arXiv:2409.04701). The retriever stores such vectors for each
chunk's sentences (:mod:`rag_common.sentence_vectors`, ``RETRIEVER_SENTENCE_VECTORS=pooled``).

A *pool* is a tuple of character ranges ``(start, end)`` of the text as passed in (the embedder's
document prefix is accounted for by the embedder). A token belongs to a pool when its characters
overlap one of the ranges. The special tokens (``[CLS]``, ``[SEP]``) join no pool, although the
text's own mean includes them: their states summarise the whole text and pull every sentence of a
chunk toward the same vector. On ClapNQ (``bench/generator_core_calibration.py``) that choice, and
pooling the context lines with the sentence, scored best of the four variants: the extractive
answerer's best sentence was an annotator's sentence for 72.3 % of answerable questions (context,
no special tokens) against 71.3-71.7 % for the other three and 73.0 % for sentences embedded on
their own (docs/benchmarks.md, "Sentence vectors at ingestion"). A pool that no token reaches — its characters were cut by truncation at
``max_seq_length`` — is a row of NaN, for the caller to embed some other way.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from rag_common.embedders.base import Embedder

__all__ = ["Pool", "SpanPoolingEmbedder", "pool_spans", "shift_pools"]

#: Character ranges of one text whose tokens are averaged together.
Pool = tuple[tuple[int, int], ...]


@runtime_checkable
class SpanPoolingEmbedder(Embedder, Protocol):
    def encode_documents_pooled(
        self, texts: list[str], pools: list[list[Pool]]
    ) -> tuple[np.ndarray, list[np.ndarray]]:
        """``encode_documents(texts)`` and, from the same forward pass, per text one unit vector per
        pool of ``pools[i]`` (shape ``(len(pools[i]), dim)``; NaN rows for pools no token reached)."""


def shift_pools(pools: Sequence[Pool], by: int) -> list[Pool]:
    """``pools`` moved ``by`` characters right (an embedder's document prefix in front of the text)."""
    return [tuple((start + by, end + by) for start, end in pool) for pool in pools]


def pool_spans(
    hidden: np.ndarray, offsets: Sequence[tuple[int, int]], special: Sequence[int], pools: Sequence[Pool]
) -> np.ndarray:
    """Unit vectors ``(len(pools), dim)``: per pool, the mean of ``hidden``'s rows (one per real token,
    padding excluded) whose ``offsets`` overlap one of its ranges; ``special`` tokens never count."""
    dim = hidden.shape[1]
    out = np.full((len(pools), dim), np.nan, dtype=np.float32)
    if not pools:
        return out
    starts = np.array([start for start, _ in offsets], dtype=np.int64)
    ends = np.array([end for _, end in offsets], dtype=np.int64)
    is_special = np.asarray(special, dtype=bool)
    ordinary = ~is_special & (ends > starts)
    for row, pool in enumerate(pools):
        chosen = np.zeros(len(offsets), dtype=bool)
        for start, end in pool:
            chosen |= ordinary & (starts < end) & (ends > start)
        if not chosen.any():
            continue
        mean = hidden[chosen].mean(axis=0)
        norm = float(np.linalg.norm(mean))
        if norm > 0:
            out[row] = mean / norm
    return out
