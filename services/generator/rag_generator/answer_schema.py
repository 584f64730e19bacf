"""The per-request JSON schema the model's reply is decoded against.

``source_id`` is an ``enum`` of this request's source numbers, so a grammar-constrained endpoint
cannot even emit a citation to a source that was not shown; ``LLMResponse`` and
``select_citations`` re-check it for endpoints that do not constrain decoding.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rag_generator.llm_response import QUOTE_MAX_CHARS


def build_answer_schema(source_ids: Iterable[int], *, answer_max_chars: int, max_citations: int) -> dict[str, Any]:
    return {
        "name": "grounded_answer",
        "strict": True,
        "schema": {
            "type": "object",
            # Answer first: the model writes the claim, then points at where it came from.
            "properties": {
                "answer": {"type": "string", "maxLength": answer_max_chars},
                "citations": {
                    "type": "array",
                    "maxItems": max_citations,
                    "items": {
                        "type": "object",
                        "properties": {
                            "source_id": {"type": "integer", "enum": sorted(set(source_ids))},
                            "quote": {"type": "string", "maxLength": QUOTE_MAX_CHARS},
                        },
                        "required": ["source_id", "quote"],
                        "additionalProperties": False,
                    },
                },
                "abstained": {"type": "boolean"},
            },
            "required": ["answer", "citations", "abstained"],
            "additionalProperties": False,
        },
    }
