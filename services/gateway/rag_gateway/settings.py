"""Gateway settings (env prefix ``GATEWAY_``). Each description states the default."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import SettingsConfigDict

from rag_common.history import HistoryWindow
from rag_common.schemas import SearchMode
from rag_common.settings import ServiceSettings


class GatewaySettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_", extra="ignore")

    port: int = Field(default=8000, description="TCP port of the public API. Default 8000.")
    redis_url: str = Field(default="redis://127.0.0.1:6379/0", description="Conversation store. Default redis://127.0.0.1:6379/0.")

    refiner_url: str = Field(default="http://127.0.0.1:8001", description="Refiner base URL. Default http://127.0.0.1:8001.")
    retriever_url: str = Field(default="http://127.0.0.1:8002", description="Retriever base URL. Default http://127.0.0.1:8002.")
    reranker_url: str = Field(default="http://127.0.0.1:8003", description="Reranker base URL. Default http://127.0.0.1:8003.")
    generator_url: str = Field(default="http://127.0.0.1:8004", description="Generator base URL. Default http://127.0.0.1:8004.")

    refiner_timeout_s: float = Field(default=30.0, description="Timeout of a refiner call, seconds. Default 30.")
    retriever_timeout_s: float = Field(default=15.0, description="Timeout of a search call, seconds. Default 15.")
    ingest_timeout_s: float = Field(default=600.0, description="Timeout of a document ingestion call, seconds. Default 600.")
    reranker_timeout_s: float = Field(default=30.0, description="Timeout of a rerank call, seconds. Default 30.")
    generator_timeout_s: float = Field(default=120.0, description="Timeout of a generation call, seconds. Default 120.")
    redis_timeout_s: float = Field(default=2.0, description="Timeout of a Redis command, seconds. Default 2.")
    retry_attempts: int = Field(
        default=3,
        ge=1,
        description=(
            "Attempts of a search, rerank or refine call whose service was unreachable or answered 502/503, "
            "the first included (1 = no retry; generation is never retried). More rides out a longer "
            "restart but holds the request longer before its stage degrades or fails. Default 3."
        ),
    )
    retry_max_wait_s: float = Field(
        default=2.0,
        gt=0,
        description=(
            "Longest wait between two attempts, seconds (exponential backoff from 0.2 s with full jitter; "
            "no attempt starts after the stage's timeout). Default 2."
        ),
    )

    default_top_k: int = Field(default=5, description="Passages given to the generator when the request has no top_k. Default 5.")
    retrieval_candidates: int = Field(
        default=20,
        ge=1,
        le=200,
        description=(
            "Candidates fetched from the retriever for reranking: the one candidate depth of the served chain, "
            "which `ragctl eval --run default` and the eval's default --candidates read too (issue 16). "
            "Deeper gives a reranker more to choose from and changes min-max fusion's scaling (each list "
            "fetches max(4 x depth, 50)), at the cost of a larger search response and more rerank work. "
            "Checked across four datasets with a held-out-dataset check (docs/evaluation.md, 'Choosing "
            "defaults'): 50 was chosen on every three but its held-out gains were noise (nDCG@10 +0.005 "
            "MTRAG-UN, +0.006 Vaswani, -0.001 ClapNQ, CIs include 0), so the cheaper 20 stays; 10 was worse "
            "(MTRAG-UN nDCG@10 0.802 vs 0.816). Default 20."
        ),
    )
    search_mode: SearchMode = Field(default="hybrid", description="Retrieval mode: dense, bm25 or hybrid. Default hybrid.")
    pass_embeddings: bool = Field(
        default=True,
        description="Fetch the candidates' stored embeddings from the retriever and pass them to the reranker, "
        "so its diffusion and gMMR stages need not re-embed them. Default true.",
    )
    pass_sentence_vectors: bool = Field(
        default=True,
        description="Fetch the candidates' stored sentence vectors from the retriever (RETRIEVER_SENTENCE_VECTORS) "
        "and pass them to the generator, so answering embeds no sentence. About 2 KB of base64 per sentence "
        "per candidate on the retriever's answer. Default true.",
    )

    conversation_max_turns: int = Field(default=50, description="Turns kept per conversation (older ones dropped). Default 50.")
    conversation_ttl_s: int = Field(default=7 * 24 * 3600, description="Conversation lifetime after its last turn, seconds. Default 604800 (7 days).")
    history_turns: int = Field(
        default=3,
        ge=0,
        description="Upper bound on the recent turns sent to the refiner and generator (the one place history "
        "is cut: they show the model what they receive). Default 3.",
    )
    history_token_budget: int = Field(
        default=1024,
        ge=0,
        description="Token budget of that history: the most recent turns whose question + answer fit are sent, "
        "older ones dropped (counted by rag_common.history, an offline approximation). Default 1024.",
    )
    history_answer_chars: int = Field(
        default=300,
        ge=0,
        description="Each past answer is cut to this many characters before the refiner and generator see it: "
        "small models lose the question in long context. Default 300.",
    )
    history_question_chars: int = Field(
        default=400,
        ge=1,
        description="Each past (standalone) question is cut to this many characters; only guards against an "
        "oversized one. Default 400.",
    )
    hyde_default: bool = Field(
        default=False,
        description="Ask the refiner for a hypothetical answer (HyDE) and search with it when a request does not say "
        "(ChatRequest.hyde null). Default false.",
    )
    # The three replies below are the message catalog's (rag_common/messages), in the question's language;
    # a value set here replaces the catalog's text in every language.
    chitchat_reply: str | None = Field(
        default=None,
        description="Canned reply to a greeting or other small talk (intent chitchat); no LLM, no retrieval. "
        "Default: unset, the catalog's text in the question's language (English: \"Hello! I answer questions "
        "about the indexed documents. What would you like to know?\"); set, this text in every language.",
    )
    thanks_reply: str | None = Field(
        default=None,
        description="Canned reply to a thank-you (intent chitchat). Default: unset, the catalog's text in the "
        "question's language (English: \"You're welcome! Ask me anything else about the documents.\"); set, "
        "this text in every language.",
    )
    out_of_scope_reply: str | None = Field(
        default=None,
        description="Polite decline for intent out_of_scope (the answer is marked abstained). Default: unset, "
        "the catalog's text in the question's language (English: \"Sorry, I can only answer questions about "
        "the indexed documents, and that is outside them.\"); set, this text in every language.",
    )
    withheld_answer_reply: str | None = Field(
        default=None,
        description="Shown in a stored conversation instead of an answer that cites a document the caller may no "
        "longer read (its ACL changed or it was deleted); the turn's citations are dropped with it. Default: unset, "
        "the catalog's text in the turn's language (English: \"This answer is withheld: it cited a document you "
        "can no longer read.\"); set, this text in every language.",
    )
    openai_model: str = Field(
        default="rag-gateway",
        description="Model id listed by GET /v1/models for OpenAI-compatible clients. Default rag-gateway.",
    )
    max_upload_mb: float = Field(default=20.0, description="Largest accepted upload request, MiB. Default 20.")

    auth: Literal["on", "off"] = Field(
        default="on",
        description="on: every route but health, readiness, metrics and the API docs needs an API key or a "
        "bearer token (401 without, 403 without the scope). off: every caller is AUTH_OFF_TENANT/"
        "AUTH_OFF_USER with every scope, and the gateway logs a warning at start; for a laptop only. Default on.",
    )
    auth_off_tenant: str = Field(default="default", description="The tenant of every caller when auth is off. Default default.")
    auth_off_user: str = Field(default="local", description="The user of every caller when auth is off. Default local.")
    jwt_issuer: str | None = Field(
        default=None,
        description="Accept OIDC/JWT bearer tokens from this issuer (`iss` must match); unset = API keys only. "
        "Needs JWT_AUDIENCE and one of JWT_JWKS_URL / JWT_PUBLIC_KEY. Default unset.",
    )
    jwt_audience: str | None = Field(default=None, description="Required `aud` of bearer tokens. Default unset.")
    jwt_jwks_url: str | None = Field(
        default=None, description="The issuer's JWKS URL (keys cached 5 min, rotated by `kid`). Default unset."
    )
    jwt_public_key: str | None = Field(
        default=None, description="A static PEM public key instead of a JWKS URL. Default unset."
    )
    jwt_algorithms: list[str] = Field(default=["RS256"], description="Accepted signature algorithms. Default [RS256].")
    jwt_tenant_claim: str = Field(default="tenant", description="Claim holding the tenant. Default tenant.")
    jwt_user_claim: str = Field(default="sub", description="Claim holding the user. Default sub.")
    jwt_groups_claim: str = Field(default="groups", description="Claim holding the groups (a list). Default groups.")
    jwt_scopes_claim: str = Field(
        default="scope",
        description="Claim holding the scopes (space-separated or a list; only chat, ingest, admin are kept). "
        "A token naming none of them gets chat. Default scope.",
    )
    jwt_default_tenant: str | None = Field(
        default=None, description="Tenant of a token without the tenant claim; unset = such tokens are refused. Default unset."
    )
    oidc_client_id: str | None = Field(
        default=None,
        description="The web chat's OIDC client id (a public client: authorization code with PKCE, no secret); "
        "with OIDC_AUTHORIZATION_URL and OIDC_TOKEN_URL it offers 'Sign in with <OIDC_PROVIDER_NAME>'. The "
        "token it gets must pass the JWT_* checks. Unset = the page offers API keys only. Default unset.",
    )
    oidc_authorization_url: str | None = Field(default=None, description="The provider's authorization endpoint. Default unset.")
    oidc_token_url: str | None = Field(
        default=None, description="The provider's token endpoint (the browser posts to it: it must allow CORS). Default unset."
    )
    oidc_scope: str = Field(default="openid", description="Scopes the web chat asks for. Default openid.")
    oidc_provider_name: str = Field(default="your organisation", description="Shown on the sign-in button. Default 'your organisation'.")
    rate_limit_chat: str | None = Field(
        default="60/minute",
        description="Chat requests (/v1/chat, /v1/chat/completions) per caller, `limits` notation; unset = no limit. "
        "Counted in Redis, shared by every gateway replica. Default 60/minute.",
    )
    rate_limit_stream: str | None = Field(
        default="60/minute", description="Streamed chat requests per caller; unset = no limit. Default 60/minute."
    )
    rate_limit_ingest: str | None = Field(
        default="30/minute", description="Ingestion and deletion requests per caller; unset = no limit. Default 30/minute."
    )

    query_log_sink: Literal["file", "opensearch", "off"] = Field(
        default="file",
        description="Where the query log (one record per chat turn and per feedback) goes: file (rotated JSON "
        "lines at GATEWAY_QUERY_LOG_PATH, read by `ragctl logs`), opensearch (daily indices "
        "GATEWAY_QUERY_LOG_INDEX_PREFIX-YYYY.MM.DD through the bulk API), or off. Default file.",
    )
    query_log_path: str = Field(
        default="var/query-logs/queries.jsonl",
        description="The query-log file of the file sink (its directory is created); `ragctl up` sets "
        "<data dir>/query-logs/queries.jsonl. Default var/query-logs/queries.jsonl (relative to the working directory).",
    )
    query_log_max_mb: float = Field(
        default=50.0, gt=0, description="Size at which the query-log file is rotated, MiB. Default 50."
    )
    query_log_backups: int = Field(
        default=5, ge=0, description="Rotated query-log files kept (queries.jsonl.1 ... .N; older ones deleted). Default 5."
    )
    query_log_queue_size: int = Field(
        default=10_000,
        ge=1,
        description="Records waiting for the background writer at most; past it new records are dropped and "
        "counted in rag_gateway_query_log_dropped_total{reason=\"queue_full\"} (a chat turn never waits). Default 10000.",
    )
    query_log_batch_size: int = Field(
        default=500, ge=1, description="Records the background writer hands to the sink at once at most. Default 500."
    )
    query_log_user_salt: SecretStr = Field(
        default=SecretStr(""),
        description="Key of the HMAC-SHA256 that turns tenant/user into the record's user_hash; set a secret in "
        "production so a hash cannot be tested against guessed names (`ragctl logs --user` needs the same value). "
        "Default empty.",
    )
    query_log_opensearch_url: str = Field(
        default="http://localhost:9200",
        description="OpenSearch endpoint of the opensearch sink. Default http://localhost:9200.",
    )
    query_log_opensearch_user: str | None = Field(
        default=None, description="OpenSearch basic-auth user of the opensearch sink. Default None (no auth)."
    )
    query_log_opensearch_password: SecretStr | None = Field(
        default=None, description="OpenSearch basic-auth password of the opensearch sink. Default None."
    )
    query_log_opensearch_verify_certs: bool = Field(
        default=True, description="Verify the OpenSearch TLS certificate (opensearch sink). Default true."
    )
    query_log_opensearch_timeout_s: float = Field(
        default=10.0, gt=0, description="Timeout of one bulk request of the opensearch sink, seconds. Default 10."
    )
    query_log_index_prefix: str = Field(
        default="rag-query-logs",
        description="Daily indices of the opensearch sink are <prefix>-YYYY.MM.DD; the index template and ISM policy "
        "in deploy/opensearch/ match rag-query-logs-*. Default rag-query-logs.",
    )

    def history_window(self) -> HistoryWindow:
        return HistoryWindow(
            turns=self.history_turns,
            token_budget=self.history_token_budget,
            question_chars=self.history_question_chars,
            answer_chars=self.history_answer_chars,
        )
