"""Adaptive λ: the selection logic (with a small hand-written evaluator, deterministic), the real
LLM evaluator against the local llama.cpp server, and the gMMR stage's fallback when the LLM is
down or hangs."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from rag_common.embedders.sentence_transformer import SentenceTransformerEmbedder
from rag_common.llm import build_chat_model
from rag_common.schemas import Passage, RerankRequest
from rag_common.settings import LLMSettings
from rag_reranker.llm_lambda_evaluator import (
    PLAN_MAX_STEPS,
    STEP_MAX_CHARS,
    LLMLambdaEvaluator,
    plan_schema,
    scores_schema,
)
from rag_reranker.runtime import build_adaptive_selector
from rag_reranker.rerank_service import RerankService
from rag_reranker.settings import RerankerSettings
from rag_reranker.stages.adaptive_lambda import AdaptiveLambdaSelector, LambdaEvaluator, median_lambda
from rag_reranker.stages.diffusion_stage import DiffusionStage
from rag_reranker.stages.gmmr_stage import GmmrStage

#: Evaluator calls in flight by default (``RERANKER_EVALUATOR_CONCURRENCY``, the one source).
CONCURRENCY = RerankerSettings().evaluator_concurrency
TEXTS = [f"passage number {i}" for i in range(8)]


class TableEvaluator:
    """Scores a set by a table of passage values: the mean value of its passages, once per step.

    Implements :class:`LambdaEvaluator`; records what it was asked and how many calls overlapped.
    """

    def __init__(self, values: dict[str, int], plan: list[str] | None = None, delay_s: float = 0.0) -> None:
        self.values = values
        self._plan = plan if plan is not None else ["step one", "step two"]
        self.delay_s = delay_s
        self.plan_calls: list[str] = []
        self.scored_sets: list[tuple[str, ...]] = []
        self.in_flight = 0
        self.max_in_flight = 0

    async def plan(self, query: str) -> list[str]:
        self.plan_calls.append(query)
        return list(self._plan)

    async def score(self, query: str, plan: list[str], passages: list[str]) -> list[int]:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            self.scored_sets.append(tuple(passages))
            value = round(sum(self.values.get(p, 0) for p in passages) / max(len(passages), 1))
            return [value] * len(plan)
        finally:
            self.in_flight -= 1


def test_table_evaluator_implements_the_protocol() -> None:
    evaluator: LambdaEvaluator = TableEvaluator({})
    assert callable(evaluator.plan) and callable(evaluator.score)


# --------------------------------------------------------------------------- selection logic


async def test_picks_the_lambda_whose_set_scores_best() -> None:
    evaluator = TableEvaluator({TEXTS[2]: 5, TEXTS[3]: 5, TEXTS[0]: 1, TEXTS[1]: 1})
    selections = {0.2: [0, 1], 0.5: [2, 3], 0.9: [0, 2]}
    choice = await AdaptiveLambdaSelector(evaluator, concurrency=CONCURRENCY).choose("q", selections, TEXTS)
    assert choice.lambda_ == 0.5
    assert choice.scores == {0.2: 1.0, 0.5: 5.0, 0.9: 3.0}
    assert choice.tied == [0.5]
    assert choice.plan == ["step one", "step two"]
    assert choice.distinct_sets == 3
    assert evaluator.plan_calls == ["q"]


@pytest.mark.parametrize(
    ("tied", "expected"),
    [([0.1, 0.4, 0.9], 0.4), ([0.3, 0.6], 0.3), ([0.2, 0.5, 0.7, 1.0], 0.5), ([0.8], 0.8)],
)
def test_median_lambda(tied: list[float], expected: float) -> None:
    assert median_lambda(tied) == expected
    assert median_lambda(list(reversed(tied))) == expected


async def test_ties_go_to_the_median_of_the_tied_lambdas() -> None:
    # Sets {0,1}, {2,3}, {4,5} all score 4; {6,7} scores 0.
    evaluator = TableEvaluator({TEXTS[i]: 4 for i in range(6)})
    selections = {0.1: [0, 1], 0.3: [2, 3], 0.6: [4, 5], 0.8: [6, 7], 1.0: [0, 1]}
    choice = await AdaptiveLambdaSelector(evaluator, concurrency=CONCURRENCY).choose("q", selections, TEXTS)
    assert choice.tied == [0.1, 0.3, 0.6, 1.0]
    assert choice.lambda_ == 0.3  # lower median of four
    assert choice.scores[0.8] == 0.0


async def test_identical_sets_are_evaluated_once() -> None:
    evaluator = TableEvaluator({TEXTS[0]: 3})
    # Same sets in different selection order count as one set.
    selections = {0.1: [0, 1], 0.2: [1, 0], 0.3: [0, 1], 0.4: [2, 3], 0.5: [3, 2]}
    choice = await AdaptiveLambdaSelector(evaluator, concurrency=CONCURRENCY).choose("q", selections, TEXTS)
    assert choice.distinct_sets == 2
    assert sorted(evaluator.scored_sets) == sorted([(TEXTS[0], TEXTS[1]), (TEXTS[2], TEXTS[3])])
    assert choice.scores[0.1] == choice.scores[0.2] == choice.scores[0.3]
    assert set(choice.scores) == {0.1, 0.2, 0.3, 0.4, 0.5}


@pytest.mark.parametrize("concurrency", [1, 3])
async def test_evaluator_calls_in_flight_are_bounded(concurrency: int) -> None:
    evaluator = TableEvaluator({}, delay_s=0.02)
    selections = {round(0.1 * i, 1): [i % 8, (i + 1) % 8] for i in range(1, 9)}  # 8 distinct sets
    choice = await AdaptiveLambdaSelector(evaluator, concurrency=concurrency).choose("q", selections, TEXTS)
    assert choice.distinct_sets == 8 and len(evaluator.scored_sets) == 8
    assert evaluator.max_in_flight == concurrency


async def test_out_of_range_step_scores_are_clamped_and_an_empty_plan_falls_back_to_the_query() -> None:
    class Wild(TableEvaluator):
        async def score(self, query: str, plan: list[str], passages: list[str]) -> list[int]:
            return [9, -3] if passages[0] == TEXTS[0] else [4, 4]

    evaluator = Wild({}, plan=["   "])
    choice = await AdaptiveLambdaSelector(evaluator, concurrency=CONCURRENCY).choose("the query", {0.2: [0], 0.4: [1]}, TEXTS)
    assert choice.plan == ["the query"]
    assert choice.scores == {0.2: 2.5, 0.4: 4.0} and choice.lambda_ == 0.4


async def test_evaluator_errors_propagate_and_bad_input_is_rejected() -> None:
    class Empty(TableEvaluator):
        async def score(self, query: str, plan: list[str], passages: list[str]) -> list[int]:
            return []

    with pytest.raises(ValueError, match="no step scores"):
        await AdaptiveLambdaSelector(Empty({}), concurrency=CONCURRENCY).choose("q", {0.5: [0]}, TEXTS)
    with pytest.raises(ValueError):
        await AdaptiveLambdaSelector(TableEvaluator({}), concurrency=CONCURRENCY).choose("q", {}, TEXTS)
    with pytest.raises(ValueError):
        AdaptiveLambdaSelector(TableEvaluator({}), concurrency=0)


# --------------------------------------------------------------------------- the LLM evaluator


def test_schemas_bound_the_replies() -> None:
    plan = plan_schema()["schema"]["properties"]["steps"]
    assert (plan["minItems"], plan["maxItems"], plan["items"]["maxLength"]) == (1, PLAN_MAX_STEPS, STEP_MAX_CHARS)
    scores = scores_schema(3)["schema"]["properties"]["scores"]
    assert (scores["minItems"], scores["maxItems"]) == (3, 3)
    assert (scores["items"]["minimum"], scores["items"]["maximum"]) == (0, 5)


@pytest.fixture
def llm_evaluator(llm_base_url: str) -> LLMLambdaEvaluator:
    return LLMLambdaEvaluator(build_chat_model(LLMSettings(base_url=llm_base_url), max_tokens=256))


async def test_llm_evaluator_plans_and_scores_with_the_real_model(llm_evaluator: LLMLambdaEvaluator) -> None:
    query = "What do rabbits eat, and how often should they be fed?"
    plan = await llm_evaluator.plan(query)
    assert 1 <= len(plan) <= PLAN_MAX_STEPS
    assert all(isinstance(step, str) and step.strip() and len(step) <= STEP_MAX_CHARS for step in plan)

    scores = await llm_evaluator.score(
        query, plan, ["Rabbits eat hay, grass and leafy greens every day.", "The museum opens at nine."]
    )
    assert len(scores) == len(plan)
    assert all(type(s) is int and 0 <= s <= 5 for s in scores)


async def test_llm_evaluator_drives_the_selector(llm_evaluator: LLMLambdaEvaluator) -> None:
    texts = ["Rabbits eat hay and leafy greens.", "Rabbits need fresh water daily.", "Invoices go out monthly."]
    choice = await AdaptiveLambdaSelector(llm_evaluator, concurrency=2).choose(
        "What do rabbits need?", {0.3: [0, 1], 0.9: [0, 2]}, texts
    )
    assert choice.lambda_ in (0.3, 0.9)
    assert set(choice.scores) == {0.3, 0.9} and all(0.0 <= s <= 5.0 for s in choice.scores.values())
    assert 1 <= len(choice.plan) <= PLAN_MAX_STEPS and choice.distinct_sets == 2


# --------------------------------------------------------------------------- the gMMR stage with adaptive λ


def _passages(texts: list[str]) -> list[Passage]:
    return [Passage(chunk_id=f"d{i}#0", doc_id=f"d{i}", text=t, score=10.0 - i) for i, t in enumerate(texts)]


ANIMAL_TEXTS = [
    "Rabbits eat hay, grass and leafy greens.",
    "Rabbits are herbivores and graze mostly at dawn and dusk.",
    "Hay should make up most of a rabbit's diet.",
    "Rabbits need fresh water every day.",
    "The museum opens at nine and closes at five.",
    "Invoices are emailed on the first business day of each month.",
]


def _adaptive_request(top_k: int = 2) -> RerankRequest:
    return RerankRequest.model_validate(
        {
            "query": "What do rabbits eat?",
            "passages": _passages(ANIMAL_TEXTS),
            "top_k": top_k,
            "stages": [{"name": "gmmr", "mmr_lambda": "adaptive"}],
        }
    )


def _service(stage: GmmrStage, minilm: SentenceTransformerEmbedder) -> RerankService:
    return RerankService({"gmmr": stage, "diffusion": DiffusionStage.of(RerankerSettings())}, default_chain=["gmmr"], embedder=minilm)


async def test_adaptive_gmmr_with_a_dead_llm_falls_back_to_the_default_lambda(
    dead_llm_settings: LLMSettings, minilm: SentenceTransformerEmbedder
) -> None:
    selector = build_adaptive_selector(RerankerSettings(), dead_llm_settings)
    assert isinstance(selector, AdaptiveLambdaSelector)
    stage = GmmrStage.of(
        RerankerSettings(mmr_lambda=0.7, adaptive_lambdas=[0.1, 0.5, 1.0], evaluator_timeout_s=30.0), adaptive=selector
    )
    service = _service(stage, minilm)
    response = await service.rerank(_adaptive_request())
    fixed = await service.rerank(
        RerankRequest.model_validate(
            {**_adaptive_request().model_dump(), "stages": [{"name": "gmmr", "mmr_lambda": 0.7}]}
        )
    )

    (report,) = response.reports
    assert report.status == "ran" and not response.degraded
    assert report.detail["lambda"] == 0.7 and report.detail["lambda_policy"] == "fixed"
    assert report.detail["fallback"].startswith("evaluator failed: ")
    assert "Connection" in report.detail["fallback"]
    assert [p.chunk_id for p in response.ranking] == [p.chunk_id for p in fixed.ranking]
    assert len(response.ranking) == 2


async def test_adaptive_gmmr_with_a_hung_llm_falls_back_after_its_timeout(
    hung_llm_settings: LLMSettings, minilm: SentenceTransformerEmbedder
) -> None:
    stage = GmmrStage.of(
        RerankerSettings(mmr_lambda=0.4, adaptive_lambdas=[0.1, 1.0], evaluator_timeout_s=0.5),
        adaptive=build_adaptive_selector(RerankerSettings(), hung_llm_settings),
    )
    response = await _service(stage, minilm).rerank(_adaptive_request())
    (report,) = response.reports
    assert report.status == "ran" and not response.degraded
    assert report.detail["lambda"] == 0.4 and "TimeoutError" in report.detail["fallback"]


async def test_adaptive_gmmr_without_an_evaluator_says_so(minilm: SentenceTransformerEmbedder) -> None:
    assert build_adaptive_selector(RerankerSettings(), None) is None
    response = await _service(GmmrStage.of(RerankerSettings(mmr_lambda=0.6), adaptive=None), minilm).rerank(_adaptive_request())
    (report,) = response.reports
    assert report.status == "ran"
    assert report.detail == {"lambda": 0.6, "relevance": "scores", "lambda_policy": "fixed", "fallback": "no evaluator configured"}


async def test_adaptive_gmmr_uses_the_evaluators_choice(minilm: SentenceTransformerEmbedder) -> None:
    """The stage reports and applies the selector's λ (deterministic evaluator: favours diverse sets)."""
    from rag_reranker.stages.gmmr import GeometricMMR

    lambdas = (0.0, 0.5, 1.0)
    query_vector = minilm.encode_queries(["What do rabbits eat?"])[0]
    vectors = minilm.encode_documents(ANIMAL_TEXTS)
    sweep = GeometricMMR().lambda_sweep(query_vector, vectors, 2, lambdas)
    # Value only the passages λ = 0 picks (and that λ = 1 does not), so λ = 0's set must win.
    favoured = set(sweep[0.0]) - set(sweep[1.0])
    assert favoured, "the sweep's extremes picked the same set: choose other texts"
    evaluator = TableEvaluator({ANIMAL_TEXTS[i]: 5 for i in favoured})
    stage = GmmrStage.of(
        RerankerSettings(mmr_lambda=0.7, adaptive_lambdas=list(lambdas)), adaptive=AdaptiveLambdaSelector(evaluator, concurrency=CONCURRENCY)
    )
    response = await _service(stage, minilm).rerank(_adaptive_request())

    (report,) = response.reports
    assert report.detail["lambda_policy"] == "adaptive"
    assert report.detail["lambda"] in [lam for lam in lambdas if set(sweep[lam]) == set(sweep[0.0])]
    assert report.detail["plan"] == ["step one", "step two"]
    assert set(report.detail["lambda_scores"]) == {str(lam) for lam in lambdas}
    assert report.detail["distinct_sets"] == len({tuple(sorted(s)) for s in sweep.values()})
    chosen = GeometricMMR(report.detail["lambda"]).select(query_vector, vectors, 2)
    assert [p.chunk_id for p in response.ranking] == [f"d{i}#0" for i in chosen]
    assert np.all(np.isfinite([p.score for p in response.ranking]))
