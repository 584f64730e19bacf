"""answer_kinds.wanted_kind: what a question wants, per language, diacritic-blind."""

from __future__ import annotations

import pytest

from rag_generator.answer_kinds import AnswerKind, wanted_kind

K = AnswerKind


@pytest.mark.parametrize(
    ("question", "language", "kind"),
    [
        # English
        ("Who won the women's singles Wimbledon in 2019?", "en", K.PERSON),
        ("When did Tesla move to New York City?", "en", K.DATE),
        ("In what year did the Broncos win their first Super Bowl?", "en", K.DATE),
        ("How many interceptions did the Panthers make in 2015?", "en", K.NUMBER),
        ("How much did the stadium cost?", "en", K.NUMBER),
        ("Where was Super Bowl 50 held?", "en", K.PLACE),
        ("Which company acquired WhatsApp?", "en", K.ORGANISATION),
        ("Which team did the city of Denver support?", "en", K.ORGANISATION),  # first noun, not "city"
        ("What is the name of the university Tesla attended?", "en", K.ORGANISATION),
        ("Why did Luther leave the monastery?", "en", K.DESCRIPTION),
        ("How does photosynthesis work?", "en", K.DESCRIPTION),
        ("Is Bucharest the capital of Romania?", "en", K.YES_NO),
        ("Did Apple buy WhatsApp when it was small?", "en", K.YES_NO),  # "when" is a conjunction here
        ("What is it called when a citizen refuses to obey a law?", "en", K.UNKNOWN),  # ... and here
        ("What did Luther write about the Jews?", "en", K.UNKNOWN),
        # Romanian, with and without diacritics
        ("Cine a câștigat Super Bowl LV?", "ro", K.PERSON),
        ("Cine a castigat Super Bowl LV?", "ro", K.PERSON),
        ("Când a fost fondată Universitatea din București?", "ro", K.DATE),
        ("Cand a fost fondata Universitatea din Bucuresti?", "ro", K.DATE),
        ("În ce an a murit Eminescu?", "ro", K.DATE),
        ("Câte puncte a cedat apărarea echipei Panthers?", "ro", K.NUMBER),
        ("Cati studenti are facultatea?", "ro", K.NUMBER),
        ("Unde se află sediul companiei?", "ro", K.PLACE),
        ("Ce companie a cumpărat WhatsApp?", "ro", K.ORGANISATION),
        ("În ce oraș s-a jucat finala?", "ro", K.PLACE),
        ("De ce a demisionat rectorul?", "ro", K.DESCRIPTION),
        ("Este Bucureștiul capitala României?", "ro", K.YES_NO),
        ("Cum se numește orașul natal al lui Eminescu?", "ro", K.UNKNOWN),  # a name, not a "how"
        # German
        ("Wer gewann den 55. Super Bowl?", "de", K.PERSON),
        ("Wann wurde die Universität gegründet?", "de", K.DATE),
        ("Wie viele Menschen leben in Berlin?", "de", K.NUMBER),
        ("Wo fand der Super Bowl 50 statt?", "de", K.PLACE),
        ("Welches Unternehmen hat WhatsApp gekauft?", "de", K.ORGANISATION),
        ("In welchem Jahr starb Goethe?", "de", K.DATE),
        ("Warum fiel die Mauer?", "de", K.DESCRIPTION),
        ("Ist Berlin die Hauptstadt Deutschlands?", "de", K.YES_NO),
        ("Wie lautet der Name der Sächsischen Gärten auf Polnisch?", "de", K.UNKNOWN),
        # Spanish
        ("¿Quién escribió Don Quijote?", "es", K.PERSON),
        ("¿Cuándo nació Cervantes?", "es", K.DATE),
        ("¿Cuantos habitantes tiene Madrid?", "es", K.NUMBER),
        ("¿Dónde nació Cervantes?", "es", K.PLACE),
        ("¿Qué empresa compró WhatsApp?", "es", K.ORGANISATION),
        ("¿En qué año terminó la guerra?", "es", K.DATE),
        ("¿Por qué cayó el imperio?", "es", K.DESCRIPTION),
        # French
        ("Qui a écrit Les Misérables ?", "fr", K.PERSON),
        ("Quand la tour Eiffel a-t-elle été construite ?", "fr", K.DATE),
        ("Combien d'habitants compte Paris ?", "fr", K.NUMBER),
        ("Où se trouve le Louvre ?", "fr", K.PLACE),
        ("Quelle entreprise a racheté WhatsApp ?", "fr", K.ORGANISATION),
        ("En quelle année la Bastille a-t-elle été prise ?", "fr", K.DATE),
        ("Pourquoi le ciel est-il bleu ?", "fr", K.DESCRIPTION),
        ("Est-ce que Paris est la capitale de la France ?", "fr", K.YES_NO),
        # the other registry languages: who / when / where / how many / which
        ("Chi ha scritto la Divina Commedia?", "it", K.PERSON),
        ("Quando è nato Dante?", "it", K.DATE),
        ("Onde fica Lisboa?", "pt", K.PLACE),
        ("Hoeveel inwoners heeft Amsterdam?", "nl", K.NUMBER),
        ("Hvornår blev Københavns Universitet grundlagt?", "da", K.DATE),
        ("Hvem skrev Peer Gynt?", "no", K.PERSON),
        ("Var ligger Uppsala universitet?", "sv", K.PLACE),
        ("Kuka kirjoitti Kalevalan?", "fi", K.PERSON),
        ("Onko Helsinki Suomen pääkaupunki?", "fi", K.YES_NO),
        ("Hány lakosa van Budapestnek?", "hu", K.NUMBER),
        ("İstanbul'un fethi ne zaman oldu?", "tr", K.DATE),
        ("Кто написал «Войну и мир»?", "ru", K.PERSON),
        ("В каком году основан Санкт-Петербург?", "ru", K.DATE),
        ("Πού βρίσκεται η Ακρόπολη;", "el", K.PLACE),
        ("متى تأسست جامعة القاهرة؟", "ar", K.DATE),
        ("Hangi şirket WhatsApp'ı satın aldı?", "tr", K.ORGANISATION),
    ],
)
def test_wanted_kind(question: str, language: str, kind: AnswerKind) -> None:
    assert wanted_kind(question, language) is kind


def test_no_language_tries_every_language() -> None:
    assert wanted_kind("Câte puncte a cedat apărarea?", None) is K.NUMBER
    assert wanted_kind("Was ist ein Atom?", None) is K.DESCRIPTION  # German "was ist", not English "was"
    assert wanted_kind("Wie viele Tore fielen?", None) is K.NUMBER


def test_a_language_uses_only_its_own_words() -> None:
    # "Cine" is Romanian for "who"; in an English question it is nothing of the kind.
    assert wanted_kind("Cine a scris Luceafărul?", "en") is K.UNKNOWN
    assert wanted_kind("Cine a scris Luceafărul?", "ro") is K.PERSON


def test_a_language_outside_the_registry_is_unknown() -> None:
    assert wanted_kind("Kto napisał Pana Tadeusza?", "pl") is K.UNKNOWN
