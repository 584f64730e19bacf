"""Generator settings (env prefix ``GENERATOR_``). Each description states the default and the trade-off.

The chat endpoint itself is configured by the shared ``LLM_*`` settings (``LLMSettings``).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rag_common.settings import ServiceSettings
from rag_generator.claim_reply import HARD_MAX_CLAIM_CHARS, HARD_MAX_CLAIMS
from rag_generator.claim_support import DEFAULT_LEXICAL_WEIGHT, DEFAULT_SUPPORT_THRESHOLD


class GeneratorSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="GENERATOR_", extra="ignore")

    port: int = Field(default=8004, description="TCP port of the generator. Default 8004.")
    mode: Literal["generative", "extractive", "auto"] = Field(
        default="extractive",
        description="How answers are written. extractive: the best 1-3 sentences of the sources, verbatim, no LLM "
        "(fast, never unfaithful, reads as quotes). generative: the LLM's claims, each checked against the "
        "sentences it cites (fluent with a capable model; an LLM failure is a 503/504). auto: generative, "
        "falling back to extractive whenever the LLM fails or leaves no supported claim. Default extractive: "
        "measured best with the local SmolLM2-135M (docs/generator.md); set auto with a capable LLM_BASE_URL.",
    )
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="Bi-encoder that scores sentences and checks claims; the retriever's model, so its query "
        "and passage vectors can be reused. Default all-MiniLM-L6-v2.",
    )
    device: str | None = Field(default=None, description="Torch device of that model; None = CPU. Default None.")
    gate_path: str = Field(
        default="",
        description="Answerability gate parameters (JSON written by `ragctl calibrate`); empty = the one shipped "
        "in rag_generator/data; 'off' = no gate (never abstain for low answerability). Default empty.",
    )
    answerability_threshold: float | None = Field(
        default=None,
        ge=0.0,
        le=1.0,
        description="Abstain below this gate probability; None = the threshold calibrated into the gate file "
        "(its fitted_on.fit.threshold_rule: the best abstention F1 on its datasets abstaining on at most 10 % "
        "of their answerable questions). The gate's probabilities depend on the corpus's domain (a "
        "technical corpus scores lower cosines than Wikipedia), so a deployment whose own labelled questions "
        "are not in the calibration may need its own operating point: lower answers more, higher abstains "
        "more. Default None.",
    )
    max_passages: int = Field(default=6, ge=1, description="Passages whose sentences are scored and shown. Default 6.")
    max_passage_chars: int = Field(
        default=1200, ge=1, description="Sentences of each passage are kept up to this many characters. Default 1200."
    )
    max_claims: int = Field(
        default=3, ge=1, le=HARD_MAX_CLAIMS, description="maxItems of the claims in the response schema. Default 3."
    )
    claim_max_chars: int = Field(
        default=300, ge=1, le=HARD_MAX_CLAIM_CHARS, description="maxLength of one claim's text. Default 300."
    )
    support_lexical_weight: float = Field(
        default=DEFAULT_LEXICAL_WEIGHT,
        ge=0.0,
        le=1.0,
        description=f"Weight of word overlap (vs embedding cosine) in the claim support score. Default {DEFAULT_LEXICAL_WEIGHT}.",
    )
    support_threshold: float = Field(
        default=DEFAULT_SUPPORT_THRESHOLD,
        ge=0.0,
        le=1.0,
        description="Support score a claim needs to be kept; higher drops more paraphrases, lower lets more "
        f"unsupported claims through. Default {DEFAULT_SUPPORT_THRESHOLD}.",
    )
    max_tokens: int = Field(
        default=400,
        ge=1,
        description="Upper bound on generated tokens per answer; above what the schema's bounds allow "
        "(3 claims x 300 characters + ids) so a grammar-constrained reply always closes. Default 400.",
    )
    frequency_penalty: float = Field(
        default=0.3,
        ge=-2.0,
        le=2.0,
        description="OpenAI frequency_penalty; damps the repetition loops small models fall into when decoding greedily. Default 0.3.",
    )
    llm_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Overall budget of the LLM calls of one request (claims, fallback, repair), seconds; past it "
        "auto answers extractively and generative fails with 504. Below the gateway's 120 s so the caller sees "
        "the generator's reason. Default 60.",
    )
