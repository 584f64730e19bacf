"""The numbers a sentence's role is read from, for the role rule and for the scorer and gate to fit.

Every feature is cheap (a few regular expressions and set lookups per sentence) and works in every
supported language: the lists it reads are per language (:mod:`rag_generator.sentence_roles.lexicons`)
and the stop-word density uses jusText's stop lists (BSD-2; ``justext.get_stoplist``). Those lists
were built the same way for every language (the most frequent words of its Wikipedia), so a density
means the same thing in Romanian as in English, which the ``stop-words`` lists (268 Romanian words,
1,333 English ones) do not give. Low stop-word density is jusText's own mark of boilerplate: menus,
headings and link lists are runs of content words without the function words a sentence needs
(it has no finite verb, no article, no preposition).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from functools import cache, lru_cache

import justext

from rag_common.languages.text import fold_diacritics, normalise_text
from rag_generator.sentence_roles.lexicons import Lexicon, lexicon

__all__ = ["FEATURE_NAMES", "RoleFeatures", "role_features", "stop_words"]

#: jusText's stop list of each supported language (``justext.get_stoplists()`` names).
_JUSTEXT_NAMES = {
    "ar": "Arabic", "da": "Danish", "de": "German", "el": "Greek", "en": "English", "es": "Spanish",
    "fi": "Finnish", "fr": "French", "hu": "Hungarian", "it": "Italian", "nl": "Dutch",
    "no": "Norwegian_Bokmal", "pt": "Portuguese", "ro": "Romanian", "ru": "Russian", "sv": "Swedish",
    "tr": "Turkish",
}  # fmt: skip

_WORD = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*")
#: Markdown block marks before the text: heading hashes, bullets, a numbered item, a quote.
_LEAD = re.compile(r"^\s*(?:#{1,6}\s+|[-*+•·]\s+|\d{1,3}[.)]\s+|>\s*)*")
_HEADING_MARK = re.compile(r"^\s*#{1,6}\s")
#: The punctuation run that ends a sentence, after closing quotes and brackets.
_TAIL = re.compile(r"([.!?…;:？؟。]+)[\"'”’»)\]\s]*$")
#: Separators of breadcrumbs and link lists ("Home > News > Sport", "News | Sport | Weather"), and
#: line breaks: a block of one- or two-word lines ("Facebook\nTwitter\nLinkedIn") is a link list.
#: Not " / ": Wikipedia's pronunciations ("Wellington / ˈwɛlɪŋtən /") would read as breadcrumbs.
_SEPARATOR = re.compile(r"\s(?:>|»|›|\||·|•)\s|[ \t\xa0]*\n\s*")
#: Quotation marks, for telling a quote still open where the sentence ends ("He asked, “Why?”").
#: A single quote counts only at a word's edge with a space beside it (not "don't"): standalone
#: (" ' ", tokenised text such as ClapNQ's) it toggles, before a word it opens, after one it closes.
_QUOTE_MARK = re.compile(r"``|''|[“”„«»\"]|(?<!\S)'|'(?!\S)")
_CLOSING = "\"'”’»)] \t\n"
_LINK = re.compile(r"https?://|www\.|\b[\w.+-]+@[\w-]+\.\w")
_MARKDOWN_LINK = re.compile(r"!?\[[^\]]*\]\([^)]*\)|<?https?://\S+")
#: "Launch date: Oct. 13, 2023": a short label, a colon, then a value.
_LABEL = re.compile(r"^[^:\n]{1,40}:\s+(\S.*)$", re.DOTALL)
#: Title case is read on words of this many letters: English keeps "of", "the", "and" lowercase.
_TITLE_WORD_LETTERS = 4
#: Separators between a page title's parts ("Medal Tracker - 2018 Winter Olympics | NBC").
_TITLE_PARTS = re.compile(r"\s+[-–—|:]\s+|\s*\|\s*")
_HAS_DIGIT = re.compile(r"\d")
#: Commas that make a list of items.
_LIST_COMMAS = 2
_GREEK = re.compile(r"[\u0370-\u03ff\u1f00-\u1fff]")


@dataclass(frozen=True, slots=True)
class RoleFeatures:
    """What the role rule reads; every field a float so a fitted model can take them as they are."""

    #: Word count (letters and digits; "don't" is one word).
    words: float
    #: Ends with a question mark: ``?``, full-width ``？``, Arabic ``؟``, Greek ``;`` (in Greek text),
    #: unless the question is quoted inside a statement (``quoted_question``).
    ends_question: float
    #: Ends with a question quoted after the sentence's own words ("Negan says, “Is that any way ...?”").
    quoted_question: float
    #: Opens as a question: Spanish ``¿`` or an interrogative of the language ("Who", "Când", "Wie").
    opens_question: float
    #: Opens like a how-to title ("How to reset a password", "Cum să"), which is not a question.
    title_opener: float
    #: Ends with ``.``, ``!`` or ``…`` (closing quotes and brackets skipped).
    ends_sentence: float
    #: Ends with ``:`` (a label before a list or a table).
    ends_colon: float
    #: Share of words in the language's jusText stop list (diacritics folded on both sides).
    stop_density: float
    #: Share of words after the first that start with a capital (names, German nouns, title case).
    capitalised: float
    #: The same share over words of four letters or more: title case ("Spooky Season of the Skies")
    #: capitalises those and leaves the short function words lowercase.
    title_case: float
    #: Share of words that hold a digit.
    digit_share: float
    #: A Markdown heading line (``## Results``).
    markdown_heading: float
    #: The sentence is the passage's title, one of its parts, or a heading of its section path.
    matches_heading: float
    #: A navigation phrase of the language opens it, is all of it, or stands anywhere in it.
    navigation: float
    #: Breadcrumb or link-list separators (`` > ``, `` | ``, `` » ``, `` · ``) outside a table row.
    separators: float
    #: Holds a URL or an e-mail address.
    link: float
    #: Is a link and little else: fewer than two words outside Markdown links and URLs.
    link_only: float
    #: A short label, a colon and a value holding a digit or a list ("Launch date: Oct. 13, 2023",
    #: "Common conditions: addiction, depression, anxiety"): a fact.
    labelled_value: float
    #: Commas: a list of items ("teeth cleaning, fillings, dentures") is content, not a title.
    commas: float
    #: A Markdown table row (``| 2018 | Norway | 39 |``): data, never a heading.
    table_row: float

    def as_dict(self) -> dict[str, float]:
        return asdict(self)


FEATURE_NAMES: tuple[str, ...] = tuple(RoleFeatures.__dataclass_fields__)


@cache
def stop_words(code: str | None) -> frozenset[str]:
    """jusText's stop list of ``code`` (None: English), lowercased with diacritics folded; empty for a
    code jusText has no list for."""
    name = _JUSTEXT_NAMES.get(code or "en")
    if name is None:
        return frozenset()
    return frozenset(_fold(word) for word in justext.get_stoplist(name))


def role_features(
    sentence: str, *, language: str | None, title: str | None = None, section_path: Sequence[str] = ()
) -> RoleFeatures:
    """The features of ``sentence`` (one evidence unit, verbatim) read in ``language`` (ISO 639-1;
    None: English's lists, the project's rule for unknown text); ``title`` and ``section_path``: its
    passage's, so a line that only repeats them is recognised as a heading."""
    text = normalise_text(sentence).strip()
    table_row = text.startswith("|") and text.count("|") >= 2
    body = _LEAD.sub("", text, count=1)
    words = _WORD.findall(body)
    n = len(words)
    lex = lexicon(language)
    tail = _TAIL.search(body)
    ending = tail.group(1) if tail else ""
    greek = language == "el" or bool(_GREEK.search(body))
    question = "?" in ending or "？" in ending or "؟" in ending or (greek and ending.endswith(";"))
    quoted = question and _quoted(body)
    stops = stop_words(language)
    key = " ".join(_fold(body).split())  # folded once for every lookup: folding is the cost here
    folded = _WORD.findall(key)
    later = [word for word in words[1:] if word[0].isalpha()]
    long_later = [word for word in later if len(word) >= _TITLE_WORD_LETTERS]
    label = _LABEL.match(body)
    has_link = bool(_LINK.search(body)) or bool(_MARKDOWN_LINK.search(body))
    return RoleFeatures(
        words=float(n),
        ends_question=float(question and not quoted),
        quoted_question=float(quoted),
        opens_question=float(body.startswith("¿") or _opens_question(body, lex)),
        title_opener=float(_title_opener(body, lex)),
        ends_sentence=float(not question and any(mark in ending for mark in ".!…。")),
        ends_colon=float(ending.endswith(":")),
        stop_density=sum(word in stops for word in folded) / len(folded) if folded else 0.0,
        capitalised=_capitalised(later),
        title_case=_capitalised(long_later),
        digit_share=sum(_HAS_DIGIT.search(word) is not None for word in words) / n if n else 0.0,
        markdown_heading=float(bool(_HEADING_MARK.match(text))),
        matches_heading=float(_matches_heading(key, title, tuple(section_path))),
        navigation=float(_navigation(key, lex)),
        separators=0.0 if table_row else float(len(_SEPARATOR.findall(body))),
        link=float(has_link),
        link_only=float(has_link and len(_WORD.findall(_MARKDOWN_LINK.sub(" ", body))) < 2),
        labelled_value=float(label is not None and _is_value(label.group(1))),
        commas=float(body.count(",")),
        table_row=float(table_row),
    )


