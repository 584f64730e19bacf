"""Refiner settings (env prefix ``REFINER_``). Each description states the default.

The chat endpoint itself is configured by the shared ``LLM_*`` settings (``LLMSettings``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rag_common.settings import ServiceSettings
from rag_refiner.hyde_writer import DEFAULT_HYDE_MAX_TOKENS
from rag_refiner.intent_router import DEFAULT_CONFIDENCE_THRESHOLD, DEFAULT_LLM_MIN_CONFIDENCE


class RefinerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="REFINER_", extra="ignore")

    port: int = Field(default=8001, description="TCP port of the refiner. Default 8001.")
    max_query_chars: int = Field(
        default=400, ge=1, description="Longest model rewrite the guard accepts, in characters. Default 400."
    )
    llm_timeout_s: float = Field(
        default=20.0,
        gt=0,
        description=(
            "Budget of each model call (intent, rewrite, HyDE), seconds; past it that step falls back "
            "(raw message, intent rag, no HyDE) and the request's later model calls are skipped. Default 20."
        ),
    )
    intent_confidence_threshold: float = Field(
        default=DEFAULT_CONFIDENCE_THRESHOLD,
        ge=0.0,
        le=1.0,
        description=(
            "Classifier probability a chitchat/meta/out_of_scope label needs to be used without the LLM; "
            "below it the LLM is asked (rag is used at any probability). Default 0.6."
        ),
    )
    intent_llm_min_confidence: float = Field(
        default=DEFAULT_LLM_MIN_CONFIDENCE,
        ge=0.0,
        le=1.0,
        description=(
            "Below the threshold, the LLM is asked only if the non-rag label still has at least this "
            "probability; a weaker leaning goes to rag without a call. Default 0.5."
        ),
    )
    intent_llm: bool = Field(
        default=True,
        description="Ask the LLM about messages the classifier is unsure of; off, those go to rag. Default true.",
    )
    hyde_max_tokens: int = Field(
        default=DEFAULT_HYDE_MAX_TOKENS,
        ge=16,
        le=512,
        description="Upper bound on the tokens of the HyDE passage. Default 96.",
    )
