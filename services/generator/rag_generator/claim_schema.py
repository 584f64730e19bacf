"""The per-request JSON schema the model's reply is decoded against: claims citing sentence ids.

``evidence`` items are an ``enum`` of this request's sentence ids, so a grammar-constrained endpoint
cannot cite a sentence that was not shown; ``ClaimReply`` re-checks it for endpoints that do not
constrain decoding. An empty ``claims`` list is how the model says the sources do not answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Sentences one claim may cite.
MAX_EVIDENCE_PER_CLAIM = 3


def build_claim_schema(sentence_ids: Iterable[str], *, max_claims: int, claim_max_chars: int) -> dict[str, Any]:
    return {
        "name": "grounded_claims",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "claims": {
                    "type": "array",
                    "maxItems": max_claims,
                    "items": {
                        "type": "object",
                        # Text first: the model writes the claim, then points at where it came from.
                        "properties": {
                            "text": {"type": "string", "maxLength": claim_max_chars},
                            "evidence": {
                                "type": "array",
                                "minItems": 1,
                                "maxItems": MAX_EVIDENCE_PER_CLAIM,
                                "items": {"type": "string", "enum": list(dict.fromkeys(sentence_ids))},
                            },
                        },
                        "required": ["text", "evidence"],
                        "additionalProperties": False,
                    },
                },
            },
            "required": ["claims"],
            "additionalProperties": False,
        },
    }
