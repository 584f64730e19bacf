"""ClaimReply: the check of the model's reply that does not depend on the endpoint's grammar."""

from __future__ import annotations

import json

import pytest

from rag_generator.claim_reply import (
    HARD_MAX_CLAIM_CHARS,
    HARD_MAX_CLAIMS,
    ClaimReply,
    InvalidModelOutput,
    ReplyLimits,
)

LIMITS = ReplyLimits(max_claims=2, claim_max_chars=60, sentence_ids=frozenset({"1.1", "1.2", "2.1"}))


def reply(*claims: dict) -> dict:
    return {"claims": list(claims)}


def claim(text: str = "Ingrid Halvorsen founded it.", evidence: list[str] | None = None) -> dict:
    return {"text": text, "evidence": ["1.2"] if evidence is None else evidence}


def test_a_valid_object_and_the_same_json_text_are_accepted() -> None:
    body = reply(claim(), claim("It is in Tromsø.", ["1.1", "2.1"]))
    for output in (body, json.dumps(body)):
        parsed = ClaimReply.from_model_output(output, LIMITS)
        assert [(c.text, c.evidence) for c in parsed.claims] == [
            ("Ingrid Halvorsen founded it.", ["1.2"]),
            ("It is in Tromsø.", ["1.1", "2.1"]),
        ]


def test_an_empty_claims_list_is_valid() -> None:
    assert ClaimReply.from_model_output('{"claims": []}', LIMITS).claims == []


def test_unknown_sentence_ids_are_rejected_and_named() -> None:
    with pytest.raises(InvalidModelOutput) as raised:
        ClaimReply.from_model_output(reply(claim(evidence=["1.2", "3.7", "9"])), LIMITS)
    assert "not shown" in str(raised.value) and "3.7, 9" in str(raised.value)


def test_more_claims_than_the_request_allows_are_rejected() -> None:
    with pytest.raises(InvalidModelOutput, match="3 claims, limit 2"):
        ClaimReply.from_model_output(reply(claim(), claim(), claim()), LIMITS)


def test_more_claims_than_the_hard_ceiling_are_rejected_even_without_limits() -> None:
    many = reply(*[claim() for _ in range(HARD_MAX_CLAIMS + 1)])
    with pytest.raises(InvalidModelOutput, match="claims"):
        ClaimReply.from_model_output(many, None)  # type: ignore[arg-type]
    assert len(ClaimReply.model_validate(reply(*[claim() for _ in range(HARD_MAX_CLAIMS)])).claims) == HARD_MAX_CLAIMS


def test_a_claim_longer_than_the_request_allows_is_rejected() -> None:
    at_limit = "x" * LIMITS.claim_max_chars
    assert ClaimReply.from_model_output(reply(claim(at_limit)), LIMITS).claims[0].text == at_limit
    with pytest.raises(InvalidModelOutput, match="claim 2 has 61 chars, limit 60"):
        ClaimReply.from_model_output(reply(claim(), claim(at_limit + "y")), LIMITS)


def test_a_claim_longer_than_the_hard_ceiling_is_rejected_without_limits() -> None:
    with pytest.raises(InvalidModelOutput, match="claims.0.text"):
        ClaimReply.from_model_output(reply(claim("x" * (HARD_MAX_CLAIM_CHARS + 1))), None)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("evidence", "location"),
    [([], "claims.0.evidence"), (["1.1", "1.2", "2.1", "1.1"], "claims.0.evidence")],
)
def test_a_claim_cites_one_to_three_sentences(evidence: list[str], location: str) -> None:
    with pytest.raises(InvalidModelOutput, match=location):
        ClaimReply.from_model_output(reply(claim(evidence=evidence)), LIMITS)


@pytest.mark.parametrize(
    ("output", "message"),
    [
        (None, "no parsed output"),
        ('{"claims": [', "not JSON"),
        ("Ingrid Halvorsen founded it [1.2]", "not JSON"),
        ("[]", "expected a JSON object, got list"),
        ('"claims"', "expected a JSON object, got str"),
        ({"claims": [], "confidence": 0.9}, "confidence"),
        ({"claims": [{"text": "x", "evidence": ["1.1"], "quote": "y"}]}, "claims.0.quote"),
        ({"answer": "x"}, "claims"),
        ({"claims": [{"evidence": ["1.1"]}]}, "claims.0.text"),
        ({"claims": [{"text": "x", "evidence": "1.1"}]}, "claims.0.evidence"),
    ],
)
def test_anything_else_is_invalid_output_with_a_reason(output: object, message: str) -> None:
    with pytest.raises(InvalidModelOutput, match=message):
        ClaimReply.from_model_output(output, LIMITS)  # type: ignore[arg-type]


def test_invalid_model_output_is_a_value_error() -> None:
    assert issubclass(InvalidModelOutput, ValueError)
