"""The languages this product analyses, and what each one needs from the libraries that do the work.

A language is supported when both search engines can stem it: tantivy's Snowball stemmers
(``tantivy.Filter.stemmer``) and OpenSearch's language analyzers. That intersection is the 17 below;
``RAG_LANGUAGES`` (``LanguageSettings.languages``) picks among them. Stop words come from one kept
package, ``stop-words`` (python-stop-words, BSD-3; docs/dependencies.md says why), for every use:
the embedded index's stop filter and the content words of the answerer and the claim check.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from stop_words import get_stop_words

__all__ = ["LANGUAGES", "Language", "UnsupportedLanguageError", "language", "languages"]


class UnsupportedLanguageError(ValueError):
    """A language code outside ``LANGUAGES`` (a setting or a request named one we cannot analyse)."""


@dataclass(frozen=True, slots=True)
class Language:
    """One supported language.

    ``code``: ISO 639-1, the code language identification returns and requests carry.
    ``name``: the English name, which is also tantivy's stemmer name and OpenSearch's analyzer,
    stemmer and stop-list name (``_romanian_``), except where ``opensearch`` says otherwise.
    ``negations``: words never treated as stop words by the content-word check, whatever the stop
    list says: dropping them would let a claim and its contradiction look identical.
    """

    code: str
    name: str
    negations: frozenset[str]
    stop_list_code: str = ""

    @property
    def stop_words(self) -> frozenset[str]:
        """The kept package's list for this language, NFC and lowercased as tantivy's ``lowercase`` filter
        does (not case-folded: that would turn ß into ss and final ς into σ, which no token matches); no
        negation removed. The Romanian list is written without diacritics, so comparisons fold both sides."""
        return _stop_words(self.stop_list_code or self.code)


@cache
def _stop_words(code: str) -> frozenset[str]:
    return frozenset(unicodedata.normalize("NFC", word).lower() for word in get_stop_words(code) if word.strip())


def _language(code: str, name: str, negations: str, stop_list_code: str = "") -> Language:
    return Language(code, name, frozenset(negations.split()), stop_list_code)


#: Every language both engines stem (tantivy's 18 stemmers minus Tamil, which OpenSearch lacks).
LANGUAGES: dict[str, Language] = {
    language.code: language
    for language in (
        _language("ar", "arabic", "لا لم لن ليس ليست بدون غير"),
        _language("da", "danish", "ikke aldrig uden ingen intet"),
        _language("de", "german", "nicht kein keine keinen keinem keiner keines nie niemals ohne weder"),
        _language("el", "greek", "δεν μη μην όχι ποτέ χωρίς ούτε"),
        _language("en", "english", "no not nor never without none cannot"),
        _language("es", "spanish", "no nunca sin ni jamás ninguno ninguna"),
        _language("fi", "finnish", "ei en et emme ette eivät ilman koskaan"),
        _language("fr", "french", "ne n pas non jamais sans ni aucun aucune"),
        _language("hu", "hungarian", "nem ne soha nélkül sem"),
        _language("it", "italian", "non mai senza né nessuno nessuna"),
        _language("nl", "dutch", "niet geen nooit zonder noch"),
        _language("no", "norwegian", "ikke aldri uten ingen", stop_list_code="nb"),
        _language("pt", "portuguese", "não nunca sem nem nenhum nenhuma"),
        _language("ro", "romanian", "nu nici niciodată niciodata fără fara niciun nicio"),
        _language("ru", "russian", "не нет ни никогда без"),
        _language("sv", "swedish", "inte ej aldrig utan ingen inget"),
        _language("tr", "turkish", "değil yok hiç asla hiçbir"),
    )
}


def language(code: str) -> Language:
    """The supported language ``code`` names; ``UnsupportedLanguageError`` otherwise."""
    try:
        return LANGUAGES[code]
    except KeyError:
        raise UnsupportedLanguageError(
            f"unsupported language {code!r}; supported: {', '.join(sorted(LANGUAGES))}"
        ) from None


def languages(codes: Iterable[str]) -> tuple[Language, ...]:
    """``codes`` as languages, in order, without repeats; ``UnsupportedLanguageError`` on an unknown one."""
    return tuple(language(code) for code in dict.fromkeys(codes))
