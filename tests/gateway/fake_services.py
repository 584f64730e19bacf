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
        passages = [
            Passage(chunk_id=f"doc{i}:0:abc", doc_id=f"doc{i}", text=f"text {i} about {body.query}", score=1 - i / 10)
            for i in range(body.top_k)
        ]
        return SearchResponse(passages=passages, mode=body.mode)

    @app.post("/v1/rerank")
    async def rerank(body: RerankRequest) -> RerankResponse:
        calls.append(("rerank", body.model_dump()))
        ordered = list(reversed(body.passages))[: body.top_k]
        return RerankResponse(passages=ordered, stages=["fake"])

    @app.post("/v1/generate")
    async def generate(body: GenerateRequest) -> GenerateResponse:
        calls.append(("generate", body.model_dump()))
        first = body.passages[0]
        citation = Citation(id=1, source=first.source, title=first.title, chunk_id=first.chunk_id, score=first.score)
        return GenerateResponse(answer=f"answer to {body.query} [1]", citations=[citation], abstained=False)

    return app
