"""Entities of a chunk and of a query, for the structure-and-entity graph: a documented CPU
heuristic, no model and no download.

A chunk's entities are

- its document's **title**, without a trailing disambiguation in parentheses ("Kiss and Tell (1945
  film)" → "kiss and tell"), kept apart as the *title* entity (the graph links it to the document);
- each **heading** of its ``section_path``;
- **capitalised spans** of its text: runs of words that start with a capital letter, joined across at
  most one lower-case connector ("of", "the", "and", "de", …) when a capitalised word follows
  ("Bank of America", "Lester Smith"), at most ``MAX_SPAN_WORDS`` words. A span made only of common
  sentence-initial words ("The", "However", "In") is dropped; so are numbers.

Every name is normalised by :func:`normalise` (casefold, accents and punctuation folded to spaces, a
leading "the" dropped), so "The Beatles" in one passage and "the Beatles'" in another meet. The
heuristic over-generates (a capitalised sentence start such as "Born" is a span); the graph leaves
out entities that occur in more than ``RETRIEVER_GRAPH_ENTITY_MAX_CHUNKS`` chunks, which removes
those hubs. A query's entities are its own capitalised spans plus every 2–4-word n-gram of it that is
a known entity (so "first for women" matches the title "First for Women").

``EXTRACTOR_VERSION`` is stored with the graph: changing the rules here means bumping it, and an
index built with another version rebuilds its graph from the stored chunks when opened.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable

EXTRACTOR_VERSION = 2
MAX_SPAN_WORDS = 6
#: Lower-case words that may sit inside a name between capitalised words.
CONNECTORS = frozenset({"of", "the", "and", "de", "da", "del", "der", "di", "du", "la", "le", "van", "von", "y", "for", "on", "in", "&"})
#: Capitalised words that alone are not a name (sentence starts, pronouns, months' neighbours).
_COMMON = frozenset(
    """a an the this that these those it its he she his her they their them we our you your i my
    in on at by for from with of and or but if as to into after before during since until while when
    where which who whom whose what why how there here then also however although though because
    so such not no yes all any both each few more most other some many much one two three first
    second last new old is was are were be been has had have do does did may might can could
    would should will shall born died according between under over about above below after
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday""".split()
)
_WORD = re.compile(r"[^\W_][\w'’.&-]*", re.UNICODE)
_TRAILING_PARENS = re.compile(r"\s*\([^()]*\)\s*$")
_NON_WORD = re.compile(r"[^\w]+", re.UNICODE)


def normalise(name: str) -> str:
    """The comparable form of a name: casefolded, accents removed, punctuation to single spaces, a
    leading "the" dropped. ``""`` when nothing is left."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).casefold()
    text = _NON_WORD.sub(" ", text.replace("'s ", " ").replace("’s ", " ")).strip()
    if text.endswith(" s") and ("'s" in name.casefold() or "’s" in name.casefold()):
        text = text[:-2]
    if text.startswith("the "):
        text = text[4:]
    return text


def title_entity(title: str) -> str:
    """A document title as an entity: its trailing "(…)" disambiguation dropped, normalised."""
    return normalise(_TRAILING_PARENS.sub("", title))


def _capitalised(word: str) -> bool:
    return word[:1].isupper()


def capitalised_spans(text: str) -> list[str]:
    """The capitalised spans of ``text`` (see the module docstring), normalised, in order, repeated
    spans once."""
    matches = list(_WORD.finditer(text))
    words = [match.group(0).rstrip(".'’-") for match in matches]
    spans: list[str] = []
    current: list[str] = []

    def close() -> None:
        while current and current[-1].casefold() in CONNECTORS:
            current.pop()
        if current and not all(word.casefold() in _COMMON for word in current):
            name = normalise(" ".join(current))
            if name and not name.replace(" ", "").isdigit():
                spans.append(name)
        current.clear()

    previous_end = 0
    for index, (match, word) in enumerate(zip(matches, words)):
        if text[previous_end : match.start()].strip():
            close()  # punctuation between two words ends a name: "Dragon Dice) and Tim Brown"
        previous_end = match.end()
        if not word:
            close()
            continue
        if _capitalised(word) and not word.isdigit():
            if len(current) >= MAX_SPAN_WORDS:
                close()
            current.append(word)
        elif (
            current
            and word.casefold() in CONNECTORS
            and current[-1].casefold() not in CONNECTORS
            and index + 1 < len(words)
            and _capitalised(words[index + 1])
            and not text[match.end() : matches[index + 1].start()].strip()
        ):
            current.append(word)
        else:
            close()
        if match.group(0).endswith("."):
            close()  # a sentence (or abbreviation) ends here
    close()
    return list(dict.fromkeys(spans))


def chunk_entities(title: str, section_path: Iterable[str], text: str) -> tuple[str, list[str]]:
    """``(title entity, other entities)`` of a chunk: the title entity (``""`` without a title), and
    its headings and capitalised spans, each once and never the title entity itself."""
    title_name = title_entity(title) if title else ""
    names = [normalise(heading) for heading in section_path] + capitalised_spans(text)
    return title_name, [name for name in dict.fromkeys(names) if name and name != title_name]


def query_entities(query: str, known: Callable[[str], bool], max_ngram: int = 4) -> list[str]:
    """The query's entities: its capitalised spans, and its 2…``max_ngram``-word n-grams for which
    ``known(name)`` (an entity of the index), each once, longer n-grams first."""
    names = capitalised_spans(query) + [gram for gram in query_ngrams(query, max_ngram) if known(gram)]
    return list(dict.fromkeys(names))


def query_ngrams(query: str, max_ngram: int = 4) -> list[str]:
    """The normalised query's 2…``max_ngram``-word n-grams, longer first, each once: what
    ``query_entities`` looks up (the OpenSearch backend asks for all of them in one request)."""
    tokens = normalise(query).split()
    grams = [
        " ".join(tokens[start : start + size])
        for size in range(min(max_ngram, len(tokens)), 1, -1)
        for start in range(len(tokens) - size + 1)
    ]
    return list(dict.fromkeys(grams))
