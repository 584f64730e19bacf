"""What travels between retriever, reranker and generator: passages and their sentence vectors, citations, history."""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from rag_common.schemas.wire import JsonInt, LanguageCode, MAX_MESSAGE_CHARS, WireModel


#: Upper bound on ``SentenceVectors.dim`` (a sanity bound: today's embedders have 384-1024).
MAX_VECTOR_DIM = 4096
#: Upper bound on the sentences one chunk carries vectors for.
MAX_SENTENCE_VECTORS = 512


class SentenceVectors(WireModel):
    """The embeddings of a chunk's scorable sentences, computed once at ingestion
    (``RETRIEVER_SENTENCE_VECTORS``; the rule is :mod:`rag_common.sentence_vectors`).

    Row ``i`` stands for the string ``context + text[start_i:end_i]``, the one the extractive
    answerer scores for that sentence. ``method`` says how it was made: ``"embedded"``, that string's
    own ``encode_documents`` vector (a consumer gets the very vector it would compute); ``"pooled"``,
    the mean of the sentence's (and the chunk's context lines') token states in the chunk's own
    encoder pass (:mod:`rag_common.embedders.span_pooling`: no second pass at ingestion, a vector
    in context, not the same numbers). ``vectors`` is the rows' float32 values, little-endian,
    row-major, base64: a quarter of the JSON-number size and exact.
    """

    #: The prefix of every sentence's string (``"Title > Section: "`` or ``""``).
    context: str = Field(max_length=MAX_MESSAGE_CHARS)
    #: How the rows were computed (see above); stored before it existed means ``"embedded"``.
    method: Literal["embedded", "pooled"] = "embedded"
    #: ``[start, end]`` of each sentence in the passage's ``text``, in text order.
    spans: list[Annotated[list[JsonInt], Field(min_length=2, max_length=2)]] = Field(max_length=MAX_SENTENCE_VECTORS)
    dim: JsonInt = Field(ge=1, le=MAX_VECTOR_DIM)
    #: base64 of ``len(spans) * dim`` little-endian float32 values.
    vectors: str

    @model_validator(mode="after")
    def _consistent(self) -> SentenceVectors:
        previous = 0
        for start, end in self.spans:
            if not previous <= start < end:
                raise ValueError("sentence spans must be non-empty, non-overlapping and in text order")
            previous = end
        try:
            raw = base64.b64decode(self.vectors, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError("sentence vectors are not valid base64") from None
        if len(raw) != 4 * self.dim * len(self.spans):
            raise ValueError(f"sentence vectors hold {len(raw)} bytes, expected {4 * self.dim * len(self.spans)}")
        return self


class Passage(WireModel):
    """One retrievable chunk as it travels between retriever, reranker and generator."""

    chunk_id: str
    doc_id: str
    text: str
    title: str = ""
    source: str = ""
    page: JsonInt | None = None
    section_path: list[str] = Field(default_factory=list)
    score: float = 0.0
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: The chunk's unit-length embedding, only when the retriever was asked for it
    #: (``SearchRequest.include_embeddings``): the reranker's diffusion and diversity stages need
    #: it, and sending it saves the reranker re-embedding every candidate. Dropped before generation.
    embedding: list[float] | None = None
    #: The chunk's stored sentence vectors, only when the retriever was asked for them
    #: (``SearchRequest.include_sentence_vectors``) and has them: the generator then embeds only the
    #: question. Absent for chunks indexed without them (the generator embeds those sentences).
    sentence_vectors: SentenceVectors | None = None
    #: The chunk's language as ingestion named it (declared or identified); None: analysed neutrally.
    language: LanguageCode | None = None

    @model_validator(mode="after")
    def _spans_in_text(self) -> Passage:
        if self.sentence_vectors is not None and self.sentence_vectors.spans:
            if self.sentence_vectors.spans[-1][1] > len(self.text):
                raise ValueError("sentence_vectors.spans reach past the end of the passage text")
        return self


class Citation(WireModel):
    """One sentence of a source the answer relies on. ``id`` is the ``[n]`` marker in the answer text.

    ``quote`` is the cited sentence in the source's own words, and ``start``/``end`` are its
    character offsets in the chunk's text (``Passage.text[start:end] == quote``), so a client can
    highlight exactly what was cited.
    """

    id: JsonInt
    source: str
    title: str
    page: JsonInt | None = None
    chunk_id: str
    score: float
    quote: str = ""
    start: JsonInt | None = Field(default=None, ge=0)
    end: JsonInt | None = Field(default=None, ge=0)
    section_path: list[str] = Field(default_factory=list)


# --------------------------------------------------------------------------- conversation


class HistoryTurn(WireModel):
    """The part of a turn the refiner and generator need: what was asked and answered."""

    question: str
    answer: str
