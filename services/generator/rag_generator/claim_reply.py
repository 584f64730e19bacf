"""What the model must return, validated again after grammar-constrained decoding.

The response schema asks the endpoint for the same shape, but not every OpenAI-compatible endpoint
enforces ``maxLength``/``maxItems``/``enum``, and a truncated reply can be "repaired" into a partial
object by a lenient JSON parser. This model is the check that does not depend on the endpoint:
anything it rejects is invalid output, never trusted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, model_validator

from rag_generator.claim_schema import MAX_EVIDENCE_PER_CLAIM

#: Ceilings for the configurable limits, so the static model stays bounded whatever the settings say.
HARD_MAX_CLAIMS = 10
HARD_MAX_CLAIM_CHARS = 2000


class InvalidModelOutput(ValueError):
    """The model's reply is not a well-formed, in-bounds claims object."""


@dataclass(frozen=True)
class ReplyLimits:
    """This request's bounds: how many claims, how long, and which sentence ids were shown."""

    max_claims: int
    claim_max_chars: int
    sentence_ids: Set[str]


class ClaimOut(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(max_length=HARD_MAX_CLAIM_CHARS)
    evidence: list[str] = Field(min_length=1, max_length=MAX_EVIDENCE_PER_CLAIM)


class ClaimReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    claims: list[ClaimOut] = Field(max_length=HARD_MAX_CLAIMS)

    @model_validator(mode="after")
    def within_request_limits(self, info: ValidationInfo) -> ClaimReply:
        limits = info.context
        if not isinstance(limits, ReplyLimits):
            return self
        if len(self.claims) > limits.max_claims:
            raise ValueError(f"{len(self.claims)} claims, limit {limits.max_claims}")
        for number, claim in enumerate(self.claims, 1):
            if len(claim.text) > limits.claim_max_chars:
                raise ValueError(f"claim {number} has {len(claim.text)} chars, limit {limits.claim_max_chars}")
            unknown = [sid for sid in claim.evidence if sid not in limits.sentence_ids]
            if unknown:
                raise ValueError(f"claim {number} cites sentence ids that were not shown: {', '.join(unknown)}")
        return self

    @classmethod
    def from_model_output(cls, output: Mapping[str, Any] | str | None, limits: ReplyLimits) -> ClaimReply:
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
            summary = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'reply'}: {e['msg']}" for e in exc.errors())
            raise InvalidModelOutput(summary) from exc
