"""Reranker settings (env prefix ``RERANKER_``). Each description states the default."""

from __future__ import annotations

from pydantic import Field
from pydantic_settings import SettingsConfigDict

from rag_common.settings import ServiceSettings


class RerankerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="RERANKER_", extra="ignore")

    port: int = Field(default=8003, description="TCP port of the reranker API. Default 8003.")
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="Bi-encoder used when no cross-encoder is configured: a packaged name, local path or "
        "cached Hugging Face id. Default all-MiniLM-L6-v2.",
    )
    cross_encoder_model: str = Field(
        default="",
        description="Cross-encoder as a local directory or a Hugging Face id already in the offline cache "
        "(production: BAAI/bge-reranker-v2-m3). Default empty: rerank with the bi-encoder.",
    )
    cross_encoder_max_length: int = Field(
        default=512,
        ge=1,
        description="Tokens per (query, passage) pair; longer pairs are truncated, capped at the model's limit. "
        "Default 512.",
    )
    cross_encoder_sigmoid: bool = Field(
        default=True,
        description="Pass cross-encoder logits through a sigmoid so scores lie in (0, 1). Default true.",
    )
    batch_size: int = Field(default=32, ge=1, description="Pairs (or passages) per model forward pass. Default 32.")
    device: str | None = Field(
        default=None,
        description="Torch device, e.g. cpu, cuda, cuda:1. Default unset: cuda if available, else cpu.",
    )
    torch_threads: int = Field(
        default=0,
        ge=0,
        description="CPU threads torch may use for one forward pass. Default 0: torch's default (one per core).",
    )
