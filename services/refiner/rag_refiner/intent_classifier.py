"""Stage 2 of intent routing: a small lexical classifier trained at start-up on shipped examples.

TF-IDF over word uni/bigrams (what is asked: "write a", "did i ask", "right now") plus character
3-5-grams (spelling variants, typos), then a multinomial logistic regression. No embedding model:
the refiner stays a light, torch-free process, fitting takes under a second, and a prediction
a few milliseconds. The example set (``data/intent_examples.tsv``) is small and
written for this project; ``rag`` is its largest class, so an unfamiliar message leans towards
retrieval, which is the safe side.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import get_args

from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import Pipeline, make_union
from threadpoolctl import threadpool_limits

from rag_common.schemas import Intent
from rag_refiner.intent_rules import normalize

INTENTS: tuple[Intent, ...] = get_args(Intent)
EXAMPLES_RESOURCE = "data/intent_examples.tsv"


@dataclass(frozen=True)
class IntentScores:
    """The classifier's best label, its probability, and every label's probability."""

    intent: Intent
    confidence: float
    probabilities: dict[Intent, float]


def load_examples(lines: Iterable[str] | None = None) -> list[tuple[Intent, str]]:
    """``(intent, utterance)`` pairs from ``intent<TAB>utterance`` lines; the shipped file by default."""
    if lines is None:
        lines = resources.files("rag_refiner").joinpath(EXAMPLES_RESOURCE).read_text(encoding="utf-8").splitlines()
    examples: list[tuple[Intent, str]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        intent, sep, utterance = line.partition("\t")
        if not sep or intent not in INTENTS or not utterance.strip():
            raise ValueError(f"intent example line {number} is not 'intent<TAB>utterance': {line!r}")
        examples.append((intent, utterance.strip()))  # type: ignore[arg-type]
    return examples


#: Inverse regularisation strength. Stronger regularisation (smaller C) keeps probabilities soft,
#: so a message unlike every example stays near the ``rag``-heavy prior instead of being pulled to
#: whichever example shares a word with it (docs/refiner.md has the measurements).
REGULARIZATION_C = 3.0


class IntentClassifier:
    """TF-IDF (word + char n-grams) and logistic regression over labelled utterances."""

    def __init__(self, examples: Sequence[tuple[Intent, str]] | None = None, *, regularization_c: float = REGULARIZATION_C):
        examples = load_examples() if examples is None else examples
        labels = {intent for intent, _ in examples}
        if labels != set(INTENTS):
            raise ValueError(f"intent examples must cover every intent; missing: {sorted(set(INTENTS) - labels)}")
        features = make_union(
            # Keeps the one-letter "i" ("did i ask") that the default token pattern drops.
            TfidfVectorizer(analyzer="word", ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w\w+\b|\bi\b"),
            TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True),
        )
        self._pipeline = Pipeline([("features", features), ("model", LogisticRegression(C=regularization_c, max_iter=2000))])
        # One BLAS thread: the problem is tiny, and on a busy 2-core box a thread per core made the
        # L-BFGS fit ten times slower (0.6 s → 6 s measured) through oversubscription.
        with threadpool_limits(limits=1):
            self._pipeline.fit([normalize(text) for _, text in examples], [intent for intent, _ in examples])
        self._classes: list[Intent] = [str(label) for label in self._pipeline.classes_]  # type: ignore[misc]

    def predict(self, message: str) -> IntentScores:
        return self.predict_many([message])[0]

    def predict_many(self, messages: Sequence[str]) -> list[IntentScores]:
        if not messages:
            return []
        rows = self._pipeline.predict_proba([normalize(message) for message in messages])
        scores = []
        for row in rows:
            probabilities: dict[Intent, float] = {label: float(p) for label, p in zip(self._classes, row, strict=True)}
            best = max(probabilities, key=probabilities.__getitem__)
            scores.append(IntentScores(best, probabilities[best], probabilities))
        return scores


@cache
def shipped_intent_classifier() -> IntentClassifier:
    """The classifier trained on the shipped examples, fitted once per process (it is read-only)."""
    return IntentClassifier()
