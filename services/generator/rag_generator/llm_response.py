"""What the model must return, validated again after grammar-constrained decoding.

The response schema asks the endpoint for the same shape, but not every OpenAI-compatible
endpoint enforces ``maxLength``/``maxItems``/``enum``, and a truncated reply can be "repaired"
into a partial object by the JSON parser. This model is the check that does not depend on the
endpoint: anything it rejects is treated as invalid output, never trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

#: Quote length the response schema allows per citation. Short on purpose: SmolLM2 tends to copy a
#: whole passage and then run on past its end, and a quote cut at 120 characters by the grammar
#: stays inside the passage (measured on 8 test questions: 1 answered with a verified quote at 300,
#: 2-4 at 100-150).
QUOTE_MAX_CHARS = 120
#: Ceilings for the configurable limits, so the static model stays bounded whatever the settings say.
HARD_MAX_ANSWER_CHARS = 8000
HARD_MAX_CITATIONS = 20


class InvalidModelOutput(ValueError):
    """The model's reply is not a well-formed, in-bounds answer object."""


@dataclass(frozen=True)
class ResponseLimits:
    answer_max_chars: int = 1000
    max_citations: int = 4


class LLMCitation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source_id: int
    quote: str = Field(max_length=QUOTE_MAX_CHARS)


class LLMResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: str = Field(max_length=HARD_MAX_ANSWER_CHARS)
    citations: list[LLMCitation] = Field(max_length=HARD_MAX_CITATIONS)
    abstained: bool

    @model_validator(mode="after")
    def within_request_limits(self, info: ValidationInfo) -> LLMResponse:
        limits = info.context if isinstance(info.context, ResponseLimits) else ResponseLimits()
        if len(self.answer) > limits.answer_max_chars:
            raise ValueError(f"answer has {len(self.answer)} chars, limit {limits.answer_max_chars}")
        if len(self.citations) > limits.max_citations:
            raise ValueError(f"{len(self.citations)} citations, limit {limits.max_citations}")
        return self

    @classmethod
    def from_model_output(cls, output: Mapping[str, Any] | str | None, limits: ResponseLimits) -> LLMResponse:
        """Validate a parsed object or the raw JSON text; raise ``InvalidModelOutput`` otherwise."""
        if output is None:
            raise InvalidModelOutput("no parsed output")
        if isinstance(output, str):
            try:
                output = json.loads(output)
            except json.JSONDecodeError as exc:
                raise InvalidModelOutput(f"not JSON: {exc.msg} at char {exc.pos}") from exc
        if not isinstance(output, Mapping):
            raise InvalidModelOutput(f"expected a JSON object, got {type(output).__name__}")
        try:
            return cls.model_validate(output, context=limits)
        except ValidationError as exc:
            summary = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'response'}: {e['msg']}" for e in exc.errors())
            raise InvalidModelOutput(summary) from exc
