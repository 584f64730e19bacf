"""Answer from ranked passages: gate, then claims checked against their sentences, or extraction.

1. The passages are cut into numbered sentences (``evidence.py``) and every sentence is scored
   against the question (``ExtractiveAnswerer``): that scoring is the extractive answer and the
   answerability gate's input at once.
2. The gate (``answerability.py``) abstains when the sources are unlikely to answer, in every mode.
3. ``extractive``: the best 1-3 sentences, verbatim. ``generative``: the LLM writes claims citing
   sentence ids (``ClaimWriter``); each claim whose cited sentences do not support it is dropped
   (``ClaimSupport``). ``auto``: generative, and the extractive answer whenever the LLM is down, too
   slow, invalid, or leaves no supported claim; the fallback is named in ``degraded``.

A citation's quote is the cited sentence itself, with its offsets, so nothing the model copies has to
be verified. ``stream`` yields the answer only once it is final (claims after the support check), so
the text a client watched is always the text of the final event.

The question's language is the request's (the gateway names it once per turn); a request without one
has it named here, from the query (``LanguagePolicy``), before anything else reads it. The abstention is
in it (``rag_common.messages``), else in ``RAG_DEFAULT_LANGUAGE``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from rag_common.errors import DependencyFailed
from rag_common.messages import LanguagePolicy
from rag_common.schemas import GenerateRequest, GenerateResponse
from rag_common.settings import EmbedderSettings
from rag_generator.answer_assembly import AnswerPart, abstention, answered, cite
from rag_generator.answer_kinds import preload as preload_answer_kinds
from rag_generator.answer_span import MarkedSpan, answer_span
from rag_generator.answerability import AnswerabilityFeatures, AnswerabilityGate, features_from_answer
from rag_generator.claim_support import Claim, ClaimSupport
from rag_generator.claim_writer import ClaimWriter
from rag_generator.conflict_answer import conflict_of, sides_cited, with_disagreement
from rag_generator.conflicts import DEFAULT_CONFLICT_DETECTOR, ConflictDetector, DetectedConflict
from rag_generator.evidence import EvidenceUnit, build_evidence, evidence_index
from rag_generator.extractive_answerer import ExtractiveAnswer, ExtractiveAnswerer
from rag_generator.stream_events import ErrorEvent, FinalEvent, StreamEvent, TokenEvent

__all__ = ["AnswerGenerator", "Assessment", "GeneratorMode"]

logger = logging.getLogger(__name__)

GeneratorMode = Literal["generative", "extractive", "auto"]


@dataclass(frozen=True)
class _Outcome:
    response: GenerateResponse
    #: The answer text as it may be streamed; joined, it is ``response.answer``.
    pieces: Sequence[str]


@dataclass(frozen=True)
class Assessment:
    """What the generator knows before it writes anything: the sentences, their scores (the extractive
    answer), the gate's features and its probability that the sources answer the question."""

    units: list[EvidenceUnit]
    extractive: ExtractiveAnswer
    features: AnswerabilityFeatures | None
    answerability: float | None
    #: The question's language (the request's), and whether its sources disagree (``conflicts.py``).
    language: str | None = None
    conflict: DetectedConflict | None = None
    #: The phrase of the best sentence that answers (``answer_span.py``), marked once that sentence is cited.
    span: MarkedSpan | None = None


