"""Answer by quoting the best sentences of the passages: no LLM, so nothing to verify.

Every candidate sentence gets a weighted sum of four features:

- ``cosine``: query vs sentence embedding, the main relevance signal;
- ``lexical``: share of the query's content words in the sentence; rewards the sentence that names
  the exact entity asked about, which a small embedder tends to blur;
- ``rank_prior``: ``1 / rank`` of the sentence's passage; the reranker already judged the passage as
  a whole, and a sentence is too short to overturn that judgement on its own;
- ``position_prior``: ``1 / index`` of the sentence in its passage; chunk-initial sentences tend to
  state the topic, so they win near-ties.

Each sentence is scored with its passage's title and section path before it (see ``sentence_context``).
A sentence whose passage carries the retriever's stored vector for exactly that string
(``Passage.sentence_vectors``, :mod:`rag_common.sentence_vectors`) is not embedded again: with
stored vectors, answering embeds only the question (and not even that with the search's vector).

The answer is the best sentence plus up to two more (1-3 in all), kept verbatim and in passage
order: first its contiguous neighbours in the same passage if they score within ``neighbour_margin``
of the best (an answer often spans two adjacent sentences, and adjacent sentences read as one text),
then other sentences only if within the tighter ``other_margin`` (sentences from elsewhere rarely
read well together). Each returned sentence is an :class:`EvidenceUnit`, so the caller can cite it
with offsets; all candidate scores are returned too, for the answerability gate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_common.embedders.base import Embedder
from rag_common.schemas import Passage
from rag_common.content_words import content_words, coverage
from rag_common.sentence_vectors import MIN_WORDS, encode_unknown, known_vectors, word_count
from rag_common.sentence_vectors import sentence_context as context_of
from rag_generator.evidence import EvidenceUnit, build_evidence, is_table_separator

if TYPE_CHECKING:
    from rag_generator.settings import GeneratorSettings

__all__ = ["DEFAULT_WEIGHTS", "ExtractiveAnswer", "ExtractiveAnswerer", "FeatureWeights", "SentenceScore", "sentence_context"]


@dataclass(frozen=True, slots=True)
class FeatureWeights:
    cosine: float
    lexical: float
    rank_prior: float
    position_prior: float


#: Cosine leads, the rest refine it. Summing to 1 keeps the score within [0, 1] (cosine is clipped at
#: 0), which the answerability gate's features rely on. Measured on ClapNQ dev with all-MiniLM-L6-v2
#: (``bench/generator_core_calibration.py``: share of answerable questions whose best sentence is an
#: annotator-selected one): the landscape is flat, 0.61-0.71 on the fitting half over a 720-point
#: grid, and these weights score 0.67 there and 0.75 on the held-out half, within noise of the
#: best (cosine alone 0.70/0.70, lexical alone 0.61/0.65). Lexical keeps a real weight although
#: ClapNQ does not reward it: its natural questions rarely hinge on an identifier such as
#: ``rag:conversation:{id}``, the case lexical overlap exists for. Re-measure for another embedder.
DEFAULT_WEIGHTS = FeatureWeights(cosine=0.6, lexical=0.2, rank_prior=0.15, position_prior=0.05)


@dataclass(frozen=True, slots=True)
class SentenceScore:
    unit: EvidenceUnit
    cosine: float
    lexical: float
    rank_prior: float
    position_prior: float
    score: float

    def features(self) -> dict[str, float]:
        return {
            "cosine": self.cosine,
            "lexical": self.lexical,
            "rank_prior": self.rank_prior,
            "position_prior": self.position_prior,
            "score": self.score,
        }


@dataclass(frozen=True, slots=True)
class ExtractiveAnswer:
    #: The chosen sentences joined by one space; ``""`` when no sentence was eligible.
    text: str
    #: 1-3 units in passage order (source, then position); empty when no sentence was eligible.
    sentences: tuple[EvidenceUnit, ...]
    #: Every eligible sentence's score, best first (the gate reads best, second and cosines).
    candidates: tuple[SentenceScore, ...]
    #: Cosine of the query with each passage that has an eligible sentence, by source number.
    passage_cosines: dict[int, float]

    @property
    def best(self) -> SentenceScore | None:
        return self.candidates[0] if self.candidates else None


class ExtractiveAnswerer:
    def __init__(
        self,
        embedder: Embedder,
        *,
        weights: FeatureWeights = DEFAULT_WEIGHTS,
        max_sentences: int = 3,
        neighbour_margin: float = 0.1,
        other_margin: float = 0.03,
        min_words: int = MIN_WORDS,
        max_passages: int,
        max_passage_chars: int,
    ) -> None:
        """``max_passages``, ``max_passage_chars``: the settings' (``of``, the one source of their
        defaults); the rest are tuning constants no setting holds (``DEFAULT_WEIGHTS``: why these)."""
        if not 1 <= max_sentences <= 3:
            raise ValueError(f"max_sentences must be 1..3, got {max_sentences}")
        self._embedder = embedder
        self.weights = weights
        self.max_sentences = max_sentences
        self.neighbour_margin = neighbour_margin
        self.other_margin = other_margin
        self.min_words = min_words
        self.max_passages = max_passages
        self.max_passage_chars = max_passage_chars

    @classmethod
    def of(cls, settings: GeneratorSettings, embedder: Embedder, **tuning: Any) -> ExtractiveAnswerer:
        """The answerer the settings configure; ``tuning``: weights, margins, sentences (benches, tests)."""
        return cls(
            embedder, max_passages=settings.max_passages, max_passage_chars=settings.max_passage_chars, **tuning
        )

    async def aanswer(
        self,
        query: str,
        evidence: Sequence[EvidenceUnit] | Sequence[Passage],
        *,
        query_vector: Sequence[float] | None = None,
        language: str | None = None,
    ) -> ExtractiveAnswer:
        """:meth:`answer` in a worker thread: embedding is CPU-bound and must not block the event loop."""
        return await asyncio.to_thread(self.answer, query, evidence, query_vector=query_vector, language=language)

    def answer(
        self,
        query: str,
        evidence: Sequence[EvidenceUnit] | Sequence[Passage],
        *,
        query_vector: Sequence[float] | None = None,
        language: str | None = None,
    ) -> ExtractiveAnswer:
        """``query_vector`` (the retriever's, same model) and passages that carry their stored
        ``embedding`` spare the query and passage encodes: only the sentences are embedded then.
        ``language``: the query's (``GenerateRequest.language``), for its content words; a sentence's
        are read in its passage's language, or the query's when the passage does not say."""
        units = self._units(evidence)
        eligible = [unit for unit in units if self._eligible(unit)]
        if not eligible:
            return ExtractiveAnswer("", (), (), {})
        passages = _passages_by_source(eligible)
        # Three calls whatever the number of sentences: the query, all candidate sentences, all
        # passages. Passages get their own batch because a batch is padded to its longest text: mixed
        # with the sentences they made the call 2-3x slower than the two batches together.
        if query_vector is not None and len(query_vector) == self._embedder.dim:
            query_array = np.asarray(query_vector, dtype=np.float32)
        else:
            query_array = self._embedder.encode_queries([query])[0]
        contexts = [sentence_context(unit) for unit in eligible]
        # Stored vectors (keyed by the very string embedded at ingestion) stand in for embedding;
        # whatever has none (older index, title changed since, sentence cut short) is embedded here.
        texts = [f"{ctx}{unit.text}" for ctx, unit in zip(contexts, eligible)]
        known = known_vectors(passages.values(), self._embedder.dim)
        sentence_vectors = encode_unknown(self._embedder, texts, known)
        cosines = np.asarray(sentence_vectors @ query_array, dtype=np.float64)
        stored = [p.embedding for p in passages.values()]
        if all(vector is not None and len(vector) == self._embedder.dim for vector in stored):
            passage_vectors = np.asarray(stored, dtype=np.float32)
        else:
            passage_vectors = self._embedder.encode_documents([p.text for p in passages.values()])
        passage_cosines = {source: float(c) for source, c in zip(passages, passage_vectors @ query_array)}
        query_words = content_words(query, language)
        scored = [
            self._score(unit, float(cosine), query_words, ctx, language)
            for unit, cosine, ctx in zip(eligible, cosines, contexts)
        ]
        ranked = sorted(scored, key=lambda s: (-s.score, s.unit.source, s.unit.index))
        chosen = self._select(ranked)
        chosen.sort(key=lambda s: (s.unit.source, s.unit.index))
        sentences = tuple(s.unit for s in chosen)
        return ExtractiveAnswer(" ".join(u.text for u in sentences), sentences, tuple(ranked), passage_cosines)

    def _units(self, evidence: Sequence[EvidenceUnit] | Sequence[Passage]) -> list[EvidenceUnit]:
        units = [item for item in evidence if isinstance(item, EvidenceUnit)]
        if len(units) == len(evidence):
            return units
        passages = [item for item in evidence if isinstance(item, Passage)]
        if len(passages) != len(evidence):
            raise TypeError("evidence must be all EvidenceUnits or all Passages")
        return build_evidence(passages, max_passages=self.max_passages, max_passage_chars=self.max_passage_chars)

    def _eligible(self, unit: EvidenceUnit) -> bool:
        return word_count(unit.text) >= self.min_words and not is_table_separator(unit.text)

    def _score(
        self, unit: EvidenceUnit, cosine: float, query_words: list[str], context: str, language: str | None
    ) -> SentenceScore:
        lexical = coverage(query_words, content_words(context + unit.text, unit.passage.language or language))
        rank_prior, position_prior = 1.0 / unit.source, 1.0 / unit.index
        w = self.weights
        score = (
            w.cosine * max(cosine, 0.0)
            + w.lexical * lexical
            + w.rank_prior * rank_prior
            + w.position_prior * position_prior
        )
        return SentenceScore(unit, cosine, lexical, rank_prior, position_prior, score)

    def _select(self, ranked: list[SentenceScore]) -> list[SentenceScore]:
        best = ranked[0]
        chosen = [best]
        same_passage = {s.unit.index: s for s in ranked if s.unit.source == best.unit.source}
        low = high = best.unit.index
        while len(chosen) < self.max_sentences:
            around = [s for s in (same_passage.get(low - 1), same_passage.get(high + 1)) if s is not None]
            around = [s for s in around if s.score >= best.score - self.neighbour_margin]
            if not around:
                break
            pick = max(around, key=lambda s: s.score)
            chosen.append(pick)
            low, high = min(low, pick.unit.index), max(high, pick.unit.index)
        for s in ranked[1:]:
            if len(chosen) >= self.max_sentences or s.score < best.score - self.other_margin:
                break
            if s not in chosen:
                chosen.append(s)
        return chosen


def sentence_context(unit: EvidenceUnit) -> str:
    """``"Title > Section: "``: what a sentence is about when it does not say so itself.

    Sentences are scored out of their passage, and "It opened in 1923." names nothing; the passage's
    title and section path give it its subject back, for the embedding and the word overlap alike
    (contextualised sentence scoring). Empty when the passage has neither."""
    return context_of(unit.passage.title, unit.passage.section_path)


def _passages_by_source(units: Sequence[EvidenceUnit]) -> dict[int, Passage]:
    passages: dict[int, Passage] = {}
    for unit in units:
        passages.setdefault(unit.source, unit.passage)
    return passages
