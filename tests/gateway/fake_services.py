"""Contract fakes of the four downstream services, served over real HTTP.

They answer deterministically so the gateway's orchestration (order of stages, what is passed
along, what is stored, how failures map to status codes) can be checked exactly. The real
services are exercised end to end in tests/e2e.

Triggers in the message / query pick the behaviours the tests need:

* refiner intent: a greeting or thanks → ``chitchat``; "what did I ask" → ``meta``; "weather" or
  "joke" → ``out_of_scope``; anything else → ``rag``. With ``hyde`` it returns a ``hyde_query``.
* generator (``POST /v1/generate``): "llm busy" → 503 with ``Retry-After: 7`` (its LLM queue is full);
  "bad gateway" → 502; "acquired WhatsApp" → two citations that disagree, with an ``answer_span`` and a
  ``conflict`` (also the stream's ``final``).
* search: "flaky" → 503 (no ``Retry-After``) on the first call with that query, then answers, as a
  restarting retriever; "search down" → 503 on every call; "nowhere" or "nicăieri" (or "nicaieri") → no passages (a
  question the documents do not answer, in English or Romanian).
* generator stream (``POST /v1/generate/stream``, SSE): "fail mid-stream" → two tokens then an
  ``error`` event (503); "llm timeout" → an ``error`` event (504); "revise" → the tokens of a draft,
  then a ``final`` with a different (verified) answer; "no final" → tokens and the stream just ends;
  "slow stream" → 0.2 s between tokens.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterable

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent

from rag_common.identity import IDENTITY_HEADER, Identity, decode_identity
from rag_common.schemas import (
    AnswerSpan,
    Citation,
    Conflict,
    ConflictValue,
    GenerateRequest,
    GenerateResponse,
    Passage,
    RankedPassage,
    ReadableRequest,
    ReadableResponse,
    RefineRequest,
    RefineResponse,
    RerankRequest,
    RerankResponse,
    SearchRequest,
    SearchResponse,
    StageReport,
    SentenceVectors,
)


_GREETING = re.compile(r"^\s*(hi|hello|hey|good (morning|evening))\b|\bthank", re.IGNORECASE)
_META = re.compile(r"what (did|have) i ask", re.IGNORECASE)
_OUT_OF_SCOPE = re.compile(r"\b(weather|joke)\b", re.IGNORECASE)
_NOWHERE = re.compile(r"\b(nowhere|nic[ăa]ieri)\b", re.IGNORECASE)


def fake_intent(message: str) -> str:
    if _META.search(message):
        return "meta"
    if _GREETING.search(message):
        return "chitchat"
    if _OUT_OF_SCOPE.search(message):
        return "out_of_scope"
    return "rag"


#: What the fake generator answers to "who acquired WhatsApp" (two passages that disagree): the
#: answer phrase marked in citation 1, and the conflict between citations 1 and 2.
DISAGREEING_QUOTES = ("WhatsApp was acquired by Facebook in 2014.", "WhatsApp was acquired by Apple in 2014.")


def _disagreeing_answer(body: GenerateRequest) -> GenerateResponse:
    citations = [
        Citation(id=i, source=p.source, title=p.title, page=p.page, chunk_id=p.chunk_id, score=p.score, quote=quote)
        for i, (p, quote) in enumerate(zip(body.passages, DISAGREEING_QUOTES), start=1)
    ]
    start = DISAGREEING_QUOTES[0].index("Facebook")
    return GenerateResponse(
        answer="The sources disagree: Facebook [1]; Apple [2].",
        citations=citations,
        abstained=False,
        mode="extractive",
        answer_span=AnswerSpan(citation=1, start=start, end=start + len("Facebook"), text="Facebook", kind="organisation"),
        conflict=Conflict(
            kind="organisation",
            values=[ConflictValue(value="Facebook", citations=[1]), ConflictValue(value="Apple", citations=[2])],
        ),
    )


def fake_answer(body: GenerateRequest) -> GenerateResponse:
    if "acquired whatsapp" in body.query.lower():
        return _disagreeing_answer(body)
    first = body.passages[0]
    citation = Citation(
        id=1, source=first.source, title=first.title, page=first.page, chunk_id=first.chunk_id, score=first.score
    )
    return GenerateResponse(answer=f"answer to {body.query} [1]", citations=[citation], abstained=False, citation_precision=1.0)


def _pieces(text: str) -> list[str]:
    return re.findall(r"\S+\s*", text)


#: The ``X-RAG-Identity`` of each search the fake retriever received, decoded (None when absent).
SEARCH_IDENTITIES: list[Identity | None] = []
#: Document ids the fake retriever's readable check answers as not readable (by anyone), as after an
#: ACL change or a deletion; the search still cites them (they were readable when the turn was asked).
UNREADABLE_DOCUMENTS: set[str] = set()


def build_fake_services(calls: list[tuple[str, dict]]) -> FastAPI:
    app = FastAPI()
    failed_once: set[str] = set()

    @app.get("/healthz")
    async def healthz() -> dict:
        return {"status": "ok"}

    @app.post("/v1/refine")
    async def refine(body: RefineRequest) -> RefineResponse:
        calls.append(("refine", body.model_dump()))
        intent = fake_intent(body.message)
        if not body.history:
            query, rewritten, method = body.message, False, "passthrough"
        else:
            query, rewritten, method = f"{body.message} ({body.history[-1].question})", True, "context_append"
        hyde_query = f"Hypothetical passage answering: {query}" if body.hyde and intent == "rag" else None
        return RefineResponse(query=query, rewritten=rewritten, method=method, intent=intent, hyde_query=hyde_query)

    @app.post("/v1/search", response_model=None)
    async def search(body: SearchRequest, request: Request) -> SearchResponse | JSONResponse:
        calls.append(("search", body.model_dump()))
        if "search down" in body.query or ("flaky" in body.query and body.query not in failed_once):
            failed_once.add(body.query)
            return JSONResponse({"error": "index is opening"}, status_code=503)
        header = request.headers.get(IDENTITY_HEADER)
        SEARCH_IDENTITIES.append(decode_identity(header) if header else None)
        if _NOWHERE.search(body.query):
            return SearchResponse(passages=[], mode=body.mode)
        vectors = [[1.0, 0.0], [0.6, 0.8], [0.0, 1.0]]
        passages = [
            Passage(
                chunk_id=f"doc{i}:0:abc",
                doc_id=f"doc{i}",
                text=f"text {i} about {body.query}",
                title=f"Doc {i}",
                source=f"doc{i}.md",
                page=i + 1 if i % 2 == 0 else None,
                score=1 - i / 10,
                embedding=vectors[i % 3] if body.include_embeddings else None,
                sentence_vectors=(
                    # One 2-d vector for the chunk's one sentence ("text i about ...", whole).
                    SentenceVectors(context=f"Doc {i}: ", spans=[[0, len(f"text {i} about {body.query}")]], dim=2,
                                    vectors="AACAPwAAAAA=")
                    if body.include_sentence_vectors else None
                ),
            )
            for i in range(body.top_k)
        ]
        query_embedding = [1.0, 0.0] if body.include_embeddings else None
        return SearchResponse(passages=passages, mode=body.mode, query_embedding=query_embedding)

    @app.post("/v1/documents/readable")
    async def readable(body: ReadableRequest) -> ReadableResponse:
        calls.append(("readable", body.model_dump()))
        return ReadableResponse(doc_ids=sorted(set(body.doc_ids) - UNREADABLE_DOCUMENTS))

    @app.post("/v1/rerank")
    async def rerank(body: RerankRequest) -> RerankResponse:
        calls.append(("rerank", body.model_dump()))
        ranking = [RankedPassage(chunk_id=p.chunk_id, score=p.score) for p in body.passages]
        if body.query == "break a stage":
            report = StageReport(name="diffusion", status="failed", reason="ValueError: broken graph")
            return RerankResponse(ranking=ranking[: body.top_k], stages=[], reports=[report], degraded=True)
        ordered = ranking[::-1][: body.top_k]
        # A broken reranker: a ranking naming a chunk it was not sent, or one chunk twice.
        if body.query == "rank a stranger":
            return RerankResponse(ranking=[RankedPassage(chunk_id="never-sent", score=9.0), *ordered[1:]], stages=["fake"])
        if body.query == "rank one twice":
            return RerankResponse(ranking=[ordered[0], *ordered[:-1]], stages=["fake"])
        return RerankResponse(ranking=ordered, stages=["fake"])

    @app.post("/v1/generate", response_model=None)
    async def generate(body: GenerateRequest) -> GenerateResponse | JSONResponse:
        calls.append(("generate", body.model_dump()))
        if "llm busy" in body.query:
            return JSONResponse(
                {"error": "llm busy: expected wait 7s + call 9s exceeds the 12s budget", "stage": "llm"},
                status_code=503,
                headers={"Retry-After": "7"},
            )
        if "bad gateway" in body.query:
            return JSONResponse({"error": "upstream connection reset"}, status_code=502)
        return fake_answer(body)

    @app.post("/v1/generate/stream", response_class=EventSourceResponse)
    async def generate_stream(body: GenerateRequest) -> AsyncIterable[ServerSentEvent]:
        calls.append(("generate_stream", body.model_dump()))
        final = fake_answer(body)
        if "llm timeout" in body.query:
            yield ServerSentEvent(event="error", data={"error": "LLM timed out after 60s", "status": 504})
            return
        draft = "a draft answer that cites [7]" if "revise" in body.query else final.answer
        pieces = _pieces(draft)
        for i, piece in enumerate(pieces):
            if "fail mid-stream" in body.query and i == 2:
                yield ServerSentEvent(event="error", data={"error": "LLM unavailable: connection refused", "status": 503})
                return
            yield ServerSentEvent(event="token", data={"text": piece})
            await asyncio.sleep(0.2 if "slow stream" in body.query else 0.005)
        if "no final" in body.query:
            return
        if "revise" in body.query:
            final = final.model_copy(update={"answer": "the verified answer [1]", "citation_precision": 0.5})
        yield ServerSentEvent(event="final", data=final)

    return app
