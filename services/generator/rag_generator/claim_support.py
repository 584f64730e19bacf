"""Does the evidence a claim cites actually say it?

With sentence-id citations the model can no longer cite something that does not exist, but it can
still cite a real sentence for a claim that sentence does not make. Each claim is therefore scored
against the sentences it cites with two cheap signals:

- lexical: the share of the claim's content words (:mod:`rag_common.content_words`) found in the
  cited sentences. Catches invented names, numbers and entities, which embeddings blur.
- semantic: the highest cosine between the claim and one cited sentence. Catches paraphrase, which
  word overlap misses.

Cited sentences are embedded bare (no title context). A cited unit whose passage carries a stored
vector for exactly that string (``Passage.sentence_vectors``: only when the passage has no title or
section path, since stored vectors are of ``context + sentence``, and only an ``embedded`` one: a
``pooled`` vector carries its chunk's context, and the threshold was fitted on bare sentences) is not
embedded again.

``score = w * lexical + (1 - w) * max(cosine, 0)``, and the claim is supported when
``score >= threshold``. A claim with nothing alphanumeric, or citing no evidence, is unsupported.

Calibration: ``w`` and ``threshold`` depend on the embedder (cosine scales differ between models) and
on how the model writes claims, so fit them on labelled (claim, cited sentences, supported?) pairs
from the deployed embedder: grid ``w`` over [0, 1], and for each take the threshold maximising F1
of the *unsupported* class (the error that matters is passing a hallucination); keep the pair with
the best F1, and re-measure whenever the embedder changes. The defaults below were measured that way
once, see :data:`DEFAULT_LEXICAL_WEIGHT`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from rag_common.embedders.base import Embedder
from rag_common.content_words import content_words, coverage
from rag_common.sentence_vectors import encode_unknown, known_vectors
from rag_generator.evidence import EvidenceUnit

if TYPE_CHECKING:
    from rag_generator.settings import GeneratorSettings

__all__ = [
    "DEFAULT_LEXICAL_WEIGHT",
    "DEFAULT_SUPPORT_THRESHOLD",
    "Claim",
    "ClaimSupport",
    "SupportScore",
]

#: Weight ``w`` of the lexical part, measured with all-MiniLM-L6-v2 on ClapNQ dev
#: (``bench/generator_core_calibration.py``): claims are the sentences of the reference answers; each
#: is paired with its own question's selected sentences (supported) and with the selected sentences
#: of the other question most similar to it (unsupported, on-topic). ``w`` in 0, 0.1 .. 1 with its
#: best threshold, chosen on one half of the questions: 0.3, unsupported-F1 0.96 and AUROC 0.98 on
#: the other half. Those negatives are easier than a model's hallucinations, which reuse the
#: evidence's own words: treat the threshold as a floor and re-measure on real model claims.
DEFAULT_LEXICAL_WEIGHT = 0.3
#: Combined score at or above which a claim counts as supported; measured with the weight above.
DEFAULT_SUPPORT_THRESHOLD = 0.61

Evidence = EvidenceUnit | str


@dataclass(frozen=True, slots=True)
class Claim:
    """One claim of an answer and the evidence it cites (units, or bare sentence texts).

    ``language``: the claim's (the answer's: the question's, ``GenerateRequest.language``), for its
    content words; a cited unit's are read in its passage's language, a bare text's (or a unit's whose
    passage does not say) in the claim's."""

    text: str
    evidence: Sequence[Evidence]
    language: str | None = None


@dataclass(frozen=True, slots=True)
class SupportScore:
    lexical: float
    cosine: float
    score: float
    supported: bool


_UNSUPPORTED = SupportScore(lexical=0.0, cosine=0.0, score=0.0, supported=False)


class ClaimSupport:
    def __init__(
        self,
        embedder: Embedder,
        *,
        lexical_weight: float,
        threshold: float,
    ) -> None:
        """``lexical_weight``, ``threshold``: the settings' (``of``; their defaults are the measured
        ``DEFAULT_LEXICAL_WEIGHT`` and ``DEFAULT_SUPPORT_THRESHOLD``), or what a bench or test pins."""
        if not 0.0 <= lexical_weight <= 1.0:
            raise ValueError(f"lexical_weight must be within [0, 1], got {lexical_weight}")
        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be within [0, 1], got {threshold}")
        self._embedder = embedder
        self.lexical_weight = lexical_weight
        self.threshold = threshold

    @classmethod
    def of(cls, settings: GeneratorSettings, embedder: Embedder) -> ClaimSupport:
        return cls(embedder, lexical_weight=settings.support_lexical_weight, threshold=settings.support_threshold)

    def score(self, claim: str, evidence: Sequence[Evidence]) -> SupportScore:
        return self.score_claims([Claim(claim, evidence)])[0]

    def score_claims(self, claims: Sequence[Claim]) -> list[SupportScore]:
        """Scores in claim order. All claims go to the embedder in one call and all distinct cited
        sentences in another, whatever the number of claims: this runs once per answer, on the
        request path."""
        texts = [[_text(item) for item in claim.evidence] for claim in claims]
        scorable = [
            i for i, claim in enumerate(claims) if _has_content(claim.text) and any(map(_has_content, texts[i]))
        ]
        if not scorable:
            return [_UNSUPPORTED for _ in claims]
        sentences = sorted({text for i in scorable for text in texts[i] if _has_content(text)})
        row = {text: n for n, text in enumerate(sentences)}
        claim_vectors = self._embedder.encode_queries([claims[i].text for i in scorable])
        cited_passages = [
            item.passage for i in scorable for item in claims[i].evidence if isinstance(item, EvidenceUnit)
        ]
        sentence_vectors = encode_unknown(self._embedder, sentences, known_vectors(cited_passages, self._embedder.dim, methods=("embedded",)))
        cosines = np.asarray(claim_vectors @ sentence_vectors.T, dtype=np.float64)
        results = [_UNSUPPORTED for _ in claims]
        for k, i in enumerate(scorable):
            language = claims[i].language
            cited = [item for item, text in zip(claims[i].evidence, texts[i]) if _has_content(text)]
            cosine = float(max(cosines[k, row[_text(item)]] for item in cited))
            cited_words = [word for item in cited for word in content_words(_text(item), _language(item, language))]
            lexical = coverage(content_words(claims[i].text, language), cited_words)
            score = self.lexical_weight * lexical + (1.0 - self.lexical_weight) * max(cosine, 0.0)
            results[i] = SupportScore(lexical, cosine, score, score >= self.threshold)
        return results


def _text(item: Evidence) -> str:
    return item.text if isinstance(item, EvidenceUnit) else item


def _language(item: Evidence, claim_language: str | None) -> str | None:
    return (item.passage.language if isinstance(item, EvidenceUnit) else None) or claim_language


def _has_content(text: str) -> bool:
    return any(char.isalnum() for char in text)
