"""The reranker assembled from its settings: the one place its parts are built.

``async with open_runtime(settings, llm_settings) as runtime`` builds the cross-encoder (if any),
its batcher, the embedder for candidates that come without vectors and the stages; loads the models
(torch threads applied first) and starts the batcher; closes it on exit. The app's lifespan, the
eval harness and the benchmarks all open it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from rag_common.embedders import Embedder, ModelNotAvailableError
from rag_common.embedders.factory import build_embedder as build_configured_embedder
from rag_common.settings import LLMSettings
from rag_reranker.batching import MicroBatcher, UnbatchedScorer
from rag_reranker.scorers.base import PairScorer
from rag_reranker.scorers.cross_encoder import CrossEncoderScorer
from rag_reranker.scorers.local_cross_encoder import ScorerOptions
from rag_reranker.settings import RerankerSettings
from rag_reranker.stages.adaptive_lambda import AdaptiveLambdaSelector
from rag_reranker.stages.base import ChainStage
from rag_reranker.stages.cross_encoder_stage import NO_MODEL_REASON, CrossEncoderStage
from rag_reranker.stages.diffusion_stage import DiffusionStage
from rag_reranker.stages.gmmr_stage import GmmrStage
from rag_reranker.rerank_service import RerankService
from rag_reranker.torch_runtime import apply_torch_threads, resolve_device

logger = logging.getLogger(__name__)


def build_cross_encoder(settings: RerankerSettings) -> PairScorer | None:
    """An un-warmed cross-encoder, or None when none is configured.

    Raises ModelNotAvailableError, naming the model and the setting, if it is configured but not on disk.
    """
    if not settings.cross_encoder_model:
        logger.info("cross_encoder stage will be skipped: %s", NO_MODEL_REASON)
        return None
    scorer_class = CrossEncoderScorer
    if settings.cross_encoder_backend == "flag_embedding":
        from rag_reranker.scorers.flag_reranker import FlagRerankerScorer

        scorer_class = FlagRerankerScorer
    try:
        return scorer_class(
            settings.cross_encoder_model, ScorerOptions.of(settings), device=resolve_device(settings.device)
        )
    except ModelNotAvailableError as exc:
        raise ModelNotAvailableError(
            f"cross-encoder {settings.cross_encoder_model!r} (RERANKER_CROSS_ENCODER_MODEL) is not available: "
            f"{exc}. Point RERANKER_CROSS_ENCODER_MODEL at a local model directory, or leave it empty "
            "to skip the cross_encoder stage."
        ) from exc


def build_embedder(settings: RerankerSettings) -> Embedder:
    """The fallback embedder, run as ``EMBEDDER_BACKEND`` says (onnx by default; torch on a GPU device)."""
    return build_configured_embedder(
        settings.embedding_model, device=resolve_device(settings.device), batch_size=settings.batch_size
    )


#: Micro-batching wait when RERANKER_BATCH_MAX_WAIT_MS is unset and the model is on a GPU.
GPU_BATCH_MAX_WAIT_MS = 5.0


def batch_max_wait_ms(settings: RerankerSettings) -> float:
    """The configured wait, else 5 ms on CUDA and 0 (no batching) on CPU.

    On a GPU a forward pass of 64 pairs costs about what one of 8 does, so concurrent requests are
    worth gathering; on CPU the pass is compute-bound and batching only adds padding (measured
    0.4–0.7× of unbatched throughput on 2 cores, docs/benchmarks.md).
    """
    if settings.batch_max_wait_ms is not None:
        return settings.batch_max_wait_ms
    return GPU_BATCH_MAX_WAIT_MS if resolve_device(settings.device).startswith("cuda") else 0.0


def build_pair_queue(scorer: PairScorer, settings: RerankerSettings) -> MicroBatcher | UnbatchedScorer:
    wait_ms = batch_max_wait_ms(settings)
    if wait_ms <= 0:
        return UnbatchedScorer(scorer.score_pairs)
    return MicroBatcher(scorer.score_pairs, max_pairs=settings.batch_max_pairs, max_wait_s=wait_ms / 1000.0)


def build_adaptive_selector(settings: RerankerSettings, llm: LLMSettings | None) -> AdaptiveLambdaSelector | None:
    if llm is None:
        return None
    from rag_common.llm import build_chat_model
    from rag_reranker.llm_lambda_evaluator import LLMLambdaEvaluator

    evaluator = LLMLambdaEvaluator(build_chat_model(llm, max_tokens=min(llm.max_tokens, 256)))
    return AdaptiveLambdaSelector(evaluator, concurrency=settings.evaluator_concurrency)


@dataclass
class RerankerRuntime:
    settings: RerankerSettings
    cross_encoder: PairScorer | None
    pair_queue: MicroBatcher | UnbatchedScorer | None
    embedder: Embedder
    stages: dict[str, ChainStage]
    rerank: RerankService

    async def readiness(self) -> dict[str, str]:
        # Models are loaded before the runtime is handed out, so an open runtime is a ready one.
        return {"model": "ok"}


def build_stages(
    settings: RerankerSettings, llm: LLMSettings | None, pair_queue: MicroBatcher | UnbatchedScorer | None, model_id: str
) -> dict[str, ChainStage]:
    return {
        "cross_encoder": CrossEncoderStage(pair_queue, model_id=model_id),
        "diffusion": DiffusionStage.of(settings),
        "gmmr": GmmrStage.of(settings, adaptive=build_adaptive_selector(settings, llm)),
    }


def build_runtime(
    settings: RerankerSettings,
    llm: LLMSettings | None,
    *,
    embedder: Embedder | None = None,
    default_chain: list[str] | None = None,
) -> RerankerRuntime:
    """Every part built from the settings, nothing loaded or started (``open_runtime`` does that).

    ``llm`` None: no evaluator, so gMMR's adaptive λ falls back to the fixed λ. Raises
    ModelNotAvailableError, naming the model and the setting, if a configured model is not on disk.
    """
    cross_encoder = build_cross_encoder(settings)
    pair_queue = build_pair_queue(cross_encoder, settings) if cross_encoder is not None else None
    stages = build_stages(settings, llm, pair_queue, cross_encoder.model_id if cross_encoder else "")
    model = embedder or build_embedder(settings)
    chain = settings.default_chain if default_chain is None else default_chain
    return RerankerRuntime(
        settings=settings,
        cross_encoder=cross_encoder,
        pair_queue=pair_queue,
        embedder=model,
        stages=stages,
        rerank=RerankService(stages, default_chain=chain, embedder=model),
    )


@asynccontextmanager
async def open_runtime(
    settings: RerankerSettings | None = None,
    llm_settings: LLMSettings | None = None,
    *,
    use_llm: bool = True,
    embedder: Embedder | None = None,
    default_chain: list[str] | None = None,
) -> AsyncIterator[RerankerRuntime]:
    """The built runtime with its models loaded (torch threads applied first) and its batcher running.

    Settings default to the ``RERANKER_*`` and ``LLM_*`` environment; with ``use_llm`` false no LLM
    is configured and gMMR's adaptive λ is unavailable (offline evaluation). ``embedder`` shares an
    already loaded model (evaluation); ``default_chain`` overrides ``RERANKER_DEFAULT_CHAIN`` (the
    eval harness names every chain explicitly, so it opens the service with an empty one).
    """
    settings = settings or RerankerSettings()
    llm = (llm_settings or LLMSettings()) if use_llm else None
    apply_torch_threads(settings.torch_threads)
    runtime = build_runtime(settings, llm, embedder=embedder, default_chain=default_chain)
    await asyncio.to_thread(runtime.embedder.warm_up)
    if runtime.cross_encoder is not None:
        await asyncio.to_thread(runtime.cross_encoder.warm_up)
    if runtime.pair_queue is not None:
        runtime.pair_queue.start()
    try:
        yield runtime
    finally:
        if runtime.pair_queue is not None:
            await runtime.pair_queue.aclose()
