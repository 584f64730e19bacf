"""Sentences per language: abbreviations of the text's language do not end a sentence, and the
chunker and the generator cut a chunk the same way in every language."""

from __future__ import annotations

import re

import pytest

from rag_common.languages import LANGUAGES
from rag_common.languages.abbreviations import abbreviations
from rag_common.schemas import Passage
from rag_common.sentences import sentence_spans
from rag_generator.evidence import build_evidence
from rag_retriever.chunking import Chunker
from rag_retriever.records import SourceDocument

ROMANIAN = (
    "Conform art. 5 alin. (2) lit. b) din Legea nr. 1/2011, prof. univ. dr. Ion Popescu ș.a. au semnat. "
    "Următoarea propoziție."
)


def units(text: str, language: str | None = None) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text, language)]


def test_romanian_regulation_abbreviations_do_not_end_the_sentence() -> None:
    assert units(ROMANIAN, "ro") == [ROMANIAN[: ROMANIAN.index(" Următoarea")], "Următoarea propoziție."]
    # Cedilla ş (older keyboards) and no diacritics at all are the same abbreviation.
    assert len(units(ROMANIAN.replace("ș", "ş"), "ro")) == 2
    assert len(units(ROMANIAN.replace("ș.a.", "s.a."), "ro")) == 2
    # Without the language, Romanian "art." and "alin." are unknown: the text is cut there.
    assert len(units(ROMANIAN)) > 2


def test_a_final_abbreviation_ends_a_sentence_only_before_a_capitalised_word() -> None:
    text = "Au venit studenți, profesori etc. și părinți. Au plecat etc. Apoi a plouat. Vezi cap. II din lege."
    assert units(text, "ro") == [
        "Au venit studenți, profesori etc. și părinți.",
        "Au plecat etc.",
        "Apoi a plouat.",
        "Vezi cap. II din lege.",
    ]


def test_an_ordinary_word_is_not_an_abbreviation_because_its_plain_form_is_one() -> None:
    # "sec" (dry) is not listed, "măr" is not "mar"; both end their sentence.
    assert units("Am băut vin sec. Apoi am mâncat un măr. Gata.", "ro") == [
        "Am băut vin sec.",
        "Apoi am mâncat un măr.",
        "Gata.",
    ]


def test_german_abbreviations_and_ordinal_dates_are_not_cut() -> None:
    text = (
        "Das gilt z. B. für Äpfel, z.B. rote. Am 1. Januar trat es in Kraft, im 19. Jahrhundert begann es. "
        "Siehe S. 5 bzw. Abs. 2. Dr. Müller kam."
    )
    assert units(text, "de") == [
        "Das gilt z. B. für Äpfel, z.B. rote.",
        "Am 1. Januar trat es in Kraft, im 19. Jahrhundert begann es.",
        "Siehe S. 5 bzw. Abs. 2.",
        "Dr. Müller kam.",
    ]
    # A year before a capitalised word still ends its sentence.
    assert units("Es begann 1987. Dann endete es.", "de") == ["Es begann 1987.", "Dann endete es."]


def test_english_rules_are_the_default() -> None:
    text = (
        "Books by J. R. R. Tolkien sold, e.g. in the U.S. The rest etc. and more. "
        "Mr. Smith paid 3.5 million vs. Jones. See Fig. 2. It rained."
    )
    expected = [
        "Books by J. R. R. Tolkien sold, e.g. in the U.S.",
        "The rest etc. and more.",
        "Mr. Smith paid 3.5 million vs. Jones.",
        "See Fig. 2.",
        "It rained.",
    ]
    assert units(text) == units(text, "en") == expected
    # A lowercase letter is no initial: before a capital it ends the sentence, else not.
    assert units("It holds for every integer n. It is implied by Y. p. orientalis data.") == [
        "It holds for every integer n.",
        "It is implied by Y. p. orientalis data.",
    ]
    # A number before a lowercase word continues the sentence in every language.
    assert units("Step 1. then step 2. Done.", "ro") == ["Step 1. then step 2.", "Done."]


def test_other_languages_know_their_own_abbreviations() -> None:
    assert units("Il est venu, cf. p. 5. M. Dupont l'a dit.", "fr") == ["Il est venu, cf. p. 5.", "M. Dupont l'a dit."]
    assert units("La Sra. García llegó. Luego se fue.", "es") == ["La Sra. García llegó.", "Luego se fue."]
    assert units("Это было, т.е. давно. Потом ушли.", "ru") == ["Это было, т.е. давно.", "Потом ушли."]
    # A language without a list (Arabic) and an unknown code keep the rules for every language.
    assert units("Dr. Smith came. J. R. left.", "ar") == ["Dr.", "Smith came.", "J. R. left."]
    assert units("Dr. Smith came.", "xx") == ["Dr.", "Smith came."]


def test_every_supported_language_has_its_list_and_parses() -> None:
    for code in LANGUAGES:
        lists = abbreviations(code)
        assert (len(lists.any_case) + len(lists.exact_case) > 0) == (code != "ar"), code
    assert abbreviations(None) is abbreviations("en")
    assert abbreviations("en").kind("No") == "final" and abbreviations("en").kind("no") is None


def test_a_long_word_before_a_period_is_bounded_and_still_a_boundary() -> None:
    blob = "x" * 10_000
    assert units(f"See {blob}. Then go.") == [f"See {blob}.", "Then go."]


class WordTokenizer:
    """One token per whitespace-separated word: enough for the chunker's budgets."""

    max_tokens = 512

    def count(self, text: str) -> int:
        return len(text.split())

    def offsets(self, text: str) -> list[tuple[int, int]]:
        return [match.span() for match in re.finditer(r"\S+", text)]


TEXTS = {
    "ro": " ".join(
        [ROMANIAN, "Vezi art. 7 alin. (1) și cap. II din Regulament.", "Dl. Ionescu, conf. dr. ing., a aprobat."] * 4
    ),
    "de": " ".join(
        ["Das gilt z. B. für Äpfel. Am 1. Januar 2020 trat es in Kraft.", "Siehe S. 5 bzw. Abs. 2 usw. Dr. Müller kam."] * 4
    ),
    "en": " ".join(["Mr. Smith met Dr. Jones, e.g. at No. 5. The U.S. team won.", "See Fig. 2 etc. for details. It rained."] * 4),
    "fr": " ".join(["M. Dupont est venu, cf. p. 5. Le chap. III suit.", "Mme. Martin l'a dit. Fin du texte."] * 4),
}


@pytest.mark.parametrize("code", sorted(TEXTS))
def test_the_chunker_and_the_generator_cut_a_chunk_the_same_way(code: str) -> None:
    text = TEXTS[code]
    document = SourceDocument(doc_id=f"doc-{code}", text=text, language=code)
    records = Chunker(WordTokenizer(), chunk_tokens=40, chunk_overlap_tokens=10).chunk_document(document)
    sentences = units(text, code)
    assert len(records) > 1 and all(record.language == code for record in records)
    for record in records:
        passage = Passage(chunk_id=record.chunk_id, doc_id=record.doc_id, text=record.text, language=record.language)
        evidence = build_evidence([passage], max_passages=1, max_passage_chars=10_000)
        # Each unit the generator cites is one whole sentence of the document as the chunker cut it.
        assert [unit.text for unit in evidence] and all(unit.text in sentences for unit in evidence)
        assert " ".join(unit.text for unit in evidence) == record.text
        # Had the generator ignored the chunk's language, it would have cut it elsewhere.
        if code != "en":
            assert units(record.text, None) != [unit.text for unit in evidence]
