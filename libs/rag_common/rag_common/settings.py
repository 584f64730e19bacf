"""Settings shared by several services. Each field's description states its default."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class ServiceSettings(BaseSettings):
    """Where a service listens. Subclasses set ``env_prefix`` (``GATEWAY_``, ``RETRIEVER_``...)."""

    model_config = SettingsConfigDict(extra="ignore", populate_by_name=True)

    host: str = Field(default="127.0.0.1", description="Interface to bind. Default 127.0.0.1.")
    port: int = Field(default=8000, description="TCP port. Defaults differ per service (see docs/ARCHITECTURE.md).")
    log_level: str = Field(default="info", description="Python/uvicorn log level. Default info.")
    service_token: str | None = Field(
        default=None,
        validation_alias=AliasChoices("RAG_SERVICE_TOKEN"),
        description="RAG_SERVICE_TOKEN, the same in every service: the gateway sends it on every internal call and "
        "the internal services refuse calls without it (401), probes and metrics excepted. Unset = internal calls "
        "are not authenticated (a warning at start); compose and k8s always set it, the local stack draws a random "
        "one. Default unset.",
    )


class LLMSettings(BaseSettings):
    """The OpenAI-compatible chat endpoint (prefix ``LLM_``), used by three services: the refiner
    (rewrite, intent, HyDE), the generator (answers) and the reranker (adaptive λ only)."""

    model_config = SettingsConfigDict(env_prefix="LLM_", extra="ignore")

    base_url: str = Field(
        default="http://127.0.0.1:8080/v1",
        description="OpenAI-compatible base URL. Default http://127.0.0.1:8080/v1 (the local llama.cpp server).",
    )
    model: str = Field(default="smollm2", description="Model name sent to the endpoint. Default smollm2.")
    api_key: str = Field(default="not-needed", description="API key. Default 'not-needed' (local server).")
    timeout_s: float = Field(default=60.0, description="Per-call timeout in seconds. Default 60.")
    max_retries: int = Field(default=1, description="Retries on transport errors. Default 1.")
    temperature: float = Field(default=0.0, description="Sampling temperature. Default 0.0 (reproducible).")
    max_tokens: int = Field(default=512, description="Upper bound on generated tokens per call. Default 512.")
    slots: int = Field(
        default=2,
        ge=1,
        description="Calls this service lets run at once against the endpoint (rag_common/llm_admission.py); "
        "match the server's parallel slots (the local llama.cpp server has 2). More only queues inside the "
        "server, where the wait is unknown. Default 2.",
    )
    max_queue: int = Field(
        default=16,
        ge=0,
        description="Calls that may wait for a slot; beyond it a call is refused at once (the caller falls back or "
        "answers 503 with Retry-After). Default 16.",
    )
    max_queue_wait_s: float = Field(
        default=10.0,
        gt=0,
        description="Longest a call waits for a slot, seconds: one expected to wait longer is refused at once, one "
        "still waiting then is refused, and one admitted with less than a mean call's time left is refused, "
        "so the caller falls back (extractive answer, context-append rewrite) or answers 503 + Retry-After "
        "instead of queueing into a timeout. Lower favours fast degraded answers, higher more LLM answers. "
        "Default 10.",
    )
    expected_call_s: float = Field(
        default=8.0,
        gt=0,
        description="Prior mean duration of one call, seconds, until calls have been measured; it sets the first "
        "expected waits. Too low admits calls that will time out, too high refuses calls that would have fit. "
        "Default 8 (SmolLM2-135M on 2 CPU cores).",
    )


class EmbedderSettings(BaseSettings):
    """How the bi-encoder is run (prefix ``EMBEDDER_``), the same in every service that embeds: the
    retriever, the reranker's fallback embedder, the generator and the eval harness. Which model is
    each service's own ``*_EMBEDDING_MODEL``; docs/benchmarks.md has the measurements behind the default."""

    model_config = SettingsConfigDict(env_prefix="EMBEDDER_", extra="ignore")

    backend: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="onnx: the model's own weights exported to ONNX (once, cached by a hash of the weights) and run "
        "by ONNX Runtime; the same vectors as torch (cosine >= 0.99999), a query embedded 2-4x faster, batches "
        "about as fast, and no torch needed to serve. torch: sentence-transformers on torch; needed for a GPU "
        "(*_DEVICE) and for a model without a tokenizer.json. Default onnx.",
    )
    onnx_cache_dir: str = Field(
        default="",
        description="Folder of the ONNX exports (<model>-<hash of its weights>/model.onnx); an export is made "
        "there on first start if missing or stale (that needs torch: `make setup` and the images make it ahead). "
        "Empty = $XDG_CACHE_HOME/rag/onnx (~/.cache/rag/onnx). Default empty.",
    )
    onnx_threads: int = Field(
        default=0,
        ge=0,
        description="ONNX Runtime intra-op threads per embedder; 0 = one per physical core. Default 0.",
    )