def _is_value(text: str) -> bool:
    return _HAS_DIGIT.search(text) is not None or text.count(",") >= _LIST_COMMAS


def _capitalised(words: Sequence[str]) -> float:
    return sum(word[0].isupper() for word in words) / len(words) if words else 0.0


def _fold(text: str) -> str:
    return text.lower() if text.isascii() else fold_diacritics(text).lower()


def _bare(key: str) -> str:
    """A folded key without its trailing sentence punctuation."""
    return key.rstrip(" .!?…:;")


def _quoted(body: str) -> bool:
    """Whether the sentence ends inside a quotation opened after its first two words, so the question
    is the quote's ("Negan says, `` Is that any way to treat our new guest ?"), not the sentence's
    ("What does “carpe diem” mean?": that quote closes before the end)."""
    core = body.rstrip(_CLOSING)
    opened: int | None = None
    german = False  # „ is closed by “
    for mark in _QUOTE_MARK.finditer(core):
        token = mark.group()
        if token in ("``", "„", "«") or (token == "“" and not (opened is not None and german)):
            opened, german = mark.start(), token == "„"
        elif token == '"' or (token == "'" and _standalone(core, mark.start())):
            opened, german = (mark.start() if opened is None else None), False
        elif token == "'" and (mark.start() == 0 or core[mark.start() - 1].isspace()):
            opened, german = mark.start(), False
        else:
            opened = None
    return opened is not None and len(_WORD.findall(core[:opened])) >= 2


