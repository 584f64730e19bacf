from __future__ import annotations

import pytest

from rag_generator.claim_support import (
    DEFAULT_LEXICAL_WEIGHT,
    DEFAULT_SUPPORT_THRESHOLD,
    Claim,
    ClaimSupport,
)
from rag_generator.evidence import build_evidence
from rag_generator.settings import GeneratorSettings

from .conftest import CountingEmbedder, passage

PHOTOSYNTHESIS = (
    "Photosynthesis lets green plants convert light energy into chemical energy. Chlorophyll in the "
    "chloroplasts absorbs light, and the plant builds glucose from carbon dioxide and water, releasing oxygen."
)
STORAGE = (
    "Each conversation is stored in Redis under the key rag:conversation:{id} as a list of Turn JSON "
    "documents. Old conversations expire after 30 days."
)


@pytest.fixture
def support(counting_embedder: CountingEmbedder) -> ClaimSupport:
    return ClaimSupport.of(GeneratorSettings(), counting_embedder)


HALLUCINATION = "The sky is green because of chlorophyll."
PARAPHRASE = "Plants use chlorophyll to absorb light and make glucose from water and CO2, giving off oxygen."


def test_a_hallucinated_claim_is_unsupported_by_the_sentence_it_cites(support: ClaimSupport) -> None:
    units = build_evidence([passage(1, PHOTOSYNTHESIS)], max_passages=1, max_passage_chars=2000)
    chlorophyll = [u for u in units if u.id == "1.2"]
    result = support.score(HALLUCINATION, chlorophyll)
    assert not result.supported, result


def test_a_paraphrase_of_its_evidence_is_supported(support: ClaimSupport) -> None:
    units = build_evidence([passage(1, PHOTOSYNTHESIS)], max_passages=1, max_passage_chars=2000)
    result = support.score(PARAPHRASE, [u for u in units if u.id == "1.2"])
    assert result.supported, result
    assert result.cosine > 0.7 and result.lexical > 0.5


def test_a_hallucination_citing_the_whole_passage_still_scores_well_below_a_paraphrase(support: ClaimSupport) -> None:
    # The known blind spot: citing both sentences, "green" and "chlorophyll" are both in the
    # evidence, so the hallucination sits at the threshold. Its score must stay far below a real one.
    units = build_evidence([passage(1, PHOTOSYNTHESIS)], max_passages=1, max_passage_chars=2000)
    hallucination, paraphrase = support.score(HALLUCINATION, units), support.score(PARAPHRASE, units)
    assert paraphrase.supported
    assert paraphrase.score - hallucination.score > 0.15
    assert paraphrase.cosine - hallucination.cosine > 0.25


def test_the_same_claim_against_unrelated_evidence_is_unsupported(support: ClaimSupport) -> None:
    claim = "Conversations are kept in Redis as a list of Turn JSON objects."
    assert support.score(claim, [STORAGE]).supported
    assert not support.score(claim, [PHOTOSYNTHESIS]).supported
    assert not support.score("Conversations are kept in PostgreSQL tables.", [STORAGE]).supported


def test_empty_claims_and_claims_citing_nothing_are_unsupported(support: ClaimSupport, counting_embedder: CountingEmbedder) -> None:
    results = support.score_claims([Claim("", [STORAGE]), Claim(" ... ", [STORAGE]), Claim("Redis stores turns.", []), Claim("Redis stores turns.", ["  "])])
    assert [r.supported for r in results] == [False, False, False, False]
    assert all(r.score == 0.0 for r in results)
    assert counting_embedder.calls == []  # nothing worth embedding


def test_one_answer_costs_one_encode_call_for_claims_and_one_for_sentences(
    support: ClaimSupport, counting_embedder: CountingEmbedder
) -> None:
    units = build_evidence([passage(1, STORAGE), passage(2, PHOTOSYNTHESIS)], max_passages=2, max_passage_chars=2000)
    claims = [
        Claim("Conversations live in Redis under rag:conversation:{id}.", units[:1]),
        Claim("They expire after 30 days.", units[:2]),  # unit 1.1 cited twice: embedded once
        Claim("Plants release oxygen.", units[3:]),
        Claim("", units),
    ]
    results = support.score_claims(claims)
    assert len(results) == 4
    assert [kind for kind, _ in counting_embedder.calls] == ["queries", "documents"]
    assert len(counting_embedder.calls[0][1]) == 3
    assert sorted(counting_embedder.calls[1][1]) == sorted({u.text for u in units[:2] + units[3:]})
    assert [r.supported for r in results] == [True, True, True, False]


def test_score_combines_the_parts_with_the_configured_weight(counting_embedder: CountingEmbedder) -> None:
    lexical_only = ClaimSupport(counting_embedder, lexical_weight=1.0, threshold=0.99)
    result = lexical_only.score("Old conversations expire.", [STORAGE])
    assert result.lexical == 1.0 and result.score == 1.0 and result.supported
    cosine_only = ClaimSupport(counting_embedder, lexical_weight=0.0, threshold=0.0)
    result = cosine_only.score("Old conversations expire.", [STORAGE])
    assert result.score == pytest.approx(max(result.cosine, 0.0))


def test_parameters_are_validated(counting_embedder: CountingEmbedder) -> None:
    assert 0.0 <= DEFAULT_LEXICAL_WEIGHT <= 1.0 and 0.0 <= DEFAULT_SUPPORT_THRESHOLD <= 1.0
    with pytest.raises(ValueError):
        ClaimSupport(counting_embedder, lexical_weight=1.5, threshold=GeneratorSettings().support_threshold)
    with pytest.raises(ValueError):
        ClaimSupport(counting_embedder, lexical_weight=GeneratorSettings().support_lexical_weight, threshold=-0.1)
