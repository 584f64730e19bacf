"""Generator settings (env prefix ``GENERATOR_``). Each description states the default.

The chat endpoint itself is configured by the shared ``LLM_*`` settings (``LLMSettings``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rag_common.settings import ServiceSettings
from rag_generator.citation_verifier import DEFAULT_QUOTE_MATCH_THRESHOLD
from rag_generator.llm_response import HARD_MAX_ANSWER_CHARS, HARD_MAX_CITATIONS


class GeneratorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="GENERATOR_", extra="ignore")

    port: int = Field(default=8004, description="TCP port of the generator. Default 8004.")
    max_passages: int = Field(default=6, ge=1, description="Passages shown to the model as numbered sources. Default 6.")
    max_passage_chars: int = Field(
        default=1200, ge=1, description="Each source's text is cut to this many characters. Default 1200."
    )
    answer_max_chars: int = Field(
        default=600, ge=1, le=HARD_MAX_ANSWER_CHARS, description="maxLength of the answer in the response schema. Default 600."
    )
    max_citations: int = Field(
        default=3, ge=1, le=HARD_MAX_CITATIONS, description="maxItems of the citations in the response schema. Default 3."
    )
    max_tokens: int = Field(
        default=600,
        ge=1,
        description="Upper bound on generated tokens per answer; kept above what the schema's length bounds "
        "allow (600 + 3 x 120 characters) so a grammar-constrained reply always closes. Default 600.",
    )
    frequency_penalty: float = Field(
        default=0.3,
        ge=-2.0,
        le=2.0,
        description="OpenAI frequency_penalty; damps the repetition loops small models fall into when decoding greedily. Default 0.3.",
    )
    llm_timeout_s: float = Field(
        default=90.0,
        gt=0,
        description="Overall budget of the LLM calls of one request (answer, fallback, repair), seconds; "
        "past it the request fails with 504 (a repair past it abstains). "
        "Below the gateway's 120 s so the caller sees the generator's reason. Default 90.",
    )
    quote_match_threshold: float = Field(
        default=DEFAULT_QUOTE_MATCH_THRESHOLD,
        ge=0.0,
        le=100.0,
        description="Minimum rapidfuzz partial_ratio (0-100) for a citation quote that is not an exact "
        "substring of its source (after normalisation); 100 = exact matches only. Default 90.",
    )
