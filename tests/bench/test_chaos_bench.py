"""The counting rules of ``make chaos`` (bench/chaos.py): how a request's ending is classified, the
conversations users hold, and the audit of acknowledged turns against what Redis holds afterwards.
The benchmark itself kills processes for ten minutes and is not run here."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from chaos import audit_turns, classify, conversation_script  # noqa: E402


@pytest.mark.parametrize(
    "status, body, expected",
    [
        (200, {"degraded": []}, ("ok", None)),
        (200, {"degraded": ["reranker unavailable: ..."]}, ("degraded", None)),
        (503, {"error": "retriever unavailable", "stage": "retriever"}, ("stage_failed", "retriever")),
        (504, {"error": "generator timed out", "stage": "generator"}, ("stage_failed", "generator")),
        (None, {"error": "ConnectError"}, ("gateway_unreachable", None)),
        (500, {"error": "boom"}, ("other", None)),
        (503, {"error": "no stage named"}, ("other", None)),
        (429, {"error": "rate limit"}, ("other", None)),
    ],
)
def test_each_ending_of_a_request_is_classified(status, body, expected) -> None:
    assert classify(status, body) == expected


def test_a_conversation_is_question_follow_up_pairs_with_distinct_messages() -> None:
    script = conversation_script(user=3, conversation=2, turns=4)
    assert len(script) == 4 and len(set(script)) == 4
    assert conversation_script(3, 2, 4) == script, "deterministic"
    assert conversation_script(3, 3, 4) != script
    assert len(conversation_script(0, 0, 3)) == 3


def test_the_audit_counts_missing_duplicated_and_unacknowledged_turns() -> None:
    acknowledged = {"a": [("q1", "x"), ("q2", "y")], "b": [("q1", "z")], "c": [("q9", "w")]}
    stored = {
        "a": [("q1", "x"), ("q2", "y"), ("q2", "y")],  # q2 stored twice
        "b": [("q1", "z"), ("q3", "v")],  # q3 stored, never acknowledged (gateway killed before answering)
        "c": [],  # lost
    }
    assert audit_turns(acknowledged, stored) == {"acknowledged": 4, "missing": 1, "duplicated": 1, "unacknowledged_stored": 1}
