"""What ``AnswerGenerator.stream`` yields; the app turns each into one Server-Sent Event."""

from __future__ import annotations

from dataclasses import dataclass

from rag_common.errors import RagError
from rag_common.schemas import GenerateResponse


@dataclass(frozen=True)
class TokenEvent:
    """New characters of the model's answer text, as generated (before verification)."""

    text: str


@dataclass(frozen=True)
class FinalEvent:
    """The verified response; always the last event of a stream that did not fail."""

    response: GenerateResponse


@dataclass(frozen=True)
class ErrorEvent:
    """The LLM failed (unavailable or timed out); the stream ends here. The app gives it its status."""

    error: RagError


StreamEvent = TokenEvent | FinalEvent | ErrorEvent
