"""answer_kinds.value_spans / value_kind: typed values in real sentences of five languages."""

from __future__ import annotations

import pytest

from rag_generator.answer_kinds import AnswerKind, ValueSpan, value_kind, value_spans

K = AnswerKind


def values(sentence: str, language: str | None) -> list[tuple[str, str, str]]:
    return [(span.kind.value, span.text, span.normalised) for span in value_spans(sentence, language)]


def test_offsets_are_the_sentences() -> None:
    sentence = "Facebook a cumpărat WhatsApp pe 19 februarie 2014 pentru 19 miliarde de dolari."
    for span in value_spans(sentence, "ro"):
        assert isinstance(span, ValueSpan)
        assert sentence[span.start:span.end] == span.text


def test_english_news_sentence() -> None:
    found = values("Super Bowl LV was held in Tampa Bay, Florida, on February 7, 2021, before 24,835 fans.", "en")
    assert ("number", "LV", "55") in found
    assert ("place", "Tampa Bay", "tampa bay") in found
    assert ("place", "Florida", "florida") in found
    assert ("date", "February 7, 2021", "2021-02-07") in found
    assert ("number", "24,835", "24835") in found
    assert ("person", "Super Bowl", "super bowl") in found  # a name the rules cannot place


def test_romanian_law_text_references_are_not_values() -> None:
    found = values("Conform art. 5 alin. (2) din Legea nr. 1/2011, taxa este de 1.500,50 lei.", "ro")
    assert ("number", "1.500,50 lei", "1500.5 RON") in found
    assert not [value for value in found if value[2] in {"5", "2", "1", "2011"}]


def test_romanian_organisation_person_and_date() -> None:
    found = values("Universitatea din București a fost fondată de Alexandru Ioan Cuza în 1864.", "ro")
    assert found == [
        ("organisation", "Universitatea din București", "universitatea din bucuresti"),
        ("person", "Alexandru Ioan Cuza", "alexandru ioan cuza"),
        ("date", "1864", "1864"),
    ]


def test_romanian_number_words_and_percent() -> None:
    found = values("Au participat două milioane de oameni, adică 12 la sută din populație.", "ro")
    assert ("number", "două milioane", "2000000") in found
    assert ("number", "12 la sută", "12%") in found


def test_german_date_with_ordinal_day_and_common_nouns() -> None:
    found = values("Die Regierung in Berlin hat die Siemens AG am 1. Januar 2019 beauftragt.", "de")
    assert found == [
        ("place", "Berlin", "berlin"),
        ("organisation", "Siemens AG", "siemens ag"),
        ("date", "1. Januar 2019", "2019-01-01"),
    ]  # "Regierung" is a noun, not a name


def test_german_period_ordinals_are_short_a_year_before_a_period_stays_a_year() -> None:
    found = values("Es geschah im Jahr 2019. Danach kam der 55. Super Bowl.", "de")
    assert ("date", "2019", "2019") in found
    assert ("number", "55.", "55") in found


def test_german_decimal_comma_and_thousands_point() -> None:
    assert ("number", "1.500 Euro", "1500 EUR") in values("Das Ticket kostete 1.500 Euro.", "de")
    assert ("number", "3,5 Millionen", "3500000") in values("Dort leben 3,5 Millionen Menschen.", "de")


def test_spanish_sentence() -> None:
    found = values("Leonardo da Vinci pintó la Mona Lisa en Florencia el 1 de enero de 1503.", "es")
    assert ("person", "Leonardo da Vinci", "leonardo da vinci") in found
    assert ("place", "Florencia", "florencia") in found
    assert ("date", "1 de enero de 1503", "1503-01-01") in found


def test_french_sentence() -> None:
    found = values("Le 1er janvier 2002, l'euro a remplacé le franc en France, au XXIe siècle.", "fr")
    assert ("date", "1er janvier 2002", "2002-01-01") in found
    assert ("place", "France", "france") in found
    assert ("date", "XXIe siècle", "century 21") in found


