"""Cut the conversation history sent to the refiner and generator to a token budget.

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
