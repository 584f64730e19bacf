"""The conversation history the LLM stages see, cut in one place.

The gateway cuts it once (``cut_history`` with the window of its settings) and the refiner and
generator show the model exactly what they receive; the eval harness cuts dataset conversations
with the same function and window, so an evaluation sees what the service would.

The token budget is counted by an approximation, not tiktoken.

Why an approximation and not tiktoken: ``tiktoken.get_encoding("cl100k_base")`` downloads its BPE
file at run time unless it is already cached, and the gateway must start with no network. Nor is
cl100k the tokenizer of the LLM actually serving (llama.cpp with whatever GGUF is configured), so
an exact cl100k count would be exact for the wrong model anyway. The count here is a regex
word-piece estimate tuned to err high, so the budget is a safe upper bound:

* a run of Latin letters is one token per started 8 characters (BPE keeps common English words
  whole and splits long rare ones: ``documentation`` → 2, ``internationalization`` → 3);
* digits count in groups of up to three (as cl100k splits numbers);
* every other non-space character (punctuation, CJK, other scripts, emoji) is one token;
* each turn adds a fixed overhead for the labels the services wrap around it.
"""

from __future__ import annotations

import re

from collections.abc import Sequence
from dataclasses import dataclass

from rag_common.schemas import HistoryTurn

_LATIN = "A-Za-z\u00c0-\u024f"
_PIECE = re.compile(rf"(?P<word>[{_LATIN}]+)|\d{{1,3}}|[^\s{_LATIN}\d]")
#: "Q: ... A: ..." style labels and separators the refiner and generator put around a turn.
TURN_OVERHEAD_TOKENS = 8
_CHARS_PER_WORD_PIECE = 8


def count_tokens(text: str) -> int:
    total = 0
    for match in _PIECE.finditer(text):
        word = match.group("word")
        total += 1 + (len(word) - 1) // _CHARS_PER_WORD_PIECE if word else 1
    return total


def turn_tokens(turn: HistoryTurn) -> int:
    return count_tokens(turn.question) + count_tokens(turn.answer) + TURN_OVERHEAD_TOKENS


def fit_history(turns: list[HistoryTurn], budget: int) -> list[HistoryTurn]:
    """The most recent turns (oldest first) whose tokens add up to at most ``budget``.

    Turns are taken newest first and the cut is at the first that does not fit, so the history
    stays contiguous: a gap in the middle would confuse the rewrite of a follow-up.
    """
    kept: list[HistoryTurn] = []
    used = 0
    for turn in reversed(turns):
        cost = turn_tokens(turn)
        if used + cost > budget:
            break
        kept.append(turn)
        used += cost
    kept.reverse()
    return kept


@dataclass(frozen=True)
class HistoryWindow:
    """How much of the conversation the LLM stages see (the gateway's ``GATEWAY_HISTORY_*`` settings)."""

    #: Most recent turns considered.
    turns: int
    #: Upper bound on their estimated tokens (question + answer + labels).
    token_budget: int
    #: Each past question is cut to this many characters (questions are standalone queries; this only
    #: guards against an oversized one).
    question_chars: int
    #: Each past answer is cut to this many characters: small models lose the question in long context.
    answer_chars: int


def cut_history(turns: Sequence[HistoryTurn], window: HistoryWindow) -> list[HistoryTurn]:
    """The last ``window.turns`` turns, each cut to its character bounds, then fit to the token budget."""
    if window.turns <= 0:
        return []
    recent = [
        HistoryTurn(question=turn.question[: window.question_chars], answer=turn.answer[: window.answer_chars])
        for turn in turns[-window.turns :]
    ]
    return fit_history(recent, window.token_budget)


def append_context(message: str, history: Sequence[HistoryTurn]) -> str:
    """The deterministic standalone form of a follow-up: the message, then the previous question.

    The refiner uses it when its model's rewrite is unusable or refused, and the gateway when the
    refiner itself is down (docs/ARCHITECTURE.md, "Failure policy"); in the refiner benchmark it
    matched the model's rewrite on retrieval (docs/refiner.md). The last question is already
    standalone, so it carries the subject the message leaves out; the user's own words stay first
    because lexical retrieval weighs them most. Without history the message is its own query.
    """
    if not history:
        return message
    return f"{message} ({history[-1].question})"
