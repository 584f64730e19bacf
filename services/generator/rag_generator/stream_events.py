"""What ``AnswerGenerator.stream`` yields; the app turns each into one Server-Sent Event."""

from __future__ import annotations

from dataclasses import dataclass

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
    """The LLM failed (``status`` 503 unavailable, 504 timed out); the stream ends here."""

    error: str
    status: int


StreamEvent = TokenEvent | FinalEvent | ErrorEvent
