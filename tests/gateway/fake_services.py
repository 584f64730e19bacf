"""Contract fakes of the four downstream services, served over real HTTP.

They answer deterministically so the gateway's orchestration (order of stages, what is passed
along, what is stored, how failures map to status codes) can be checked exactly. The real
services are exercised end to end in tests/e2e.
"""

from __future__ import annotations


from fastapi import FastAPI

from rag_common.schemas import (
    Citation,
    GenerateRequest,
    GenerateResponse,
    Passage,
    RefineRequest,
    RefineResponse,
    RerankRequest,
    RerankResponse,
    SearchRequest,
    SearchResponse,
    StageReport,
)


def build_fake_services(calls: list[tuple[str, dict]]) -> FastAPI:
    app = FastAPI()

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.post("/v1/refine")
    async def refine(body: RefineRequest) -> RefineResponse:
        calls.append(("refine", body.model_dump()))
        if not body.history:
            return RefineResponse(query=body.message, rewritten=False, method="passthrough")
        return RefineResponse(query=f"{body.message} ({body.history[-1].question})", rewritten=True, method="context_append")

    @app.post("/v1/search")
    async def search(body: SearchRequest) -> SearchResponse:
        calls.append(("search", body.model_dump()))
        vectors = [[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]
        passages = [
            Passage(
                chunk_id=f"doc{i}:0:abc",
                doc_id=f"doc{i}",
                text=f"text {i} about {body.query}",
                score=1 - i / 10,
                embedding=vectors[i % 3] if body.include_embeddings else None,
            )
            for i in range(body.top_k)
        ]
        query_embedding = [1.0, 0.0] if body.include_embeddings else None
        return SearchResponse(passages=passages, mode=body.mode, query_embedding=query_embedding)

    @app.post("/v1/rerank")
    async def rerank(body: RerankRequest) -> RerankResponse:
        calls.append(("rerank", body.model_dump()))
        ordered = [p.model_copy(update={"embedding": None}) for p in reversed(body.passages)][: body.top_k]
        if body.query == "break a stage":
            report = StageReport(name="diffusion", status="failed", reason="ValueError: broken graph")
            return RerankResponse(passages=body.passages[: body.top_k], stages=[], reports=[report], degraded=True)
        return RerankResponse(passages=ordered, stages=["fake"])

    @app.post("/v1/generate")
    async def generate(body: GenerateRequest) -> GenerateResponse:
        calls.append(("generate", body.model_dump()))
        first = body.passages[0]
        citation = Citation(id=1, source=first.source, title=first.title, chunk_id=first.chunk_id, score=first.score)
        return GenerateResponse(answer=f"answer to {body.query} [1]", citations=[citation], abstained=False)

    return app
