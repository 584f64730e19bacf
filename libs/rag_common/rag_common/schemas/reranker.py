"""The reranker's request, stage specifications and response."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from rag_common.schemas.wire import JsonInt, MAX_MESSAGE_CHARS, MAX_SEARCH_TOP_K, WireModel
from rag_common.schemas.passages import Passage


class _StageSpec(WireModel):
    """A rerank stage: ``name`` has a default for Python callers but is required on the wire, where it
    is the discriminator that picks the stage."""

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: Any, handler: Any) -> dict[str, Any]:
        schema = handler.resolve_ref_schema(handler(core_schema))
        schema["required"] = ["name", *[field for field in schema.get("required", []) if field != "name"]]
        return schema


class CrossEncoderSpec(_StageSpec):
    """Score every (query, passage) pair with the configured cross-encoder; skipped if none is set."""

    name: Literal["cross_encoder"] = "cross_encoder"


class DiffusionSpec(_StageSpec):
    """Personalised PageRank over the candidates' cosine-similarity graph, seeded by the current scores."""

    name: Literal["diffusion"] = "diffusion"
    alpha: float | None = Field(default=None, ge=0.0, lt=1.0, description="Damping; None = service default.")
    top_k_edges: JsonInt | None = Field(default=None, ge=1, description="Keep only the k strongest edges per node.")


class GmmrSpec(_StageSpec):
    """Geometric MMR (DF-RAG): relevant and diverse ``top_k``; ``mmr_lambda="adaptive"`` lets an LLM pick λ."""

    name: Literal["gmmr"] = "gmmr"
    mmr_lambda: Annotated[float, Field(ge=0.0, le=1.0)] | Literal["adaptive"] | None = Field(
        default=None, description="1 = relevance only, 0 = diversity only; None = service default."
    )
    #: The relevance term: ``cosine`` of query and passage embeddings (DF-RAG as published), or the
    #: incoming ``scores`` (retriever's or cross-encoder's) min-max scaled to [0, 1], so gMMR keeps
    #: the upstream ranking's judgement of relevance; None = service default.
    relevance: Literal["cosine", "scores"] | None = None


RerankStageSpec = Annotated[CrossEncoderSpec | DiffusionSpec | GmmrSpec, Field(discriminator="name")]
RerankStageName = Literal["cross_encoder", "diffusion", "gmmr"]


class RerankRequest(WireModel):
    query: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    passages: list[Passage] = Field(max_length=500)
    top_k: JsonInt = Field(default=5, ge=1, le=MAX_SEARCH_TOP_K)
    #: The chain to run, in order; ``None`` runs the service's configured default chain.
    stages: list[RerankStageSpec] | None = Field(default=None, max_length=8)
    #: The query's embedding in the passages' embedding space (the retriever's ``query_embedding``).
    query_embedding: list[float] | None = None


class StageReport(WireModel):
    """What one stage of the chain did: ``ran``, ``skipped`` (with why), or ``failed`` (order kept)."""

    name: str
    status: Literal["ran", "skipped", "failed"]
    reason: str = ""
    ms: float = 0.0
    #: Stage-specific facts, e.g. diffusion's iterations or the λ gMMR chose and why.
    detail: dict[str, Any] = Field(default_factory=dict)


class RankedPassage(WireModel):
    """One passage of the reranker's answer: which of the sent passages (``Passage.chunk_id``) and the
    score the chain gave it. The caller already holds the passage itself."""

    chunk_id: str
    score: float


class RerankResponse(WireModel):
    """The reranker's decision, not the passages again: ``ranking`` names the kept passages by id, in
    final order, with their new scores (the caller applies it with :meth:`ranked_passages`)."""

    #: The ``top_k`` kept passages, best first (ties keep their input order).
    ranking: list[RankedPassage]
    #: The stages that ran, in order, e.g. ``["cross_encoder", "diffusion"]``.
    stages: list[str]
    timings_ms: dict[str, float] = Field(default_factory=dict)
    #: One report per requested stage, including skipped and failed ones.
    reports: list[StageReport] = Field(default_factory=list)
    #: True when a stage failed and was bypassed (the order before it was kept).
    degraded: bool = False

    def ranked_passages(self, sent: list[Passage]) -> list[Passage]:
        """``sent`` (the request's passages, or the caller's fuller copies of them) in the ranking's
        order, each with its new score and every other field as the caller holds it.

        Raises ``ValueError`` when the ranking names a passage that was not sent, or one passage
        twice: the reranker broke the contract, and its order cannot be trusted.
        """
        by_id = {passage.chunk_id: passage for passage in sent}
        ranked: list[Passage] = []
        seen: set[str] = set()
        for item in self.ranking:
            if item.chunk_id not in by_id:
                raise ValueError(f"the ranking names chunk {item.chunk_id!r}, which was not sent")
            if item.chunk_id in seen:
                raise ValueError(f"the ranking names chunk {item.chunk_id!r} twice")
            seen.add(item.chunk_id)
            ranked.append(by_id[item.chunk_id].model_copy(update={"score": item.score}))
        return ranked
