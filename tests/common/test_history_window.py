from __future__ import annotations

import pytest

from rag_common.schemas import HistoryTurn
from rag_common.history import HistoryWindow, cut_history, TURN_OVERHEAD_TOKENS, count_tokens, fit_history, turn_tokens


@pytest.mark.parametrize(
    "text, tokens",
    [
        ("", 0),
        ("hello world", 2),
        ("Hello, world!", 4),
        ("documentation", 2),
        ("internationalization", 3),
        ("12345678", 3),
        ("東京都", 3),
        ("café crème", 2),
    ],
)
def test_count_tokens(text: str, tokens: int) -> None:
    assert count_tokens(text) == tokens


def test_fit_history_keeps_the_most_recent_contiguous_turns() -> None:
    turns = [HistoryTurn(question=f"q{i}", answer="word " * n) for i, n in enumerate([5, 50, 5, 5])]
    costs = [turn_tokens(t) for t in turns]
    assert costs[0] == 1 + 1 + 5 + TURN_OVERHEAD_TOKENS  # "q" "0" + five words + overhead
    assert fit_history(turns, sum(costs)) == turns
    assert fit_history(turns, costs[2] + costs[3]) == turns[2:]
    # The long turn does not fit, so nothing before it is sent either (no gaps).
    assert fit_history(turns, sum(costs) - costs[1]) == turns[2:]
    assert fit_history(turns, costs[3] - 1) == []
    assert fit_history([], 100) == []


def test_the_window_keeps_the_recent_turns_cut_to_their_character_bounds() -> None:
    turns = [HistoryTurn(question=f"question {i} " + "q" * 50, answer="x" * 100) for i in range(5)]
    window = HistoryWindow(turns=2, token_budget=10_000, question_chars=12, answer_chars=20)
    cut = cut_history(turns, window)
    assert [t.question for t in cut] == ["question 3 q", "question 4 q"]
    assert all(len(t.answer) == 20 for t in cut)
    assert cut_history(turns, HistoryWindow(turns=0, token_budget=10_000, question_chars=12, answer_chars=20)) == []
