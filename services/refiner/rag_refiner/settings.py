"""Refiner settings (env prefix ``REFINER_``). Each description states the default.

The chat endpoint itself is configured by the shared ``LLM_*`` settings (``LLMSettings``).
"""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rag_common.settings import ServiceSettings


class RefinerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="REFINER_", extra="ignore")

    port: int = Field(default=8001, description="TCP port of the refiner. Default 8001.")
    history_turns: int = Field(
        default=3, ge=1, description="Most recent conversation turns shown to the model. Default 3."
    )
    history_answer_chars: int = Field(
        default=300, ge=0, description="Each past answer is cut to this many characters in the prompt. Default 300."
    )
    max_query_chars: int = Field(
        default=400, ge=1, description="Longest model rewrite the guard accepts, in characters. Default 400."
    )
    llm_timeout_s: float = Field(
        default=20.0, gt=0, description="Overall budget of one rewrite call, seconds; past it the raw message is used. Default 20."
    )