def test_english_separators_follow_the_language() -> None:
    assert values("It cost 1,500.50 dollars.", "en") == [("number", "1,500.50 dollars", "1500.5 USD")]
    assert values("The rate rose to 3.500 units.", "en")[0][2] == "3.5"  # English: "." is the decimal point
    assert values("Rata a crescut la 3.500 de unități.", "ro")[0][2] == "3500"  # Romanian: a thousands point


def test_space_groups_thousands_except_in_english() -> None:
    assert ("number", "1 160 000 000 millas", "1160000000 mi") in values("Eran 1 160 000 000 millas cuadradas.", "es")
    assert [v[2] for v in values("The 3 100-metre races", "en")] == ["3", "100"]


def test_ordinals_roman_numerals_and_units() -> None:
    assert ("number", "55th", "55") in values("It was the 55th edition of the game.", "en")
    assert ("number", "al 5-lea", "5") in values("Este al 5-lea titlu al clubului.", "ro")
    assert ("number", "II", "2") in values("After World War II the city was rebuilt.", "en")
    assert ("number", "110 mph", "110 mph") in values("Winds reached 110 mph near the coast.", "en")
    assert ("number", "17 secunde", "17 s") in values("Mai erau 17 secunde de joc.", "ro")
    # a lone "I" is never a numeral (it is the English pronoun); capitalised, it stays in the name
    assert values("Elizabeth I was queen.", "en") == [("person", "Elizabeth I", "elizabeth i")]


def test_month_names_need_a_number_and_a_capital_where_the_language_writes_one() -> None:
    assert not [v for v in values("Mai mult de jumătate au plecat.", "ro") if v[0] == "date"]  # "mai" = "more"
    assert not [v for v in values("They may 5 times a day.", "en") if v[0] == "date"]


def test_sentence_start_alone_is_not_a_name_unless_known() -> None:
    assert values("Yesterday the team won.", "en") == []
    assert values("Paris hosted the games.", "en") == [("place", "Paris", "paris")]
    assert values("In Paris it rained.", "en") == [("place", "Paris", "paris")]


def test_common_noun_before_a_name_gives_its_kind() -> None:
    assert values("Stadionul se află pe strada Konwiktorska.", "ro") == [("place", "Konwiktorska", "konwiktorska")]
    assert ("organisation", "Apple", "apple") in values("Investitorii au preferat compania Apple.", "ro")


@pytest.mark.parametrize(
    ("value", "language", "kind"),
    [
        ("Denver Broncos", "en", K.ORGANISATION),  # a place and a plural: a team
        ("Los Angeles Rams", "en", K.ORGANISATION),
        ("Simona Halep", "en", K.PERSON),
        ("Paris Hilton", "en", K.PERSON),
        ("Apple Inc.", "en", K.ORGANISATION),
        ("Universitatea din Bucuresti", "ro", K.ORGANISATION),
        ("Santa Clara, California", "en", K.PLACE),
        ("Novgorod and Pskov", "en", K.PLACE),
        ("February 7, 2016", "en", K.DATE),
        ("1864", "ro", K.DATE),
        ("the 1990s", "en", K.DATE),
        ("308", "ro", K.NUMBER),
        ("1.500,50 lei", "ro", K.NUMBER),
        ("seven", "en", K.NUMBER),
        ("mayores de 18 años", "es", K.NUMBER),
        ("45%", None, K.NUMBER),
        ("Da", "ro", K.YES_NO),
        ("martie", "ro", K.DATE),  # a bare month is a date value, though never a date span alone
        ("because the monastery was too expensive to keep", "en", K.DESCRIPTION),
        ("a magnetic field", "en", K.UNKNOWN),
        ("", "en", K.UNKNOWN),
    ],
)
def test_value_kind(value: str, language: str | None, kind: AnswerKind) -> None:
    assert value_kind(value, language) is kind


def test_normalised_values_compare_across_languages() -> None:
    english = {span.normalised for span in value_spans("Facebook bought WhatsApp on February 19, 2014.", "en")}
    romanian = {span.normalised for span in value_spans("Facebook a cumpărat WhatsApp pe 19 februarie 2014.", "ro")}
    assert "2014-02-19" in english & romanian
    assert "whatsapp" in english & romanian
