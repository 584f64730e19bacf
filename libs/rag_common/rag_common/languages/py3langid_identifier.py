"""``LanguageIdentifier`` on py3langid (BSD-3): a naive Bayes model over byte n-grams, bundled in the
wheel (nothing downloads), 97 languages, about 20k short texts a second on one core. Chosen over
lingua, fasttext-langdetect and gcld3 by measurement (docs/languages.md): the only one both calibrated
enough for a confidence rule and installable here without a download or a compiler."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from rag_common.languages.identifier import NEUTRAL_EMPTY, LanguageGuess, guess_from_ranking
from rag_common.languages.text import normalise_text

__all__ = ["Py3LangidIdentifier"]

_model_lock = threading.Lock()
_model = None


def _shared_model():
    """The bundled model, loaded once per process (about 1 s and 100 MB) on first use."""
    global _model
    with _model_lock:
        if _model is None:
            from py3langid.langid import MODEL_FILE, LanguageIdentifier

            _model = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
        return _model


class Py3LangidIdentifier:
    def __init__(self, *, min_confidence: float, other_confidence: float) -> None:
        self._min_confidence = min_confidence
        self._other_confidence = other_confidence

    def identify(self, text: str, languages: Sequence[str]) -> LanguageGuess:
        text = normalise_text(text or "").strip()
        if not text or not any(ch.isalpha() for ch in text):
            return NEUTRAL_EMPTY
        ranking = [(code, float(probability)) for code, probability in _shared_model().rank(text)]
        return guess_from_ranking(
            ranking, languages, min_confidence=self._min_confidence, other_confidence=self._other_confidence
        )
