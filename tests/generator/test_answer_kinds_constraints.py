"""answer_kinds.question_constraints / contradicts: a sentence about another year or edition."""

from __future__ import annotations

import pytest

from rag_generator.answer_kinds import AnswerKind, Edition, contradicts, question_constraints, value_spans


def contradiction(question: str, sentence: str, language: str) -> bool:
    return contradicts(value_spans(sentence, language), question_constraints(question, language))


def test_constraints_of_a_question() -> None:
    constraints = question_constraints("Who won the women's singles Wimbledon in 2019?", "en")
    assert constraints.years == {2019}
    assert Edition("wimbledon", AnswerKind.DATE, "2019") in constraints.editions
    assert question_constraints("Cine a câștigat Super Bowl LV?", "ro").editions == (
        Edition("super bowl", AnswerKind.NUMBER, "55"),
    )
    assert question_constraints("Who governed between 2010 and 2015?", "en").year_ranges == ((2010, 2015),)
    assert question_constraints("Cine a condus între 2010 și 2015?", "ro").year_ranges == ((2010, 2015),)
    assert question_constraints("What happened in the 1990s?", "en").year_ranges == ((1990, 1999),)
    assert question_constraints("Ce s-a întâmplat pe 1 ianuarie 2019?", "ro").dates == {"2019-01-01"}
    assert not question_constraints("Who acquired WhatsApp?", "en")


def test_attributive_years_and_inequalities_are_not_constraints() -> None:
    # multi-hop questions describe another entity with its year; "before 2000" is no equality
    assert not question_constraints("Which actress starred in a 2001 crime comedy film?", "en").years
    assert not question_constraints("Who won the title before 2000?", "en").years


@pytest.mark.parametrize(
    ("question", "sentence", "language", "expected"),
    [
        # the examples
        ("Super Bowl 2021 location", "What is the location and date for the Super Bowl in 2022?", "en", True),
        ("Super Bowl 2021 location", "Super Bowl 2021 was played in Tampa, Florida.", "en", False),
        ("Which country won the most medals at the 2018 Winter Olympics?",
         "Norway won the most medals at the 2022 Winter Olympics.", "en", True),
        ("Which country won the most medals at the 2018 Winter Olympics?",
         "Norway topped the table at the 2018 Winter Olympics with 39 medals.", "en", False),
        ("Who won the women's singles Wimbledon in 2019?", "In 2022, Elena Rybakina won the title.", "en", True),
        ("Who won the women's singles Wimbledon in 2019?",
         "Simona Halep won Wimbledon in 2019, beating Serena Williams.", "en", False),
        # a far year is another fact about the right event
        ("Who won the women's singles Wimbledon in 2019?", "Halep, born in 1991, won the title.", "en", False),
        # no year in the sentence: nothing to contradict
        ("Who won the women's singles Wimbledon in 2019?", "Simona Halep won the title.", "en", False),
        # editions by numeral and by ordinal
        ("Cine a câștigat Super Bowl LV?", "Super Bowl LVI a fost câștigat de Los Angeles Rams.", "ro", True),
        ("Cine a câștigat Super Bowl LV?", "Super Bowl LV a fost câștigat de Tampa Bay Buccaneers.", "ro", False),
        ("Wer gewann den 55. Super Bowl?", "Den 56. Super Bowl gewannen die Rams.", "de", True),
        ("Wer gewann den 55. Super Bowl?", "Der 55. Super Bowl ging an Tampa Bay.", "de", False),
        # a year of another sort than the asked edition's cannot be compared
        ("Who won Super Bowl LV?", "Super Bowl LV was held in Tampa Bay.", "en", False),
        # ranges
        ("¿Quién gobernó entre 2010 y 2015?", "Gobernó en 2012.", "es", False),
        ("¿Quién gobernó entre 2010 y 2015?", "Gobernó en 2017.", "es", True),
        ("Qui a gagné la Coupe du monde en 2018 ?", "La France a gagné la Coupe du monde en 2018.", "fr", False),
        ("Qui a gagné la Coupe du monde en 2018 ?", "L'Argentine a gagné la Coupe du monde en 2022.", "fr", True),
        # a count before a noun is not an edition ("5 Sacks")
        ("Wer erzielte fünf Sacks in neun Spielen?", "Kony Ealy erzielte 5 Sacks in nur 9 Starts.", "de", False),
    ],
)
def test_contradicts(question: str, sentence: str, language: str, expected: bool) -> None:
    assert contradiction(question, sentence, language) is expected


def test_no_constraints_never_contradict() -> None:
    assert not contradiction("Who acquired WhatsApp?", "In 2014 Facebook acquired WhatsApp.", "en")
