"""What a sentence is doing in its page: stating something, asking, naming a section, or navigating.

Only a statement can be evidence for an answer. A question quoted from a FAQ ("What is the location
and date for the Super Bowl in 2022?"), a heading or title alone ("2018 Winter Olympics - Medal
Tracker."), or a call to action ("Check out the Winter Olympic medal count.") resembles the question
that retrieved it without answering it. The rule below names the role; the scorer and the
answerability gate take :func:`role_features` instead and fit their own weights on it.

The rule, in order (each line a check on :class:`RoleFeatures`):

1. a table row is a statement (data rows answer questions);
2. navigation: a navigation phrase, a breadcrumb or link list (two or more separators or line breaks
   between short items, no final period, few numbers), a link alone, or no word at all;
3. data is a statement: a labelled value ("Launch date: Oct. 13, 2023", "Common conditions:
   addiction, depression, anxiety"), or items cut into lines that hold numbers (an address, dates);
4. question: ends with a question mark (a question quoted inside a statement does not count), or
   opens with an interrogative and does not end as a statement ("How do I reset my password");
5. heading: a Markdown heading line, a repeat of the passage's title or section heading, a short
   label ending with a colon, or a short line without sentence punctuation nor a list's commas that
   reads as a title (its longer words capitalised, a how-to opener, or nearly no stop words), or a
   very short title-cased line without a single stop word even with a period ("Medal Tracker.");
6. anything else is a statement.

The thresholds were set by hand on a labelled fixture (``tests/generator/sentence_roles_fixture.tsv``)
and a look at MTRAG-UN web passages, and checked where they must not cost anything: no XQuAD sentence
that holds a gold answer is labelled other than a statement (measurements: issue 32's notes).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from rag_generator.evidence import EvidenceUnit
from rag_generator.sentence_roles.features import RoleFeatures, role_features

__all__ = ["SentenceRole", "role_of", "sentence_role", "unit_role", "unit_role_features"]

#: A line without sentence punctuation longer than this is a statement (a list item, a caption).
MAX_HEADING_WORDS = 12
#: With a period, only a line this short can still be a title.
MAX_PUNCTUATED_TITLE_WORDS = 8
MAX_LABEL_WORDS = 6
#: Title case: at least this share of the words of four letters or more after the first capitalised
#: (a German sentence capitalises its nouns, not its verbs and adjectives: "Die Anmeldung erfolgt online").
TITLE_CASE = 0.75
HALF = 0.5
#: A line with this many commas is a list of items, not a title.
LIST_COMMAS = 2
#: Link lists hold few numbers; an address or a table of dates cut into lines holds many.
LIST_DIGITS = 0.1
#: At most this share of stop words: no function words, so no sentence.
FEW_STOP_WORDS = 0.15
#: A breadcrumb or link list: two or more separators and items this short on average.
BREADCRUMB_ITEM_WORDS = 4


class SentenceRole(StrEnum):
    STATEMENT = "statement"
    QUESTION = "question"
    HEADING = "heading"
    NAVIGATION = "navigation"


def sentence_role(
    sentence: str, *, language: str | None, title: str | None = None, section_path: Sequence[str] = ()
) -> SentenceRole:
    """The role of ``sentence`` (see the module docstring); arguments as :func:`role_features`."""
    return role_of(role_features(sentence, language=language, title=title, section_path=section_path))


def unit_role_features(unit: EvidenceUnit, language: str | None = None) -> RoleFeatures:
    """An evidence unit's features, read in its passage's language, or ``language`` (the question's)
    when the passage does not say, with its passage's title and section path."""
    passage = unit.passage
    return role_features(
        unit.text, language=passage.language or language, title=passage.title, section_path=passage.section_path
    )


def unit_role(unit: EvidenceUnit, language: str | None = None) -> SentenceRole:
    """:func:`role_of` an evidence unit (arguments as :func:`unit_role_features`)."""
    return role_of(unit_role_features(unit, language))


def role_of(f: RoleFeatures) -> SentenceRole:
    """The rule of the module docstring, on already computed features."""
    if f.table_row:
        return SentenceRole.STATEMENT
    if (
        f.navigation
        or f.words == 0
        or (f.separators >= 2 and not f.ends_sentence and f.digit_share < LIST_DIGITS
            and f.words <= BREADCRUMB_ITEM_WORDS * (f.separators + 1))
        or f.link_only
    ):
        return SentenceRole.NAVIGATION
    if f.labelled_value or (f.separators >= 2 and f.digit_share >= LIST_DIGITS):
        return SentenceRole.STATEMENT
    if f.ends_question or (f.opens_question and not f.ends_sentence):
        return SentenceRole.QUESTION
    if f.markdown_heading or f.matches_heading or (f.ends_colon and f.words <= MAX_LABEL_WORDS):
        return SentenceRole.HEADING
    unpunctuated = not (f.ends_sentence or f.ends_colon or f.quoted_question) and f.commas < LIST_COMMAS
    titled = f.title_case >= TITLE_CASE or f.title_opener or f.stop_density <= FEW_STOP_WORDS
    if unpunctuated and f.words <= MAX_HEADING_WORDS and titled:
        return SentenceRole.HEADING
    if f.words <= MAX_PUNCTUATED_TITLE_WORDS and f.stop_density == 0 and f.capitalised >= HALF:
        return SentenceRole.HEADING
    return SentenceRole.STATEMENT
