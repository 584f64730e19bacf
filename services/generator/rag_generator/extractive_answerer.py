"""Answer by quoting the best sentences of the passages: no LLM, so nothing to verify.

Every candidate sentence gets P(it answers the question) from the fitted sentence scorer
(:mod:`rag_generator.sentence_scorer`, parameters in ``data/sentence_scorer.json``) over its
features (:mod:`rag_generator.sentence_features`): relevance (query-sentence and query-passage
cosine, the question's content words in it, its passage's rank and its position) and whether it
answers (a value of the kind the question wants that the question does not already name; not a
question, a heading or navigation; not another year or edition than the one asked). The score is that
probability, in [0, 1], which the answerability gate reads.

Each sentence is scored with its passage's title and section path before it (see ``sentence_context``).
A sentence whose passage carries the retriever's stored vector for exactly that string
(``Passage.sentence_vectors``, :mod:`rag_common.sentence_vectors`) is not embedded again: with
stored vectors, answering embeds only the question (and not even that with the search's vector).

The answer is the best sentence plus up to two more (1-3 in all), kept verbatim and in passage
order: first its contiguous neighbours in the same passage if they score within ``neighbour_margin``
of the best (an answer often spans two adjacent sentences, and adjacent sentences read as one text),
then other sentences only if within ``other_margin`` (sentences from elsewhere rarely read well
together). Both margins are the scorer file's, chosen with it on its fit half. Each returned sentence
is an :class:`EvidenceUnit`, so the caller can cite it with offsets; all candidate scores are
returned too, for the answerability gate.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from rag_common.embedders.base import Embedder
from rag_common.schemas import Passage
from rag_common.sentence_vectors import MIN_WORDS, encode_unknown, known_vectors, word_count
from rag_common.sentence_vectors import sentence_context as context_of
from rag_generator.evidence import EvidenceUnit, build_evidence, is_table_separator
from rag_generator.sentence_features import AskedQuestion, SentenceFeatures, sentence_features
from rag_generator.sentence_scorer import SentenceScorer, default_scorer

if TYPE_CHECKING:
    from rag_generator.settings import GeneratorSettings

__all__ = ["ExtractiveAnswer", "ExtractiveAnswerer", "SentenceScore", "choose_sentences", "sentence_context"]


@dataclass(frozen=True, slots=True)
class SentenceScore:
    unit: EvidenceUnit
    #: What the scorer read (``sentence_features``), and its P(answers).
    measured: SentenceFeatures
    score: float

    @property
    def cosine(self) -> float:
        return self.measured.cosine

    @property
    def lexical(self) -> float:
        return self.measured.lexical

    @property
    def rank_prior(self) -> float:
        return self.measured.rank_prior

    def features(self) -> dict[str, float]:
        return {**self.measured.as_dict(), "score": self.score}


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
        scorer: SentenceScorer | None = None,
        max_sentences: int = 3,
        neighbour_margin: float | None = None,
        other_margin: float | None = None,
        min_words: int = MIN_WORDS,
        max_passages: int,
        max_passage_chars: int,
    ) -> None:
        """``max_passages``, ``max_passage_chars``: the settings' (``of``, the one source of their
        defaults); ``scorer``: the shipped one (``data/sentence_scorer.json``) unless given; the
        margins: the scorer's unless given (benches, tests)."""
        if not 1 <= max_sentences <= 3:
            raise ValueError(f"max_sentences must be 1..3, got {max_sentences}")
        self._embedder = embedder
        self._scorer = scorer
        self.max_sentences = max_sentences
        self._neighbour_margin = neighbour_margin
        self._other_margin = other_margin
        self.min_words = min_words
        self.max_passages = max_passages
        self.max_passage_chars = max_passage_chars

    @property
    def scorer(self) -> SentenceScorer:
        """The given scorer, else the shipped one, read on first use (``candidate_features`` needs
        none: the scorer is fitted on what it returns). Raises ValueError when the file is unusable."""
        return self._scorer if self._scorer is not None else default_scorer()

    @property
    def neighbour_margin(self) -> float:
        return self.scorer.neighbour_margin if self._neighbour_margin is None else self._neighbour_margin

    @property
    def other_margin(self) -> float:
        return self.scorer.other_margin if self._other_margin is None else self._other_margin

    @classmethod
    def of(cls, settings: GeneratorSettings, embedder: Embedder, **tuning: Any) -> ExtractiveAnswerer:
        """The answerer the settings configure; ``tuning``: scorer, margins, sentences (benches, tests)."""
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
        candidates, passage_cosines = self.candidate_features(query, evidence, query_vector=query_vector, language=language)
        if not candidates:
            return ExtractiveAnswer("", (), (), {})
        probabilities = self.scorer.probabilities(np.stack([features.vector() for _, features in candidates]))
        scored = [SentenceScore(unit, features, float(p)) for (unit, features), p in zip(candidates, probabilities)]
        ranked = sorted(scored, key=lambda s: (-s.score, s.unit.source, s.unit.index))
        picked = choose_sentences(
            [(s.score, s.unit.source, s.unit.index) for s in ranked],
            max_sentences=self.max_sentences, neighbour_margin=self.neighbour_margin, other_margin=self.other_margin,
        )
        sentences = tuple(sorted((ranked[i].unit for i in picked), key=lambda u: (u.source, u.index)))
        return ExtractiveAnswer(" ".join(u.text for u in sentences), sentences, tuple(ranked), passage_cosines)

    def candidate_features(
        self,
        query: str,
        evidence: Sequence[EvidenceUnit] | Sequence[Passage],
        *,
        query_vector: Sequence[float] | None = None,
        language: str | None = None,
    ) -> tuple[list[tuple[EvidenceUnit, SentenceFeatures]], dict[int, float]]:
        """Every eligible sentence with its features (in evidence order), and the query's cosine with
        each passage that has one, by source number: what :meth:`answer` scores, and what the scorer
        is fitted on (``rag_eval.sentence_scorer_fitting``)."""
        units = self._units(evidence)
        eligible = [unit for unit in units if self._eligible(unit)]
        if not eligible:
            return [], {}
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
        asked = AskedQuestion.of(query, language)
        best_cosine = float(cosines.max())
        return [
            (unit, sentence_features(asked, unit, context=ctx, cosine=float(cosine), best_cosine=best_cosine,
                                     passage_cosine=passage_cosines[unit.source]))
            for unit, cosine, ctx in zip(eligible, cosines, contexts)
        ], passage_cosines

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


def choose_sentences(
    ranked: Sequence[tuple[float, int, int]], *, max_sentences: int, neighbour_margin: float, other_margin: float
) -> list[int]:
    """Positions in ``ranked`` (``(score, source, index)``, best first) of the 1-3 sentences of the
    answer: the best, its contiguous neighbours within ``neighbour_margin`` of it, then others within
    ``other_margin`` (module docstring). Empty when ``ranked`` is."""
    if not ranked:
        return []
    best_score, best_source, best_index = ranked[0]
    chosen = [0]
    same_passage = {index: i for i, (_, source, index) in enumerate(ranked) if source == best_source}
    low = high = best_index
    while len(chosen) < max_sentences:
        around = [i for i in (same_passage.get(low - 1), same_passage.get(high + 1)) if i is not None]
        around = [i for i in around if ranked[i][0] >= best_score - neighbour_margin]
        if not around:
            break
        pick = max(around, key=lambda i: ranked[i][0])
        chosen.append(pick)
        low, high = min(low, ranked[pick][2]), max(high, ranked[pick][2])
    for i in range(1, len(ranked)):
        if len(chosen) >= max_sentences or ranked[i][0] < best_score - other_margin:
            break
        if i not in chosen:
            chosen.append(i)
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
