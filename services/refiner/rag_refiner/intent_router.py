"""Decide what a message asks for, cheapest stage first: rules, classifier, then (rarely) the LLM.

``rag`` is the safe default: a document question routed away loses its answer, while a greeting
routed to retrieval only costs one search. So the stages are asymmetric:

1. Rules (``intent_rules``): a whole-message greeting/thanks/farewell → ``chitchat``; a question
   about the conversation itself → ``meta``.
2. Classifier (``IntentClassifier``): its best label is used when it is ``rag`` (whatever the
   confidence) or when a non-``rag`` label reaches ``confidence_threshold``.
3. LLM: only for a message the classifier leans away from ``rag`` with a probability in
   ``[llm_min_confidence, confidence_threshold)``: more likely that label than not, but not sure.
   Below ``llm_min_confidence`` the leaning is more likely wrong than right and the message goes
   to ``rag`` without a call. The model may confirm the leaning or answer ``rag``; any other
   answer is a disagreement and the message goes to ``rag``. A failed call also means ``rag``
   (``method="fallback"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from langchain_core.language_models import BaseChatModel

from rag_common.llm_admission import LLMAdmission
from rag_common.schemas import Intent
from rag_refiner.intent_classifier import IntentClassifier, IntentScores, shipped_intent_classifier
from rag_refiner.intent_llm import LLMIntentClassifier
from rag_refiner.intent_rules import match_intent_rules
from rag_refiner.llm_call import LLMUnavailable, UnusableOutput, bounded_llm_call

if TYPE_CHECKING:
    from rag_refiner.settings import RefinerSettings

IntentMethod = Literal["rules", "embedding", "llm", "fallback"]

#: Default ``confidence_threshold`` (setting ``REFINER_INTENT_CONFIDENCE_THRESHOLD``).
DEFAULT_CONFIDENCE_THRESHOLD = 0.6
#: Default ``llm_min_confidence`` (setting ``REFINER_INTENT_LLM_MIN_CONFIDENCE``).
DEFAULT_LLM_MIN_CONFIDENCE = 0.5


@dataclass(frozen=True)
class IntentDecision:
    intent: Intent
    method: IntentMethod
    #: How sure the deciding stage was: 1.0 for rules, the classifier's probability otherwise.
    confidence: float
    detail: str = ""
    #: Set when the LLM was needed but did not answer (refused, timed out); later steps of the
    #: same request can skip their own calls.
    llm_failure: str | None = None


class IntentRouter:
    """Rules → classifier → LLM when unsure. ``route`` never raises."""

    def __init__(
        self,
        chat_model: BaseChatModel | None,
        *,
        classifier: IntentClassifier | None = None,
        confidence_threshold: float,
        llm_min_confidence: float,
        llm_timeout_s: float,
        admission: LLMAdmission | None = None,
    ):
        """``chat_model=None`` disables stage 3: an unsure message then goes to ``rag``. The
        thresholds and the timeout are the settings' (``of``, the one source of their defaults)."""
        self._classifier = classifier or shipped_intent_classifier()
        self._llm = LLMIntentClassifier(chat_model) if chat_model is not None else None
        self._threshold = confidence_threshold
        self._llm_min_confidence = llm_min_confidence
        self._llm_timeout_s = llm_timeout_s
        self._admission = admission

    @classmethod
    def of(
        cls, settings: RefinerSettings, chat_model: BaseChatModel | None, *, admission: LLMAdmission | None = None
    ) -> IntentRouter:
        """The router the settings configure (``intent_llm`` off: no stage 3)."""
        return cls(
            chat_model if settings.intent_llm else None,
            confidence_threshold=settings.intent_confidence_threshold,
            llm_min_confidence=settings.intent_llm_min_confidence,
            llm_timeout_s=settings.llm_timeout_s,
            admission=admission,
        )

    def classify_cheap(self, message: str, language: str | None = None) -> IntentDecision | IntentScores:
        """Stages 1 and 2 only: a decision, or (when unsure) the classifier's scores for stage 3 to settle.
        ``language``: the message's code when known, which picks the rules' pattern tables."""
        return self.classify_cheap_many([message], language)[0]

    def classify_cheap_many(
        self, messages: Sequence[str], language: str | None = None
    ) -> list[IntentDecision | IntentScores]:
        """``classify_cheap`` for many messages (of one ``language``, or None) with one classifier pass."""
        results: list[IntentDecision | IntentScores | None] = [None] * len(messages)
        pending: list[int] = []
        for i, message in enumerate(messages):
            rule = match_intent_rules(message, language)
            if rule is not None:
                results[i] = IntentDecision(rule, "rules", 1.0)
            else:
                pending.append(i)
        for i, scores in zip(pending, self._classifier.predict_many([messages[i] for i in pending]), strict=True):
            sure = scores.intent == "rag" or scores.confidence >= self._threshold
            results[i] = IntentDecision(scores.intent, "embedding", scores.confidence) if sure else scores
        return results  # type: ignore[return-value]

    async def route(self, message: str, language: str | None = None) -> IntentDecision:
        scores = self.classify_cheap(message, language)
        if isinstance(scores, IntentDecision):
            return scores
        leaning = f"classifier leaned {scores.intent} at {scores.confidence:.2f} < {self._threshold:g}"
        if self._llm is None:
            return IntentDecision("rag", "embedding", scores.probabilities["rag"], f"{leaning}; llm stage off, kept rag")
        if scores.confidence < self._llm_min_confidence:
            return IntentDecision(
                "rag", "embedding", scores.probabilities["rag"], f"{leaning}, below {self._llm_min_confidence:g}: kept rag"
            )
        try:
            answer = await bounded_llm_call("intent", self._llm.classify(message), self._llm_timeout_s, self._admission)
        except UnusableOutput as exc:
            return IntentDecision("rag", "fallback", scores.probabilities["rag"], f"{leaning}; {exc}; kept rag")
        except LLMUnavailable as exc:
            return IntentDecision("rag", "fallback", scores.probabilities["rag"], f"{leaning}; {exc}; kept rag", str(exc))
        if answer in (scores.intent, "rag"):
            return IntentDecision(answer, "llm", scores.probabilities[answer], f"{leaning}; llm answered {answer}")
        return IntentDecision(
            "rag", "llm", scores.probabilities["rag"], f"{leaning}; llm answered {answer}, a disagreement: kept rag"
        )
