"""Reranker settings (env prefix ``RERANKER_``). Each description states the default.

The adaptive-λ evaluator talks to the same OpenAI-compatible endpoint as the generator, so it reads
the shared ``LLM_*`` settings (:class:`rag_common.settings.LLMSettings`), not settings of its own.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator
from pydantic_settings import NoDecode, SettingsConfigDict

from rag_common.schemas import RerankStageName
from rag_common.settings import ServiceSettings


class RerankerSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="RERANKER_", extra="ignore")

    port: int = Field(default=8003, description="TCP port of the reranker API. Default 8003.")
    default_chain: Annotated[list[RerankStageName], NoDecode] = Field(
        default=["cross_encoder"],
        description="Stages run when a request names none, in order, comma-separated "
        "(cross_encoder, diffusion, gmmr). gMMR is not in it: held out on each of four datasets, no gMMR "
        "λ < 1 beat hybrid's own order (docs/evaluation.md, 'Choosing defaults'). Default cross_encoder.",
    )
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="Bi-encoder that embeds query and candidates for diffusion and gMMR when the request "
        "does not carry embeddings; must be the retriever's model. Default all-MiniLM-L6-v2.",
    )
    cross_encoder_model: str = Field(
        default="",
        description="Cross-encoder as a local directory or a Hugging Face id already in the offline cache "
        "(production: BAAI/bge-reranker-v2-m3). Default empty: the cross_encoder stage is skipped.",
    )
    cross_encoder_backend: Literal["sentence_transformers", "flag_embedding"] = Field(
        default="sentence_transformers",
        description="Loader of the cross-encoder: sentence-transformers' CrossEncoder, or FlagEmbedding's "
        "FlagReranker (fp16 on CUDA; needs the reranker's [flag] extra). Same scores in fp32. "
        "Default sentence_transformers.",
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
    batch_size: int = Field(default=32, ge=1, description="Pairs per model forward pass. Default 32.")
    batch_max_pairs: int = Field(
        default=64,
        ge=1,
        description="Micro-batching: most (query, passage) pairs, from any number of concurrent requests, "
        "gathered into one model call. Default 64.",
    )
    batch_max_wait_ms: float | None = Field(
        default=None,
        ge=0.0,
        description="Micro-batching: longest a request waits for others to join its batch, in ms; 0 turns "
        "micro-batching off (each request is scored alone). Default unset: 5 on CUDA, 0 on CPU, where "
        "batching measured slower (bench/reranker_throughput.py: a CPU forward pass is compute-bound, "
        "so batching only adds padding).",
    )
    device: str | None = Field(
        default=None,
        description="Torch device, e.g. cpu, cuda, cuda:1. Default unset: cuda if available, else cpu.",
    )
    torch_threads: int = Field(
        default=0,
        ge=0,
        description="CPU threads torch may use for one forward pass. Default 0: torch's default (one per core).",
    )
    diffusion_alpha: float = Field(
        default=0.85, ge=0.0, lt=1.0, description="Graph diffusion damping α (weight of the graph walk). Default 0.85."
    )
    diffusion_top_k_edges: int | None = Field(
        default=None, ge=1, description="Graph diffusion: keep only the k strongest edges per node. Default unset: all."
    )
    mmr_lambda: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description="gMMR λ when a request gives none, and the fallback when adaptive λ fails "
        "(1 = relevance only, lower = more diversity, more of the upstream order given up). Chosen across "
        "the four datasets with a held-out-dataset check (docs/evaluation.md, 'Choosing defaults'): with "
        "score relevance 0.9 beat 0.7 held out on MTRAG-UN (nDCG@10 +0.008 [+0.004, +0.011]) and was worse "
        "nowhere; no λ < 1 beat gMMR off (hence gMMR is not in default_chain). Default 0.9.",
    )
    mmr_relevance: Literal["cosine", "scores"] = Field(
        default="scores",
        description="gMMR's relevance term when a request gives none: the incoming scores (retriever's or "
        "cross-encoder's) min-max scaled to [0, 1], or cosine(query, passage) as DF-RAG publishes it. Scores "
        "by default because cosine re-sorts a hybrid ranking into dense order (docs/evaluation.md). Default scores.",
    )
    adaptive_lambdas: list[float] = Field(
        default=[round(0.1 * i, 1) for i in range(1, 11)],
        description="λ values the adaptive policy compares. Default 0.1, 0.2, ... 1.0.",
    )
    evaluator_timeout_s: float = Field(
        default=60.0,
        gt=0.0,
        description="Adaptive λ: time allowed for planning plus all evaluator calls; past it the fixed "
        "mmr_lambda is used. Default 60.",
    )
    evaluator_concurrency: int = Field(
        default=4, ge=1, description="Adaptive λ: evaluator LLM calls in flight at once. Default 4."
    )

    @field_validator("default_chain", mode="before")
    @classmethod
    def split_chain(cls, value: object) -> object:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("adaptive_lambdas")
    @classmethod
    def lambdas_in_unit_interval(cls, value: list[float]) -> list[float]:
        if not value or any(not 0.0 <= lam <= 1.0 for lam in value):
            raise ValueError("adaptive_lambdas must be a non-empty list of values in [0, 1]")
        return sorted(set(value))
