"""``EMBEDDER_LANGUAGES``: the languages the embedding model was trained for, declared once."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from rag_common.settings import EmbedderSettings


def test_the_default_model_is_declared_english_only() -> None:
    settings = EmbedderSettings()
    assert settings.languages == ["en"]
    assert settings.covers("en")
    assert not settings.covers("ro")
    assert not settings.covers(None)  # a language that cannot be told is not known to be covered


def test_every_language_and_a_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EMBEDDER_LANGUAGES", '["*"]')
    assert EmbedderSettings().covers("ro") and EmbedderSettings().covers(None)
    listed = EmbedderSettings(languages=["ro", "en"])
    assert listed.covers("ro") and not listed.covers("de")


@pytest.mark.parametrize("codes", [["english"], [], ["EN"], ["r0"]])
def test_codes_must_be_iso_639_1(codes: list[str]) -> None:
    with pytest.raises(ValidationError, match="EMBEDDER_LANGUAGES wants ISO 639-1 codes"):
        EmbedderSettings(languages=codes)
