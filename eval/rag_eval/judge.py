"""LLM-as-judge scores of generated answers, with a negative control. Any OpenAI-compatible endpoint
(``rag_common.settings.LLMSettings`` → ``rag_common.llm.build_chat_model``); every score in [0, 1]:

- **context relevance**: each context chunk rated 0–2 against the question with *two* differently
  worded prompts, averaged (÷ 2), then averaged over the chunks;
- **faithfulness**: the answer's claims are listed by the judge, then each claim is checked against
  the contexts: supported claims / claims (None when the answer makes no claim);
- **answer relevance**: the answer rated 0–2 against the question (÷ 2).

**Negative control.** Each judged item is also scored with its question paired to *another* item's
contexts and answer (a seeded derangement: off-topic pairs). A judge whose control scores come close
to its real scores is not measuring anything; both are reported side by side.

**Repeats.** With ``repeats`` = N every item is judged N times; the report gives the mean and the
spread (standard deviation over the N repeat means). At temperature 0 the repeats of a deterministic
endpoint agree and the spread is 0.

A reply the judge cannot parse (no digit 0–2, no yes/no) counts as missing, not as 0; the number of
such replies is reported.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

CONTEXT_PROMPTS = (
    "Rate how relevant the PASSAGE is to the QUESTION. Reply with one digit only: "
    "0 = not relevant, 1 = partly relevant, 2 = relevant.",
    "Does the PASSAGE contain information that helps answer the QUESTION? Reply with one digit only: "
    "0 = no, 1 = some, 2 = yes, clearly.",
)
CLAIMS_PROMPT = (
    "List the factual claims the ANSWER makes, one short claim per line, without numbering. "
    "If it makes no factual claim, reply NONE."
)
SUPPORT_PROMPT = "Is the CLAIM supported by the CONTEXT? Reply with one word: yes or no."
ANSWER_PROMPT = (
    "Rate how well the ANSWER addresses the QUESTION. Reply with one digit only: "
    "0 = not at all, 1 = partly, 2 = fully."
)
METRICS = ("context_relevance", "faithfulness", "answer_relevance")

_DIGIT = re.compile(r"\b([0-2])\b")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)


def parse_score(text: str) -> int | None:
    """The first standalone digit 0–2 of a reply, or None."""
    match = _DIGIT.search(text or "")
    return int(match.group(1)) if match else None


def parse_yes_no(text: str) -> bool | None:
    match = _YES_NO.search(text or "")
    return None if match is None else match.group(1).lower() == "yes"


def parse_claims(text: str, limit: int = 8) -> list[str]:
    lines = [re.sub(r"^\s*(?:[-*•]|\d+[.)])\s*", "", line).strip() for line in (text or "").splitlines()]
    claims = [line for line in lines if line and line.upper().strip(".") != "NONE"]
    return claims[:limit]


@dataclass(frozen=True, slots=True)
class JudgeItem:
    query_id: str
    question: str
    contexts: tuple[str, ...]
    answer: str | None = None


class LLMJudge:
    def __init__(self, chat_model: Any, *, concurrency: int = 2, max_context_chars: int = 1200) -> None:
        self._model = chat_model
        self._limit = asyncio.Semaphore(concurrency)
        self._max_chars = max_context_chars
        self.calls = 0
        self.unparsed = 0

    async def _ask(self, instruction: str, body: str) -> str:
        from langchain_core.messages import HumanMessage, SystemMessage

        async with self._limit:
            self.calls += 1
            reply = await self._model.ainvoke([SystemMessage(content=instruction), HumanMessage(content=body)])
        content = getattr(reply, "content", reply)
        return content if isinstance(content, str) else str(content)

    def _note(self, value: Any) -> Any:
        if value is None:
            self.unparsed += 1
        return value

    async def context_relevance(self, question: str, contexts: Sequence[str]) -> float | None:
        async def chunk_score(text: str) -> float | None:
            body = f"QUESTION: {question}\n\nPASSAGE: {text[: self._max_chars]}"
            scores = [self._note(parse_score(await self._ask(prompt, body))) for prompt in CONTEXT_PROMPTS]
            known = [s for s in scores if s is not None]
            return sum(known) / len(known) / 2.0 if known else None

        per_chunk = [s for s in await asyncio.gather(*(chunk_score(c) for c in contexts)) if s is not None]
        return float(np.mean(per_chunk)) if per_chunk else None

    async def faithfulness(self, answer: str, contexts: Sequence[str]) -> float | None:
        claims = parse_claims(await self._ask(CLAIMS_PROMPT, f"ANSWER: {answer}"))
        if not claims:
            return None
        context = "\n\n".join(text[: self._max_chars] for text in contexts)
        verdicts = await asyncio.gather(
            *(self._ask(SUPPORT_PROMPT, f"CONTEXT:\n{context}\n\nCLAIM: {claim}") for claim in claims)
        )
        known = [v for v in (self._note(parse_yes_no(text)) for text in verdicts) if v is not None]
        return sum(known) / len(known) if known else None

    async def answer_relevance(self, question: str, answer: str) -> float | None:
        score = self._note(parse_score(await self._ask(ANSWER_PROMPT, f"QUESTION: {question}\n\nANSWER: {answer}")))
        return None if score is None else score / 2.0

    async def judge(self, item: JudgeItem) -> dict[str, float | None]:
        scores: dict[str, float | None] = {"context_relevance": await self.context_relevance(item.question, item.contexts)}
        if item.answer:
            scores["faithfulness"] = await self.faithfulness(item.answer, item.contexts)
            scores["answer_relevance"] = await self.answer_relevance(item.question, item.answer)
        return scores


def derangement(n: int, seed: int = 0) -> list[int]:
    """A seeded permutation with no fixed point (n >= 2): item i is paired with item p[i] != i."""
    if n < 2:
        raise ValueError("a negative control needs at least two items")
    rng = np.random.default_rng(seed)
    shift = int(rng.integers(1, n))
    order = rng.permutation(n)
    # i → the element ``shift`` places after it in a random cycle order: never itself.
    position = {int(item): index for index, item in enumerate(order)}
    return [int(order[(position[i] + shift) % n]) for i in range(n)]


def off_topic(items: Sequence[JudgeItem], seed: int = 0) -> list[JudgeItem]:
    """Each question with another item's contexts and answer."""
    pairing = derangement(len(items), seed)
    return [
        JudgeItem(item.query_id, item.question, items[j].contexts, items[j].answer)
        for item, j in zip(items, pairing)
    ]


