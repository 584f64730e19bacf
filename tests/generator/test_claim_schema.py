"""The per-request response schema: claims whose evidence is an enum of this request's sentence ids."""

from __future__ import annotations

from rag_generator.claim_schema import MAX_EVIDENCE_PER_CLAIM, build_claim_schema
from rag_generator.evidence import build_evidence

from .conftest import PASSAGES


def claim_item(schema: dict) -> dict:
    return schema["schema"]["properties"]["claims"]["items"]


def test_evidence_is_an_enum_of_exactly_the_ids_shown_in_order() -> None:
    units = build_evidence(PASSAGES, max_passages=6, max_passage_chars=1200)
    schema = build_claim_schema([u.id for u in units], max_claims=3, claim_max_chars=300)
    evidence = claim_item(schema)["properties"]["evidence"]
    assert evidence["items"] == {"type": "string", "enum": ["1.1", "1.2", "1.3", "2.1", "2.2", "3.1", "3.2"]}


def test_repeated_ids_appear_once_and_any_iterable_is_accepted() -> None:
    schema = build_claim_schema(iter(["2.1", "1.1", "2.1", "1.1"]), max_claims=1, claim_max_chars=10)
    assert claim_item(schema)["properties"]["evidence"]["items"]["enum"] == ["2.1", "1.1"]


def test_bounds_come_from_the_settings() -> None:
    schema = build_claim_schema(["1.1"], max_claims=2, claim_max_chars=120)
    claims = schema["schema"]["properties"]["claims"]
    assert (claims["type"], claims["maxItems"]) == ("array", 2)
    assert claim_item(schema)["properties"]["text"] == {"type": "string", "maxLength": 120}
    evidence = claim_item(schema)["properties"]["evidence"]
    assert (evidence["minItems"], evidence["maxItems"]) == (1, MAX_EVIDENCE_PER_CLAIM) == (1, 3)
    other = build_claim_schema(["1.1"], max_claims=5, claim_max_chars=40)
    assert other["schema"]["properties"]["claims"]["maxItems"] == 5
    assert claim_item(other)["properties"]["text"]["maxLength"] == 40


def test_strict_closed_objects_with_text_before_evidence() -> None:
    schema = build_claim_schema(["1.1"], max_claims=3, claim_max_chars=300)
    assert (schema["name"], schema["strict"]) == ("grounded_claims", True)
    root = schema["schema"]
    assert (root["type"], root["required"], root["additionalProperties"]) == ("object", ["claims"], False)
    item = claim_item(schema)
    assert (item["required"], item["additionalProperties"]) == (["text", "evidence"], False)
    # The model writes the claim, then points at its sentences: property order is decoding order.
    assert list(item["properties"]) == ["text", "evidence"]


def test_no_minimum_on_claims_so_an_empty_list_can_abstain() -> None:
    claims = build_claim_schema(["1.1"], max_claims=3, claim_max_chars=300)["schema"]["properties"]["claims"]
    assert "minItems" not in claims or claims["minItems"] == 0
