"""Retriever settings (env prefix ``RETRIEVER_``). Each description states the default."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import SettingsConfigDict

from rag_common.schemas import MAX_SEARCH_TOP_K
from rag_common.sentence_vectors import SentenceVectorMode
from rag_common.settings import ServiceSettings


class RetrieverSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="RETRIEVER_", extra="ignore")

    port: int = Field(default=8002, description="TCP port of the retriever. Default 8002.")
    backend: Literal["embedded", "opensearch"] = Field(
        default="embedded",
        description="Index backend: embedded (tantivy + hnswlib in index_dir) or opensearch. Default embedded.",
    )
    index_dir: str = Field(
        default="var/index", description="Directory of the embedded index (tantivy + hnswlib). Default var/index."
    )
    content_digest_key: SecretStr | None = Field(
        default=None,
        description="Secret (at least 16 bytes, any text) keying the content_hash the API shows: HMAC-SHA256 per "
        "tenant of each document's SHA-256, so a guessed text cannot be confirmed offline against a listed hash "
        "(docs/security.md). Every replica of the retriever must have the same one (a Kubernetes Secret; "
        "changing it changes every shown hash, nothing is re-indexed). Default None: the key in "
        "content_digest_key_file.",
    )
    content_digest_key_file: str | None = Field(
        default=None,
        description="File holding the content digest key when content_digest_key is unset; created once (32 "
        "random bytes, mode 0600) when missing, so hashes stay the same across restarts of one retriever. "
        "Default None: content-digest.key inside index_dir.",
    )
    embedding_model: str = Field(
        default="all-MiniLM-L6-v2",
        description="Bi-encoder: a packaged model name, a local directory or a cached HF id. Default all-MiniLM-L6-v2.",
    )
    device: str | None = Field(
        default=None, description="Torch device of the embedder (cpu, cuda, mps). Default None (auto)."
    )
    chunk_tokens: int = Field(
        default=200, gt=0, description="Largest chunk, in embedder tokens (at most max_seq_length - 2). Default 200."
    )
    chunk_overlap_tokens: int = Field(
        default=40, ge=0, description="Whole trailing sentences of up to this many tokens repeated in the next chunk. Default 40."
    )
    embed_template: str = Field(
        default="{title}\n{section_path}\n{text}",
        description="What the embedder sees of a chunk, at ingestion and any re-embedding: {title} (the "
        "document's), {section_path} (headings above the chunk, joined by ' > ') and {text} (the chunk, exactly "
        "once); lines that render empty are dropped, context is cut to fit max_seq_length. '{text}' = text only. "
        "Part of each document's fingerprint: re-ingesting under another template rewrites it. "
        "Default '{title}\\n{section_path}\\n{text}' (docs/retriever.md, 'What the embedder sees').",
    )
    sentence_vectors: SentenceVectorMode = Field(
        default="pooled",
        description="Store each chunk's sentence vectors at ingestion (for the string the extractive answerer "
        "scores: title and section context, then the sentence), so answering embeds only the question. "
        "'pooled': each sentence's (and the context lines') token states averaged in the chunk's own encoder "
        "pass, a vector in context; ingestion costs a mean per sentence, not a second pass. 'embedded': each "
        "string embedded on its own, the exact vector the answerer would compute, at about twice the "
        "ingestion CPU. 'off': none stored; the generator embeds the sentences of every answer's passages "
        "(tens of ms per answer on CPU). Either way ~2 KB of index per sentence (a 384-d float32 vector). "
        "true/false read as pooled/off. Part of each document's fingerprint: changing it, a re-ingest "
        "rewrites the vectors, the chunk vectors reused. Default pooled (docs/retriever.md, 'Sentence vectors').",
    )

    @field_validator("sentence_vectors", mode="before")
    @classmethod
    def sentence_vectors_switch(cls, value: object) -> object:
        """The setting was a switch before it had modes: on is the default mode."""
        if isinstance(value, bool):
            return "pooled" if value else "off"
        if isinstance(value, str) and value.strip().lower() in {"true", "1", "yes", "on"}:
            return "pooled"
        if isinstance(value, str) and value.strip().lower() in {"false", "0", "no"}:
            return "off"
        return value

    max_upload_mb: float = Field(default=20.0, gt=0, description="Largest accepted uploaded file, MiB. Default 20.")
    max_upload_files: int = Field(
        default=100,
        ge=1,
        description="Most files in one upload request; more is a 413 before any is parsed (ragctl ingest sends "
        "batches of 16). Default 100.",
    )
    # ---- bounds on one ingest request and where its CPU work runs (docs/retriever.md, "Limits and the
    # ingest pool"; issue 29: one 10.5 MB document held the retriever for ten minutes) ----
    max_document_chars: int = Field(
        default=10_000_000,
        ge=1,
        description="Most characters in one document's text (JSON document or parsed file); a longer one refuses "
        "the request with a 413 naming this setting, before anything is chunked, embedded or written. Bounds a "
        "document's chunking time and memory. 10 million accepts an 8 MiB document (bench/ingest_scaling.py's "
        "largest: 7,769 chunks in 287 s) with room; 10 million characters of short words are about 9,300 "
        "chunks, about 6 minutes of the 2-core machine, within the gateway's 600 s ingest timeout. "
        "Default 10000000.",
    )
    max_chunks_per_request: int = Field(
        default=10_000,
        ge=1,
        description="Most chunks one ingest request may write (the chunks of its new or changed documents); more "
        "refuses the request with a 413 naming this setting, after chunking and before anything is embedded or "
        "written. Bounds a request's embedding work, which dominates ingestion: 37 ms of wall time (71 ms of "
        "CPU) per chunk on the 2-core machine (bench/ingest_scaling.py), so 10,000 chunks take about 6 minutes, "
        "within the gateway's 600 s ingest timeout with room for a busier machine; an 8 MiB document of short "
        "words makes 7,769. Default 10000.",
    )
    ingest_isolation: Literal["process", "thread"] = Field(
        default="process",
        description="Where ingestion's CPU work (parsing uploads, chunking, sentence cutting, embedding) runs. "
        "process: in ingest_workers worker processes with their own copy of the embedder, at a lower CPU "
        "priority (ingest_nice), so neither the GIL nor the CPU is taken from searches (measured: search p95 "
        "during a 1 MiB ingest 1.3x idle, against 2.5x with the work in threads); costs a second copy of the "
        "model and its memory arena (~1 GiB at peak) and a second or two at start (in the background), and the "
        "ingest yields the CPU to searches. thread: a pool of ingest_workers threads "
        "in the retriever's process. An embedder handed to the app in code (tests, the eval harness) is always "
        "used in threads. Default process.",
    )
    ingest_workers: int = Field(
        default=1,
        ge=1,
        description="Ingest requests whose CPU work runs at once (worker processes or threads). The embedder "
        "already uses every core for one batch, so more workers only share the same cores and add memory. "
        "Default 1.",
    )
    ingest_queue: int = Field(
        default=4,
        ge=0,
        description="Ingest requests that may wait for a worker; one more is refused at once with a 503 and "
        "Retry-After (the expected wait) instead of waiting blind. 4 lets ragctl ingest (2 batches in flight) and "
        "a few uploads queue; each waiting request holds its body (up to 20 MiB). Default 4.",
    )
    ingest_nice: int = Field(
        default=10,
        ge=0,
        le=19,
        description="CPU priority the ingest worker processes lower themselves by (nice), so the kernel gives the "
        "cores to searches first and ingestion takes what is left; 0 shares them equally. Process isolation "
        "only. Default 10.",
    )
    default_top_k: int = Field(
        default=10, ge=1, le=MAX_SEARCH_TOP_K, description="Passages returned when a search request gives no top_k. Default 10."
    )
    hybrid_normalization: Literal["min_max", "z_score", "rrf", "learned"] = Field(
        default="min_max",
        description=(
            "How hybrid search fuses dense and BM25 hits: min_max, z_score (opensearch backend on OpenSearch >= 3.0 "
            "only), rrf, or learned (embedded backend only): a logistic regression (fusion_model) scores each "
            "candidate of the min-max first pass plus the second hop's and PageRank's additions from their "
            "dense, BM25, rank, hybrid, hop, PageRank, entity-overlap and section features, so the graph signals "
            "count where they help; costs the second hop's BM25 searches (and a PageRank when the model reads it) "
            "per hybrid search, and the graph_ppr / graph_second_hop switches no longer apply to hybrid. "
            "Default min_max: chosen by measurement across datasets and languages (issue 31). The shipped learned "
            "model, retrained on the four English sets and XQuAD en/ro/de/es, is better held out only on multi-hop "
            "HotpotQA (nDCG@10 +0.044, pooled k-fold by question), within noise on ClapNQ, MTRAG-UN and Vaswani, "
            "and significantly below min_max on XQuAD en, ro and es (-0.004 to -0.009), in a new language too "
            "(leave one language out); on the demo corpus it ranks the README answer 3rd (min_max: 1st), and it "
            "added 14-25 ms p50 per search on a loaded machine (docs/evaluation.md, 'Learned fusion'). Turn it "
            "on for multi-hop, entity-centric corpora after measuring it (ragctl eval --run hybrid --run "
            "hybrid:learned) or retraining it on your data (ragctl train-fusion)."
        ),
    )
    fusion_model: str | None = Field(
        default=None,
        description=(
            "Parameter file of learned fusion (JSON, written by ragctl train-fusion; read only when "
            "hybrid_normalization=learned). A missing file, another schema version or a feature this retriever "
            "does not compute stops the retriever at start with the reason. Default None: the model shipped in "
            "rag_retriever/data/fusion_model.json, trained on the four English evaluation sets and XQuAD en/ro/de/es (docs/evaluation.md)."
        ),
    )
    hybrid_dense_weight: float = Field(
        default=0.5, ge=0.0, le=1.0, description="Weight of the dense list in min_max fusion (BM25 gets 1 - it). "
        "Higher trusts the embedder (paraphrases, ClapNQ's best 0.7), lower trusts exact terms (HotpotQA's entity "
        "names, best 0.4). 0.5 was chosen on every three of four datasets in the held-out-dataset check (fusion "
        "grid; docs/evaluation.md, 'Choosing defaults'); no other weight was chosen on any three. Default 0.5."
    )
    hybrid_dense_weight_other_language: float = Field(
        default=0.25, ge=0.0, le=1.0, description="Weight of the dense list in min_max fusion (and the first pass of "
        "learned fusion) for a query whose language is not one of EMBEDDER_LANGUAGES, or cannot be told: the "
        "embedder then matches by shared tokens (names, numbers) more than by meaning, and at 0.5 its list dragged "
        "Romanian hybrid below Romanian BM25 on XQuAD. 0.25 was chosen on two of XQuAD's ro, de, es and scored on "
        "the third, in turn (chosen twice, 0.2 once; docs/languages.md). Default 0.25.",
    )
    neutral_field_weight: float = Field(
        default=1.0, ge=0.0, le=1.0, description="Weight of the language-neutral lexical field (lowercased, "
        "diacritics folded, no stemming, no stop words) beside the query's own language field (weight 1) when the "
        "query's language is known; a query whose language cannot be told weighs every field 1. The neutral field "
        "is the fallback for names and for text in other languages, and its exact forms help entity questions: "
        "0.25 was equal to 1 within noise on XQuAD en/ro/de/es but cost HotpotQA hybrid nDCG@10 -0.015 "
        "[-0.031, -0.002] (docs/languages.md). Default 1.0 (scores of the two fields summed).",
    )
    hnsw_m: int = Field(default=16, ge=2, description="HNSW graph degree M (fixed when the index is created). Default 16.")
    hnsw_ef_construction: int = Field(
        default=200, ge=1, description="HNSW ef_construction (fixed when the index is created). Default 200."
    )
    hnsw_ef_search: int = Field(
        default=100, ge=1, description="HNSW ef at query time (raised to k when k is larger). Default 100."
    )
    opensearch_url: str = Field(
        default="http://localhost:9200", description="OpenSearch endpoint (opensearch backend). Default http://localhost:9200."
    )
    opensearch_index: str = Field(
        default="rag-chunks",
        pattern=r"^[a-z0-9][a-z0-9_-]*$",
        description=(
            "Alias the retriever reads and writes; physical indices are <alias>-v<version>-<timestamp> and search "
            "pipelines <alias>-hybrid-*. Default rag-chunks."
        ),
    )
    opensearch_user: str | None = Field(default=None, description="OpenSearch basic-auth user. Default None (no auth).")
    opensearch_password: SecretStr | None = Field(default=None, description="OpenSearch basic-auth password. Default None.")
    opensearch_verify_certs: bool = Field(
        default=True, description="Verify OpenSearch's TLS certificate (https URLs only). Default true."
    )
    opensearch_timeout_s: float = Field(default=30.0, gt=0, description="OpenSearch request timeout, seconds. Default 30.")
    knn_engine: Literal["faiss", "lucene"] = Field(
        default="faiss", description="k-NN engine of the embedding field (fixed when the index is created). Default faiss."
    )
    knn_space: Literal["cosinesimil", "innerproduct"] = Field(
        default="cosinesimil",
        description=(
            "k-NN space (fixed when the index is created); innerproduct only for unit-length vectors, where it "
            "ranks like cosine. Default cosinesimil."
        ),
    )

    # ---- structure-and-entity graph (both backends; docs/retriever.md "Graph retrieval") ----
    graph_ppr: bool = Field(
        default=False,
        description=(
            "Re-score each search's hits with personalised PageRank over the sparse chunk-section-document-"
            "entity graph, seeded by the query's entities and the first-pass top hits; it can also bring in "
            "chunks the first pass missed. Costs a local PageRank per search (see graph_* below). Embedded "
            "backend only: opensearch reports timings_ms.graph_ppr_unavailable instead. Off by "
            "default: on HotpotQA it did not measure better than hybrid (docs/evaluation.md). Default false."
        ),
    )
    graph_second_hop: bool = Field(
        default=False,
        description=(
            "Second hop: entities and titles in the first-pass top passages but not in the query become "
            "bounded BM25 follow-up searches merged with the first pass (no LLM). Costs up to "
            "graph_hop_entities extra BM25 searches per query (no extra embedding); pushes first-pass hits "
            "down for passages about entities they name. Off by default: on multi-hop HotpotQA it raised "
            "coverage@5 0.63 -> 0.82 (nDCG@10 +0.041), but on MTRAG-UN it lost nDCG@10 -0.058 and "
            "Recall@5 -0.149 (CIs below 0); turn it on for multi-hop, entity-centric corpora "
            "(docs/evaluation.md). Both backends (opensearch: one aggregation and one _msearch per query). Default false."
        ),
    )
    graph_ppr_damping: float = Field(
        default=0.5,
        ge=0.0,
        lt=1.0,
        description=(
            "Probability that the PageRank walk follows an edge rather than jumping back to a seed; higher "
            "reaches further from the seeds (more bridge passages, more drift). Default 0.5 (HippoRAG's)."
        ),
    )
    graph_ppr_weight: float = Field(
        default=0.3,
        ge=0.0,
        le=1.0,
        description=(
            "Weight of the (max-scaled) PageRank score in a hit's new score, the first-pass score having "
            "1 - it; 0 keeps the first-pass order and only lets new chunks in below. Default 0.3."
        ),
    )
    graph_seed_hits: int = Field(
        default=5,
        ge=0,
        le=50,
        description="First-pass top hits that seed PageRank (with the query's entities). More seeds give a "
        "broader, flatter walk. Default 5.",
    )
    graph_entity_max_chunks: int = Field(
        default=50,
        ge=1,
        description=(
            "An entity in more chunks than this is a hub and is left out of walks and follow-ups (it would "
            "link everything to everything and cost time at 100k chunks). Default 50."
        ),
    )
    graph_hop_passages: int = Field(
        default=3,
        ge=1,
        le=20,
        description="First-pass top passages whose entities the second hop follows. Default 3.",
    )
    graph_hop_entities: int = Field(
        default=4,
        ge=1,
        le=20,
        description="Most follow-up searches per query (the bound on the second hop's cost). Default 4.",
    )
    graph_hop_k: int = Field(
        default=3,
        ge=1,
        le=20,
        description="Hits kept per follow-up search. Default 3.",
    )
    graph_hop_weight: float = Field(
        default=0.9,
        ge=0.0,
        le=1.0,
        description=(
            "A follow-up hit scores this times its parent passage's score times its own min-max-scaled BM25 "
            "score (a hit already in the first pass keeps the larger of both); higher lets bridge passages "
            "overtake more first-pass hits. Default 0.9."
        ),
    )

    @field_validator("embed_template")
    @classmethod
    def valid_embed_template(cls, value: str) -> str:
        from rag_retriever.embed_template import validate

        # An environment variable cannot easily hold a newline: a literal \n means one.
        return validate(value.replace("\\n", "\n"))

    @model_validator(mode="after")
    def overlap_below_chunk(self) -> RetrieverSettings:
        if self.chunk_overlap_tokens >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap_tokens ({self.chunk_overlap_tokens}) must be below chunk_tokens ({self.chunk_tokens})"
            )
        return self

    @model_validator(mode="after")
    def z_score_needs_opensearch(self) -> RetrieverSettings:
        if self.hybrid_normalization == "z_score" and self.backend != "opensearch":
            raise ValueError("hybrid_normalization z_score needs backend opensearch (the embedded backend has min_max, rrf)")
        return self

    @model_validator(mode="after")
    def learned_needs_embedded(self) -> RetrieverSettings:
        if self.hybrid_normalization == "learned" and self.backend != "embedded":
            raise ValueError("hybrid_normalization learned needs backend embedded (its structure-and-entity graph)")
        return self

    @property
    def max_upload_bytes(self) -> int:
        return int(self.max_upload_mb * 1024 * 1024)