def _aggregate(repeat_scores: list[list[dict[str, float | None]]]) -> dict[str, dict[str, float | int | None]]:
    out: dict[str, dict[str, float | int | None]] = {}
    for metric in METRICS:
        means = []
        n = 0
        for scores in repeat_scores:
            values = [s[metric] for s in scores if s.get(metric) is not None]
            n = max(n, len(values))
            if values:
                means.append(float(np.mean(values)))
        out[metric] = {
            "mean": round(float(np.mean(means)), 4) if means else None,
            "spread": round(float(np.std(means)), 4) if means else None,
            "n": n,
        }
    return out


async def judge_items(
    judge: LLMJudge, items: Sequence[JudgeItem], *, repeats: int = 1, seed: int = 0, control: bool = True
) -> dict[str, Any]:
    """Real and (with ``control``) off-topic scores: ``{metric: {mean, spread, n}}`` each."""
    if repeats < 1:
        raise ValueError(f"repeats must be positive, got {repeats}")
    real: list[list[dict[str, float | None]]] = []
    fake: list[list[dict[str, float | None]]] = []
    controls = off_topic(items, seed) if control and len(items) >= 2 else []
    for _ in range(repeats):
        real.append([await judge.judge(item) for item in items])
        if controls:
            fake.append([await judge.judge(item) for item in controls])
    result: dict[str, Any] = {"items": len(items), "repeats": repeats, "real": _aggregate(real)}
    if controls:
        result["control"] = _aggregate(fake)
    result["llm_calls"] = judge.calls
    result["unparsed_replies"] = judge.unparsed
    return result
