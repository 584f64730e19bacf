from __future__ import annotations

import pytest

from rag_generator.evidence import (
    EvidenceUnit,
    build_evidence,
    evidence_index,
    is_table_separator,
    render_evidence,
    units_by_source,
)

from .conftest import passage

PROSE = passage(
    1,
    "  Conversations are stored in Redis. Each turn is a JSON object!\n\nTurns expire after 30 days.  ",
    title="Storage",
    section_path=["Design", "State"],
)
TABLE = passage(
    2,
    "## Limits\n\n| Setting | Default |\n|---|:---:|\n| top_k | 5 (max. 50) |\n| timeout | 30 s |",
    title="Settings",
    page=4,
)


def test_offsets_index_the_passage_text_exactly() -> None:
    units = build_evidence([PROSE, TABLE], max_passages=5, max_passage_chars=10_000)
    assert units, "no units"
    for unit in units:
        assert unit.passage.text[unit.start : unit.end] == unit.text
        assert unit.text == unit.text.strip()
    assert [u.text for u in units if u.source == 1] == [
        "Conversations are stored in Redis.",
        "Each turn is a JSON object!",
        "Turns expire after 30 days.",
    ]


def test_ids_number_sources_and_kept_units_from_one() -> None:
    units = build_evidence([PROSE, TABLE], max_passages=5, max_passage_chars=10_000)
    assert [u.id for u in units] == ["1.1", "1.2", "1.3", "2.1", "2.2", "2.3", "2.4"]
    assert all(u.id == f"{u.source}.{u.index}" for u in units)
    assert evidence_index(units)["2.3"].text == "| top_k | 5 (max. 50) |"


def test_table_rows_are_units_and_separator_rows_are_skipped() -> None:
    texts = [u.text for u in build_evidence([TABLE], max_passages=1, max_passage_chars=10_000)]
    assert texts == ["## Limits", "| Setting | Default |", "| top_k | 5 (max. 50) |", "| timeout | 30 s |"]
    assert is_table_separator("| --- | :---: |") and is_table_separator("|---|---|") and is_table_separator("---|---")
    assert not is_table_separator("| a | - |") and not is_table_separator("-")


def test_tiny_fragments_are_skipped() -> None:
    units = build_evidence([passage(1, "- \n. \nOK.\n* x\n\nReal sentence here.")], max_passages=1, max_passage_chars=999)
    assert [u.text for u in units] == ["OK.", "Real sentence here."]


def test_max_passages_and_units_per_passage() -> None:
    units = build_evidence([PROSE, TABLE], max_passages=1, max_passage_chars=10_000, max_units_per_passage=2)
    assert [u.id for u in units] == ["1.1", "1.2"]


def test_char_budget_keeps_whole_units_only() -> None:
    # Budget counted from the first non-blank character: "Conversations are stored in Redis." is 34.
    units = build_evidence([PROSE], max_passages=1, max_passage_chars=50)
    assert [u.text for u in units] == ["Conversations are stored in Redis."]


def test_a_first_unit_longer_than_the_budget_is_cut_at_a_word_boundary() -> None:
    long = passage(1, "Alpha beta gamma delta epsilon zeta eta theta.")
    (unit,) = build_evidence([long], max_passages=1, max_passage_chars=20)
    assert unit.text == "Alpha beta gamma"
    assert long.text[unit.start : unit.end] == unit.text


def test_invalid_limits_are_rejected() -> None:
    with pytest.raises(ValueError):
        build_evidence([PROSE], max_passages=0, max_passage_chars=10)


def test_units_are_hashable_and_compare_by_content() -> None:
    a = build_evidence([PROSE], max_passages=1, max_passage_chars=999)
    b = build_evidence([PROSE.model_copy()], max_passages=1, max_passage_chars=999)
    assert a == b and len({*a, *b}) == len(a)
    assert isinstance(a[0], EvidenceUnit)


def test_render_groups_units_under_their_source_header() -> None:
    units = build_evidence([PROSE, TABLE], max_passages=5, max_passage_chars=10_000)
    assert render_evidence(units) == (
        "[1] Storage — Design > State\n"
        "[1.1] Conversations are stored in Redis.\n"
        "[1.2] Each turn is a JSON object!\n"
        "[1.3] Turns expire after 30 days.\n"
        "\n"
        "[2] Settings — page 4\n"
        "[2.1] ## Limits\n"
        "[2.2] | Setting | Default |\n"
        "[2.3] | top_k | 5 (max. 50) |\n"
        "[2.4] | timeout | 30 s |"
    )
    assert sorted(units_by_source(units)) == [1, 2]
