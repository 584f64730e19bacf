"""The service's own texts (abstention, canned replies, fallback notes, errors a user reads), per language.

One catalog for every service: ``message(key, language)`` is ``key``'s text in ``language``, or the
English text when that language does not ship the key (or is None). Each shipped language is one data
module (``en.py``, the reference with every key; ``ro.py``); a new language is a new module added to
``SHIPPED``. Which language a text is wanted in is :class:`LanguagePolicy`'s rule: the question's,
else its conversation's, else ``RAG_DEFAULT_LANGUAGE``.

Machine-facing codes (``abstain_reason``, ``degraded`` entries, log lines) are not here: they stay English.
"""

from __future__ import annotations

from collections.abc import Mapping

from rag_common.messages import en, ro
from rag_common.messages.language_policy import LanguagePolicy

__all__ = ["FALLBACK_LANGUAGE", "SHIPPED", "LanguagePolicy", "message"]

#: The language whose texts are complete: every other one falls back to it, key by key.
FALLBACK_LANGUAGE = "en"
#: Language code → its texts (``key`` → text).
SHIPPED: Mapping[str, Mapping[str, str]] = {"en": en.MESSAGES, "ro": ro.MESSAGES}


def message(key: str, language: str | None, **fields: object) -> str:
    """``key``'s text in ``language`` (English when it has none), its ``{placeholders}`` filled from
    ``fields``. A key English lacks is a KeyError: a text nobody wrote."""
    reference = SHIPPED[FALLBACK_LANGUAGE][key]
    text = SHIPPED.get(language or FALLBACK_LANGUAGE, {}).get(key, reference)
    return text.format(**fields) if fields else text
