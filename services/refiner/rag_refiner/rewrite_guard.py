"""Decide whether a model's standalone rewrite may replace the user's message.

A small model rewrites well most of the time but sometimes drops the user's words, answers the
question instead of restating it, or invents a constraint ("in 2020", "for Windows"). The retriever
would then search for something the user never asked, so the rewrite is only accepted when it
provably stays close to what was said: the user's content words survive, every new content word
comes from the conversation, and a message that leans on context actually gets that context.

Words are compared without diacritics (a rewrite may add or drop them) and, for a message of a known
non-English language, with that language's stop words and by their first letters (``PREFIX_CHARS``):
the crude English suffix strip knows no other language's endings.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cache

from rag_common.languages import fold_diacritics
from rag_common.languages import language as spoken_language
from rag_common.schemas import HistoryTurn

#: Share of the message's distinct content words the rewrite must keep.
MIN_KEPT_RATIO = 0.6
#: A message this short (in words) is assumed to lean on the conversation ("And in 2019?").
SHORT_MESSAGE_WORDS = 6

#: Words that only make sense with an antecedent; their presence means the message needs context.
CONTEXT_WORDS = frozenset(
    "it its itself they them their theirs themselves that this those these "
    "he him his she her hers there".split()
)

# Function words, question words and fillers: rewording them changes nothing a retriever cares
# about, so they are ignored by every check. Contraction fragments ("don", "t", "s") are here
# because the tokenizer splits on apostrophes.
STOPWORDS = CONTEXT_WORDS | frozenset(
    """
    a an the and or but nor so yet if then than else also too either neither both
    of in on at to for from by with without within into onto over under about above below
    between among through during before after since until upon via per against across along
    around behind beyond near off out up down
    is are was were be been being am do does did done doing have has had having
    can could will would shall should may might must
    i me my mine myself we us our ours you your yours he him she her
    what which who whom whose when where why how whether
    not no yes ok okay please thanks thank just only even still again ever
    some any all each every such same other another own more most much many few lot lots
    very really quite rather there here now
    tell know let like want need get got give say said
    s t d m ll re ve don doesn didn isn aren wasn weren won wouldn couldn shouldn
    """.split()
)

#: Per language, beyond the English ones (every lexicon keeps those: users mix in English), written
#: without diacritics. Romanian's possessives "său" and "sa" are left out: folded, they are also the
#: ubiquitous "sau" (or) and "să".
OTHER_CONTEXT_WORDS: dict[str, frozenset[str]] = {
    "ro": frozenset(
        "el ea ei ele lui lor acesta aceasta acestea acestia asta astea aia alea ala acela aceea acelea aceia "
        "acolo sai sale".split()
    ),
}

#: Non-English words compare by this many leading letters, which conflates a word's inflections
#: ("păstrate"/"păstrează", "conversațiile"/"conversații") in the supported European languages;
#: it only merges words, so it can make a rewrite pass that shares a prefix with a history word.
PREFIX_CHARS = 5

_BE_FORMS = frozenset("is are was were be been will s".split())

# Letters and digits of any script; the text is case-folded and its diacritics folded first.
_TOKEN = re.compile(r"[^\W_]+(?:[.\-][^\W_]+)*")


@dataclass(frozen=True)
class GuardVerdict:
    accepted: bool
    #: Which check failed: ``empty``, ``too_long``, ``dropped_user_words``, ``invented_words``
    #: or ``no_added_context``; empty when accepted.
    failed_check: str = ""
    detail: str = ""


def check_rewrite(
    rewrite: str,
    message: str,
    history: Sequence[HistoryTurn],
    *,
    max_query_chars: int,
    min_kept_ratio: float = MIN_KEPT_RATIO,
    language: str | None = None,
) -> GuardVerdict:
    """Accept ``rewrite`` of ``message`` only if it is faithful to the message and ``history``.

    ``history`` must be exactly what the model was shown (windowed, answers cut), so that a word
    the model could only have copied from a hidden part is still counted as invented.
    ``language``: the message's code when known (its stop words and word comparison); None: English.
    """
    text = rewrite.strip()
    if not text:
        return GuardVerdict(False, "empty", "the model returned an empty rewrite")
    if len(text) > max_query_chars:
        return GuardVerdict(False, "too_long", f"rewrite has {len(text)} chars, limit {max_query_chars}")

    message_words = content_words(message, language)
    rewrite_words = content_words(text, language)
    history_words = content_words((part for turn in history for part in (turn.question, turn.answer)), language)

    if message_words:
        kept = message_words & rewrite_words
        if len(kept) < min_kept_ratio * len(message_words):
            dropped = ", ".join(sorted(message_words - rewrite_words))
            return GuardVerdict(
                False,
                "dropped_user_words",
                f"rewrite kept {len(kept)}/{len(message_words)} of the user's content words; dropped: {dropped}",
            )

    invented = rewrite_words - message_words - history_words
    if invented:
        return GuardVerdict(
            False, "invented_words", f"rewrite adds words found in neither message nor history: {', '.join(sorted(invented))}"
        )

    if needs_context(message, language) and not (rewrite_words & history_words) - message_words:
        return GuardVerdict(
            False, "no_added_context", "message depends on the conversation but the rewrite adds nothing from it"
        )
    return GuardVerdict(True)


def needs_context(message: str, language: str | None = None) -> bool:
    """Whether the message leans on earlier turns: it refers back, or it is too short to stand alone."""
    if len(message.split()) <= SHORT_MESSAGE_WORDS:
        return True
    tokens = _tokens(message)
    context_words = _lexicon(language).context_words
    return any(token in context_words and not _is_existential_there(tokens, i) for i, token in enumerate(tokens))


def _is_existential_there(tokens: list[str], index: int) -> bool:
    # "Is there a fee?" / "there are limits" point at nothing earlier, unlike "how do I get there?".
    if tokens[index] != "there":
        return False
    neighbours = tokens[max(index - 1, 0) : index] + tokens[index + 1 : index + 2]
    return any(word in _BE_FORMS for word in neighbours)


def content_words(texts: str | Iterable[str], language: str | None = None) -> set[str]:
    """Distinct normalised non-stopword tokens of one text or several, in ``language`` (None: English).

    A hyphenated token whose parts are all stop words is one too (Romanian "s-a", "într-o").
    """
    if isinstance(texts, str):
        texts = (texts,)
    lexicon = _lexicon(language)
    stops = lexicon.stopwords
    return {
        lexicon.stem(token)
        for text in texts
        for token in _tokens(text)
        if token not in stops and not all(part in stops for part in token.split("-"))
    }


@dataclass(frozen=True)
class _Lexicon:
    stopwords: frozenset[str]
    context_words: frozenset[str]
    stem: Callable[[str], str]


@cache
def _lexicon(language: str | None) -> _Lexicon:
    if language is None or language == "en":
        return _Lexicon(STOPWORDS, CONTEXT_WORDS, stem)
    spoken = spoken_language(language)
    context = CONTEXT_WORDS | OTHER_CONTEXT_WORDS.get(language, frozenset())
    # Negations stay content words: dropping "nu" must count as dropping a word.
    own = {fold_diacritics(word) for word in spoken.stop_words} - {fold_diacritics(word) for word in spoken.negations}
    return _Lexicon(STOPWORDS | context | frozenset(own), context, _prefix)


def _prefix(token: str) -> str:
    # Numbers and codes compare whole: "2019" and "2018" differ in their last digit.
    return token if any(ch.isdigit() for ch in token) else token[:PREFIX_CHARS]


def stem(token: str) -> str:
    """A crude suffix strip, so "founded"/"founding" and "printers"/"printer" compare equal.

    Applied identically to both sides of every comparison, so its only failure mode is a missed
    match, which makes the guard stricter, never looser.
    """
    if token.endswith("ies") and len(token) > 4:
        return token[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if token.endswith(suffix) and not token.endswith("ss") and len(token) - len(suffix) >= 3:
            token = token[: -len(suffix)]
            break
    if token.endswith("e") and len(token) > 3:
        token = token[:-1]
    # "programming" -> "programm" must meet "programing"/"program".
    if len(token) > 3 and token[-1] == token[-2] and token[-1] not in "aeiouls":
        token = token[:-1]
    return token


def _tokens(text: str) -> list[str]:
    return _TOKEN.findall(fold_diacritics(text.casefold().replace("’", "'")))
