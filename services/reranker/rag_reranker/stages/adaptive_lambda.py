"""Query-adaptive λ for gMMR (DF-RAG): let an evaluator judge which λ's selection serves the query.

For each λ in the sweep, gMMR picks a candidate set. A planner turns the query into the steps an
answer needs; an evaluator scores each distinct set 0–5 per step; the λ whose set scores best wins.
Several λ often pick the same set, so each distinct set is judged once, and the judgements run
concurrently (bounded). Ties go to the median λ of the tied ones: it is the least extreme choice
among equally good ones.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Protocol


class LambdaEvaluator(Protocol):
    async def plan(self, query: str) -> list[str]:
        """The steps (sub-questions) a complete answer to ``query`` needs; at least one."""

    async def score(self, query: str, plan: list[str], passages: list[str]) -> list[int]:
        """0–5 per plan step: how well ``passages`` let one carry out that step."""


@dataclass
class LambdaChoice:
    lambda_: float
    #: Mean step score (0–5) of the set each λ selected.
    scores: dict[float, float]
    plan: list[str]
    distinct_sets: int
    tied: list[float] = field(default_factory=list)


def median_lambda(lambdas: list[float]) -> float:
    ordered = sorted(lambdas)
    return ordered[(len(ordered) - 1) // 2]


class AdaptiveLambdaSelector:
    def __init__(self, evaluator: LambdaEvaluator, *, concurrency: int) -> None:
        """``concurrency``: the settings' ``evaluator_concurrency``, the one source of its default."""
        if concurrency < 1:
            raise ValueError(f"concurrency must be positive, got {concurrency}")
        self._evaluator = evaluator
        self._concurrency = concurrency

    async def choose(self, query: str, selections: dict[float, list[int]], texts: list[str]) -> LambdaChoice:
        """``selections``: λ → candidate indices gMMR chose with it; ``texts``: all candidates' texts."""
        if not selections:
            raise ValueError("no λ to choose from")
        plan = [step for step in await self._evaluator.plan(query) if step.strip()] or [query]
        distinct: dict[tuple[int, ...], list[float]] = {}
        for lam, indices in selections.items():
            distinct.setdefault(tuple(sorted(indices)), []).append(lam)

        limit = asyncio.Semaphore(self._concurrency)

        async def judge(indices: tuple[int, ...]) -> float:
            async with limit:
                step_scores = await self._evaluator.score(query, plan, [texts[i] for i in indices])
            if not step_scores:
                raise ValueError("the evaluator returned no step scores")
            return sum(min(max(s, 0), 5) for s in step_scores) / len(step_scores)

        set_scores = await asyncio.gather(*(judge(indices) for indices in distinct))
        scores = {lam: score for lambdas, score in zip(distinct.values(), set_scores) for lam in lambdas}
        best = max(scores.values())
        tied = sorted(lam for lam, score in scores.items() if score == best)
        return LambdaChoice(
            lambda_=median_lambda(tied),
            scores=dict(sorted(scores.items())),
            plan=plan,
            distinct_sets=len(distinct),
            tied=tied,
        )
