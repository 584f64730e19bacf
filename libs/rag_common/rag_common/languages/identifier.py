"""Language identification: the protocol the services depend on, and the rule that turns a
classifier's probabilities into a language or "unsure".

The rule (docs/languages.md has the measurements behind both thresholds): a text whose most probable
language is one we do not analyse, with probability at least ``other_confidence``, is "other"
(neutral analysis). Otherwise the probabilities are renormalised over the configured languages and
the best is taken when its share reaches ``min_confidence``; below that the text is "unsure" and the
caller falls back: a query to the conversation's last confident language, a document to its declared
language, else the language-neutral analysis.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

__all__ = ["LanguageGuess", "LanguageIdentifier", "guess_from_ranking"]

GuessReason = Literal["confident", "unsure", "other", "empty", "declared", "history"]


@dataclass(frozen=True, slots=True)
class LanguageGuess:
    """``code``: the language to analyse the text in, or None for the neutral analysis.
    ``confidence``: the rule's probability behind it (1.0 when declared)."""

    code: str | None
    confidence: float
    reason: GuessReason

    @property
    def confident(self) -> bool:
        return self.code is not None


NEUTRAL_EMPTY = LanguageGuess(None, 0.0, "empty")


class LanguageIdentifier(Protocol):
    """Names the language of a text among ``languages`` (ISO 639-1 codes)."""

    def identify(self, text: str, languages: Sequence[str]) -> LanguageGuess: ...


def guess_from_ranking(
    ranking: Sequence[tuple[str, float]], languages: Sequence[str], *, min_confidence: float, other_confidence: float
) -> LanguageGuess:
    """The rule above, applied to a classifier's ``(code, probability)`` list, best first."""
    if not ranking:
        return NEUTRAL_EMPTY
    top, top_probability = ranking[0]
    wanted = set(languages)
    if top not in wanted and top_probability >= other_confidence:
        return LanguageGuess(None, float(top_probability), "other")
    among = [(code, probability) for code, probability in ranking if code in wanted]
    mass = sum(probability for _, probability in among)
    if not among or mass <= 0:
        return LanguageGuess(None, 0.0, "unsure")
    code, probability = max(among, key=lambda pair: pair[1])
    share = float(probability / mass)
    if share < min_confidence:
        return LanguageGuess(None, share, "unsure")
    return LanguageGuess(code, share, "confident")
