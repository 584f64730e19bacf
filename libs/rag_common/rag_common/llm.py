"""The chat-model seam: a ``ChatOpenAI`` bound to any OpenAI-compatible endpoint.

Of the services, imported only by the three that call an LLM, so the gateway and retriever stay
light: the refiner (rewrite, intent, HyDE), the generator (answers) and the reranker (adaptive λ
only). rag_eval's judge and the benchmarks use it too.
"""

from __future__ import annotations

import httpx
from langchain_openai import ChatOpenAI

from rag_common.llm_admission import LLMAdmission
from rag_common.settings import LLMSettings


def build_chat_model(settings: LLMSettings, *, max_tokens: int | None = None) -> ChatOpenAI:
    return ChatOpenAI(
        base_url=settings.base_url,
        model=settings.model,
        api_key=settings.api_key,
        temperature=settings.temperature,
        max_tokens=max_tokens or settings.max_tokens,
        timeout=settings.timeout_s,
        max_retries=settings.max_retries,
    )


def llm_admission(service: str, settings: LLMSettings) -> LLMAdmission:
    """The admission control every model call of ``service`` goes through (one per process)."""
    return LLMAdmission(
        service,
        slots=settings.slots,
        max_queue=settings.max_queue,
        expected_call_s=settings.expected_call_s,
        max_wait_s=settings.max_queue_wait_s,
    )


async def llm_readiness(settings: LLMSettings) -> str:
    """``"ok"`` when the endpoint lists models, else the reason it does not."""
    try:
        async with httpx.AsyncClient(timeout=3.0) as client:
            response = await client.get(
                f"{settings.base_url.rstrip('/')}/models", headers={"Authorization": f"Bearer {settings.api_key}"}
            )
    except httpx.HTTPError as exc:
        return f"llm unreachable at {settings.base_url}: {type(exc).__name__}"
    return "ok" if response.status_code == 200 else f"llm HTTP {response.status_code}"
