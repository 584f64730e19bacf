"""The sentence that tells the model which language to write in, shared by the refiner's prompts."""

from __future__ import annotations

from rag_common.languages import language


def write_in(code: str | None, what: str) -> str:
    """``" Write <what> in Romanian."`` for a known language code (the registry's English name), else ``""``.

    Unknown language: no instruction, so the prompt is the one measured before languages existed
    and a small model copies the user's words, in whatever language they are.
    """
    if code is None:
        return ""
    return f" Write {what} in {language(code).name.capitalize()}."
