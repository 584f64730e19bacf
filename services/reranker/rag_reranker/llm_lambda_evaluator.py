"""The adaptive-λ planner and evaluator as two small structured-output LLM calls (DF-RAG).

Uses the generator's OpenAI-compatible endpoint (``LLM_*`` settings). Both replies are decoded
against a JSON schema with bounded lengths, so a small model cannot ramble past ``max_tokens``.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseChatModel

PLAN_MAX_STEPS = 4
STEP_MAX_CHARS = 160
PASSAGE_MAX_CHARS = 600

PLANNER_PROMPT = (
    "You plan how to answer a question from documents. List the information steps a complete answer "
    "needs (1 to {max_steps} short steps, one fact to find per step). Reply in JSON."
)
EVALUATOR_PROMPT = (
    "You judge whether retrieved passages are enough to answer a question. For each step of the plan, "
    "give a score from 0 (the passages say nothing about it) to 5 (the passages fully answer it). "
    "Reply in JSON with one score per step, in the plan's order."
)


def plan_schema() -> dict[str, Any]:
    return {
        "name": "answer_plan",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "steps": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": PLAN_MAX_STEPS,
                    "items": {"type": "string", "maxLength": STEP_MAX_CHARS},
                }
            },
            "required": ["steps"],
            "additionalProperties": False,
        },
    }


def scores_schema(steps: int) -> dict[str, Any]:
    return {
        "name": "step_scores",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "scores": {
                    "type": "array",
                    "minItems": steps,
                    "maxItems": steps,
                    "items": {"type": "integer", "minimum": 0, "maximum": 5},
                }
            },
            "required": ["scores"],
            "additionalProperties": False,
        },
    }


class LLMLambdaEvaluator:
    def __init__(self, chat_model: BaseChatModel) -> None:
        self._chat_model = chat_model

    async def plan(self, query: str) -> list[str]:
        reply = await self._ask(
            plan_schema(), PLANNER_PROMPT.format(max_steps=PLAN_MAX_STEPS), f"Question: {query}"
        )
        steps = reply.get("steps")
        if not isinstance(steps, list) or not all(isinstance(s, str) for s in steps):
            raise ValueError("planner reply has no list of steps")
        return [s.strip()[:STEP_MAX_CHARS] for s in steps if s.strip()][:PLAN_MAX_STEPS]

    async def score(self, query: str, plan: list[str], passages: list[str]) -> list[int]:
        numbered_plan = "\n".join(f"{i}. {step}" for i, step in enumerate(plan, 1))
        sources = "\n\n".join(f"[{i}] {text[:PASSAGE_MAX_CHARS]}" for i, text in enumerate(passages, 1))
        reply = await self._ask(
            scores_schema(len(plan)),
            EVALUATOR_PROMPT,
            f"Question: {query}\n\nPlan:\n{numbered_plan}\n\nPassages:\n{sources}",
        )
        scores = reply.get("scores")
        if not isinstance(scores, list) or len(scores) != len(plan) or not all(isinstance(s, int) for s in scores):
            raise ValueError(f"evaluator reply is not {len(plan)} integer scores: {scores!r}"[:200])
        return [min(max(s, 0), 5) for s in scores]

    async def _ask(self, schema: dict[str, Any], system: str, user: str) -> dict[str, Any]:
        structured = self._chat_model.with_structured_output(schema, method="json_schema")
        reply = await structured.ainvoke([("system", system), ("human", user)])
        if not isinstance(reply, dict):
            raise ValueError(f"LLM reply is not a JSON object: {type(reply).__name__}")
        return reply
