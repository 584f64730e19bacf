"""Settings shared by several services. Each field's description states its default."""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field, field_validator
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


#: ``EMBEDDER_LANGUAGES`` entry meaning "the model knows every language".
EVERY_LANGUAGE = "*"


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
    query_prefix: str | None = Field(
        default=None,
        description="Text put before every query before it is embedded (e5-style models want \"query: \"). Unset: "
        "the prompt the model folder declares (config_sentence_transformers.json, prompts.query), else none. "
        "docs/multilingual-models.md. Default unset.",
    )
    document_prefix: str | None = Field(
        default=None,
        description="Text put before every chunk before it is embedded (e5-style: \"passage: \"). Unset: the prompt "
        "the model folder declares (prompts.document / passage / corpus), else none. Default unset.",
    )
    onnx_threads: int = Field(
        default=0,
        ge=0,
        description="ONNX Runtime intra-op threads per embedder; 0 = one per physical core. Default 0.",
    )
    # A property of the model, like its prefixes, and the same model embeds in every service (the
    # generator reuses the retriever's vectors), so this is the one place it is declared.
    languages: list[str] = Field(
        default_factory=lambda: ["en"],
        description="Languages the embedding model was trained for (ISO 639-1, JSON list; [\"*\"] = every language, "
        "for a multilingual model such as paraphrase-multilingual-MiniLM-L12-v2 or bge-m3: docs/multilingual-models.md). "
        "Outside them the model's cosines match shared tokens, not meaning: the generator's answerability gate "
        "then reads a question without them (embedder_blind, docs/languages.md). A question whose language "
        "cannot be told counts as outside. Default [\"en\"]: the default model, all-MiniLM-L6-v2, is English only.",
    )

    @field_validator("languages")
    @classmethod
    def _language_codes(cls, codes: list[str]) -> list[str]:
        # Any ISO 639-1 code (a model may know languages this product does not analyse), or "*".
        wrong = [code for code in codes if code != EVERY_LANGUAGE and not (len(code) == 2 and code.isalpha() and code.islower())]
        if wrong or not codes:
            raise ValueError(f"EMBEDDER_LANGUAGES wants ISO 639-1 codes (e.g. [\"en\", \"ro\"]) or [\"*\"], got {codes}")
        return codes

    def covers(self, language: str | None) -> bool:
        """Whether the model was trained for ``language`` (None: cannot be told, so not known to be)."""
        return EVERY_LANGUAGE in self.languages or (language is not None and language in self.languages)


#: Every language both search engines can stem (rag_common.languages.registry.LANGUAGES).
ALL_LANGUAGES = ["ar", "da", "de", "el", "en", "es", "fi", "fr", "hu", "it", "nl", "no", "pt", "ro", "ru", "sv", "tr"]


class LanguageSettings(BaseSettings):
    """Which languages the product analyses and how it names a text's language (prefix ``RAG_``), the same
    in every service: the retriever (an analyzer per language), the refiner and generator (rules and texts
    in the question's language) and the gateway. docs/languages.md has the measurements behind each."""

    model_config = SettingsConfigDict(env_prefix="RAG_", extra="ignore")

    languages: list[str] = Field(
        default_factory=lambda: list(ALL_LANGUAGES),
        description="Languages analysed in their own right (ISO 639-1, JSON list): each gets a stemmed, "
        "stop-worded lexical field in the index and its own sentence and content-word rules; any other text is "
        "analysed language-neutrally (lowercased, diacritics folded, no stemming). Changing the set of an "
        "existing embedded index re-analyses it at start (no re-embedding). Default: all 17 both engines "
        "stem: ar da de el en es fi fr hu it nl no pt ro ru sv tr.",
    )
    language_min_confidence: float = Field(
        default=0.70,
        gt=0,
        le=1,
        description="Share of the probability (renormalised over RAG_LANGUAGES) a detected language needs before "
        "a text is analysed in it; below it a query takes its conversation's last confident language, a "
        "document its declared one, else the neutral analysis. 0.70: 99.7 % of Romanian questions (98.7 % typed "
        "without diacritics) pass, and no wrong label on XQuAD's four languages. Default 0.70.",
    )
    language_other_confidence: float = Field(
        default=0.50,
        gt=0,
        le=1,
        description="Probability at which a text whose most likely language is outside RAG_LANGUAGES counts as "
        "that other language (neutral analysis) instead of being forced into a configured one. Default 0.50.",
    )
    default_language: str = Field(
        default="en",
        description="Language of the service's own texts (abstention, degraded notes, errors) when a question's "
        "language cannot be told and its conversation has none: one of the shipped message languages. Default en.",
    )

    @field_validator("languages")
    @classmethod
    def _supported(cls, codes: list[str]) -> list[str]:
        from rag_common.languages.registry import languages

        return [language.code for language in languages(codes)]  # UnsupportedLanguageError names the choices

    @field_validator("default_language")
    @classmethod
    def _shipped(cls, code: str) -> str:
        from rag_common.languages.registry import language

        return language(code).code