def _standalone(text: str, at: int) -> bool:
    return (at == 0 or text[at - 1].isspace()) and (at + 1 == len(text) or text[at + 1].isspace())


def _title_opener(body: str, lex: Lexicon) -> bool:
    return lex.opens_title.match(body.lower()) is not None


def _opens_question(body: str, lex: Lexicon) -> bool:
    return not _title_opener(body, lex) and lex.opens_interrogative.match(body.lower()) is not None


def _navigation(key: str, lex: Lexicon) -> bool:
    bare = key.strip(" .!?…:;»›>|·•-–—→←()[]")
    return (
        bare in lex.whole
        or lex.opens_navigation.match(bare) is not None
        or lex.holds_navigation.search(key) is not None
    )


def _matches_heading(key: str, title: str | None, section_path: tuple[str, ...]) -> bool:
    """Whether the folded sentence ``key`` is the title, a part of it, or a section heading."""
    bare = _bare(key)
    return bool(bare) and bare in _heading_keys(title, section_path)


@lru_cache(maxsize=256)
def _heading_keys(title: str | None, section_path: tuple[str, ...]) -> frozenset[str]:
    """The passage's names, keyed; cached because every sentence of a passage asks with the same."""
    names = [*section_path]
    if title:
        names.append(title)
        names.extend(_TITLE_PARTS.split(title))
    return frozenset(_bare(" ".join(_fold(normalise_text(name)).split())) for name in names if name.strip())