class AnswerGenerator:
    def __init__(
        self,
        *,
        mode: GeneratorMode,
        extractive: ExtractiveAnswerer,
        support: ClaimSupport,
        writer: ClaimWriter | None,
        gate: AnswerabilityGate | None,
        max_passages: int,
        max_passage_chars: int,
        language: LanguagePolicy,
        embedder_covers: Callable[[str | None], bool] | None = None,
        conflicts: ConflictDetector | None = DEFAULT_CONFLICT_DETECTOR,
    ) -> None:
        """``conflicts``: None answers without looking for disagreeing sources."""
        if mode != "extractive" and writer is None:
            raise ValueError(f"mode {mode!r} needs an LLM (ClaimWriter)")
        self.mode = mode
        self._extractive = extractive
        self._support = support
        self._writer = writer
        self._gate = gate
        self._max_passages = max_passages
        self._max_passage_chars = max_passage_chars
        self._language = language
        # Whether the embedder was trained for a question's language (the gate's embedder_blind);
        # None: EMBEDDER_LANGUAGES of the environment.
        self._embedder_covers = embedder_covers or EmbedderSettings().covers
        self._conflicts = conflicts

    def warm_up(self) -> None:
        """Read what answering would otherwise read on the first question: the sentence scorer's file
        (ValueError, naming it, when unusable) and the answer-kind tables (about 2-3 s)."""
        self._extractive.scorer  # noqa: B018 - the property reads and validates the file
        preload_answer_kinds()

    async def generate(self, request: GenerateRequest) -> GenerateResponse:
        """The response; raises DependencyFailed only in ``generative`` mode when the LLM fails."""
        return (await self._answer(request)).response

    async def stream(self, request: GenerateRequest) -> AsyncIterator[StreamEvent]:
        """``token`` events of the final answer text, then the response (or one error event)."""
        try:
            outcome = await self._answer(request)
        except DependencyFailed as exc:
            yield ErrorEvent(exc)
            return
        for piece in outcome.pieces:
            yield TokenEvent(piece)
        yield FinalEvent(outcome.response)

    # ------------------------------------------------------------------ steps

    async def _named_language(self, request: GenerateRequest) -> GenerateRequest:
        """``request`` with its question's language named: the caller's, else identified from the query
        (None when it cannot be told). Off the event loop: the model loads on its first use."""
        if request.language is not None:
            return request
        language = await asyncio.to_thread(self._language.of_question, request.query)
        return request.model_copy(update={"language": language})

    async def _answer(self, request: GenerateRequest) -> _Outcome:
        request = await self._named_language(request)
        texts = self._language.of_texts(request.language)
        if not request.passages:
            return _abstained(abstention("no_passages", language=texts))
        scored = await self.assess(request)
        if scored.extractive.best is None:
            return _abstained(abstention("no_evidence", language=texts, answerability=scored.answerability))
        if self._gate is not None and scored.answerability is not None and scored.answerability < self._gate.threshold:
            return _abstained(abstention("not_answerable", language=texts, answerability=scored.answerability))
        if self.mode == "extractive":
            return self._extracted(scored)
        assert self._writer is not None
        try:
            draft = await self._writer.write(
                request.query, scored.units, request.history, request.language, conflict=scored.conflict
            )
        except DependencyFailed as exc:
            if self.mode == "generative":
                raise
            why = "is busy" if exc.kind == "overloaded" else "failed"
            return self._extracted(scored, f"generator: extractive answer, the LLM {why} ({exc.message})")
        if draft.reply is None:
            reason = f"generator: extractive answer, the LLM's reply was invalid ({draft.invalid_reason})"
            if self.mode == "generative":
                return _abstained(abstention("invalid_output", language=texts, answerability=scored.answerability))
            return self._extracted(scored, reason)
        return await self._checked_claims(
            scored, draft.reply.claims, texts, repaired=draft.repaired, language=request.language
        )

    async def assess(self, request: GenerateRequest) -> Assessment:
        """Score the sentences and the answerability (also what ``ragctl calibrate`` fits the gate on)."""
        units = build_evidence(
            request.passages, max_passages=self._max_passages, max_passage_chars=self._max_passage_chars
        )
        extractive = await self._extractive.aanswer(
            request.query, units, query_vector=request.query_embedding, language=request.language
        )
        features = answerability = conflict = span = None
        if extractive.best is not None:
            span = answer_span(request.query, request.language, extractive.best.unit)
            retrieval_scores = [p.score for p in request.passages[: self._max_passages]]
            features = features_from_answer(
                extractive, retrieval_scores, embedder_covers_language=self._embedder_covers(request.language)
            )
            if self._gate is not None:
                answerability = round(self._gate.probability(features), 4)
            if self._conflicts is not None:
                conflict = await asyncio.to_thread(
                    self._conflicts.detect, request.query, request.language, extractive.candidates
                )
        return Assessment(units, extractive, features, answerability, request.language, conflict, span)

    def _extracted(self, scored: Assessment, degraded: str | None = None, *, repaired: bool = False) -> _Outcome:
        parts = [AnswerPart(unit.text, [unit]) for unit in scored.extractive.sentences]
        cited = cite(with_disagreement(scored.conflict, parts, self._language.of_texts(scored.language)))
        response = answered(
            cited,
            "extractive",
            answerability=scored.answerability,
            repaired=repaired,
            degraded=[degraded] if degraded else [],
            conflict=conflict_of(scored.conflict, cited) if scored.conflict else None,
            answer_span=scored.span.cited(cited.numbers) if scored.span else None,
        )
        return _Outcome(response, cited.pieces)

    async def _checked_claims(
        self, scored: Assessment, claims: Sequence, texts: str, *, repaired: bool, language: str | None
    ) -> _Outcome:
        """``texts``: the language of an abstention; ``language``: the question's (the claims are in it)."""
        by_id = evidence_index(scored.units)
        drafted = [
            Claim(_without_markers(claim.text), [by_id[sid] for sid in dict.fromkeys(claim.evidence)], language=language)
            for claim in claims
        ]
        drafted = [claim for claim in drafted if claim.text]
        if not drafted:
            if self.mode == "generative":
                return _abstained(
                    abstention("model_abstained", language=texts, answerability=scored.answerability, repaired=repaired)
                )
            return self._extracted(scored, "generator: extractive answer, the LLM gave no claim", repaired=repaired)
        verdicts = await asyncio.to_thread(self._support.score_claims, drafted)
        kept = [claim for claim, verdict in zip(drafted, verdicts) if verdict.supported]
        dropped = len(drafted) - len(kept)
        precision = round(len(kept) / len(drafted), 4)
        for claim, verdict in zip(drafted, verdicts):
            if not verdict.supported:
                logger.info("dropping unsupported claim (score %.2f): %r", verdict.score, claim.text)
        if not kept:
            if self.mode == "generative":
                return _abstained(
                    abstention(
                        "no_supported_claim",
                        language=texts,
                        answerability=scored.answerability,
                        citation_precision=precision,
                        claims_dropped=dropped,
                        repaired=repaired,
                    )
                )
            outcome = self._extracted(
                scored, f"generator: extractive answer, none of the LLM's {dropped} claims was supported", repaired=repaired
            )
            response = outcome.response.model_copy(update={"claims_dropped": dropped, "citation_precision": precision})
            return _Outcome(response, outcome.pieces)
        parts = [AnswerPart(claim.text, [unit for unit in claim.evidence if isinstance(unit, EvidenceUnit)]) for claim in kept]
        conflict = scored.conflict
        if conflict is not None and not sides_cited(conflict, (unit for part in parts for unit in part.evidence)):
            parts = with_disagreement(conflict, parts, texts)  # claims citing one side only: say both
        cited = cite(parts)
        response = answered(
            cited,
            "generative",
            answerability=scored.answerability,
            citation_precision=precision,
            claims_dropped=dropped,
            repaired=repaired,
            conflict=conflict_of(conflict, cited) if conflict else None,
            answer_span=scored.span.cited(cited.numbers) if scored.span else None,
        )
        return _Outcome(response, cited.pieces)


#: Markers a model writes into a claim's text (``[3]``, ``[1.2]``): citations come from ``evidence`` only.
_MODEL_MARKER = re.compile(r"\s*\[\d+(?:\.\d+)?\]")


def _without_markers(text: str) -> str:
    return _MODEL_MARKER.sub("", text).strip()


def _abstained(response: GenerateResponse) -> _Outcome:
    return _Outcome(response, [response.answer])
