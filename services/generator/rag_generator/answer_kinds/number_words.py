"""Words around and instead of digits: number words, multipliers, percent words, currencies.

Number words come from num2words (pinned in constraints.txt), which spells numbers in 16 of the 17
languages (not Greek): 2–20, the tens to 90, 100 and 1000 as cardinals. "One" is left out in every
language, since it is also the indefinite article ("un", "ein", "o"); so are words that spell a
number and something else ("nouă" is also "new" in Romanian, "neuf" in French). The decimal
separator of each language is Babel's (CLDR).
"""

from __future__ import annotations

from functools import cache

from babel import Locale
from num2words import num2words

from .folding import folded_same_length

__all__ = [
    "CURRENCIES",
    "MULTIPLIERS",
    "PERCENT_WORDS",
    "REFERENCE_WORDS",
    "UNITS",
    "decimal_separator",
    "number_words",
]

_SPELLED = (*range(2, 21), 30, 40, 50, 60, 70, 80, 90, 100, 1000)
#: Number words that are also common other words in their language.
_AMBIGUOUS = {"ro": {"noua"}, "fr": {"neuf"}, "pt": {"sete"}}
#: Feminine or other forms num2words does not produce.
_EXTRA = {"ro": {"doua": 2, "douasprezece": 12}, "pt": {"duas": 2}, "es": {"veinte": 20}, "ru": {"две": 2}}


@cache
def number_words(code: str) -> dict[str, int]:
    """Folded number word → value in language ``code``; empty for a language num2words cannot spell."""
    words: dict[str, int] = {}
    for value in _SPELLED:
        try:
            spelled = num2words(value, lang=code)
        except NotImplementedError:
            return {}
        folded = folded_same_length(spelled.strip())
        if " " not in folded and folded not in _AMBIGUOUS.get(code, ()):
            words.setdefault(folded, value)
    words.update(_EXTRA.get(code, {}))
    return words


@cache
def decimal_separator(code: str) -> str:
    """"," or "." — the decimal separator language ``code`` writes (CLDR, Latin digits)."""
    return Locale.parse(code).number_symbols["latn"]["decimal"]


#: Folded multiplier word (or abbreviation) → factor. "Billion" is the short scale's 10^9 (English);
#: the long-scale languages' 10^12 words ("Billion" in German, "bilion" in Romanian) are left out
#: rather than guessed.
MULTIPLIERS: dict[str, float] = {
    **dict.fromkeys("thousand thousands mii mie tausend mil mille mila duizend tusind tusen tuhat tuhatta ezer bin "
                    "тысяч тысячи тысяча χιλιάδες ألف آلاف".split(), 1e3),
    **dict.fromkeys("million millions milion milioane mil. mio mio. millionen millón millones milione milioni milhão "
                    "milhões miljoen miljoenen millioner miljoner miljon miljoona miljoonaa millió milyon "
                    "миллион миллиона миллионов εκατομμύριο εκατομμύρια مليون ملايين".split(), 1e6),
    **dict.fromkeys("billion billions miliard miliarde mld mld. milliard milliards milliarde milliarden mrd mrd. "
                    "miliardo miliardi bilhão bilhões miljard miljarder miljardia milliárd milyar "
                    "миллиард миллиарда миллиардов δισεκατομμύριο δισεκατομμύρια مليار مليارات".split(), 1e9),
}

#: Folded words that make the number before them a percentage ("%" itself is handled as a symbol).
PERCENT_WORDS: tuple[str, ...] = (
    "percent", "per cent", "la suta", "procent", "procente", "prozent", "por ciento", "pour cent", "pourcent",
    "per cento", "por cento", "procento", "prosent", "prosenttia", "szazalek", "процента", "процентов",
    "процент", "τοις εκατο", "بالمئة", "في المئة",
)

#: Folded currency word, code or symbol → ISO 4217 code.
CURRENCIES: dict[str, str] = {
    "$": "USD", "us$": "USD", "usd": "USD", "dollar": "USD", "dollars": "USD", "dolari": "USD", "dolar": "USD",
    "dolares": "USD", "dollari": "USD", "dolares americanos": "USD",
    "€": "EUR", "eur": "EUR", "euro": "EUR", "euros": "EUR", "evro": "EUR", "ευρω": "EUR", "евро": "EUR",
    "£": "GBP", "gbp": "GBP", "pounds": "GBP", "pound": "GBP", "lire sterline": "GBP",
    "¥": "JPY", "jpy": "JPY", "yen": "JPY",
    "lei": "RON", "leu": "RON", "ron": "RON",
    "chf": "CHF", "franken": "CHF",
    "rub": "RUB", "рублей": "RUB", "рубля": "RUB", "рубль": "RUB", "₽": "RUB",
    "try": "TRY", "lira": "TRY", "₺": "TRY",
    "sek": "SEK", "nok": "NOK", "dkk": "DKK", "kronor": "SEK", "kroner": "NOK",
    "huf": "HUF", "forint": "HUF",
}

#: Folded words after which a number names a place in a text (an article, a page), not a value:
#: "art. 5 alin. (2)", "Legea nr. 1/2011", "S. 12", "§ 3".
REFERENCE_WORDS: tuple[str, ...] = (
    "art.", "art", "alin.", "alin", "lit.", "nr.", "nr", "no.", "pct.", "pag.", "p.", "pp.", "par.", "cap.",
    "fig.", "tab.", "vol.", "abs.", "ziff.", "s.", "sec.", "ch.", "§", "#", "nº", "n°", "articolul", "article",
    "artikel", "articulo", "alineatul", "paragraful", "litera", "section", "chapter", "capitolul", "kapitel",
    "page", "pagina", "seite", "punctul",
)

#: Folded unit word or symbol after a number → canonical unit, so "17 seconds" and "17 secunde" are
#: both "17 s". Units of time, length, speed, mass, area and temperature, in the richest languages.
UNITS: dict[str, str] = {
    **dict.fromkeys("s sec second seconds secunde secunda sekunden sekunde segundos segundo secondes seconde "
                    "secondi secondo".split(), "s"),
    **dict.fromkeys("min minute minutes minut minuten minutos minuto minuti".split(), "min"),
    **dict.fromkeys("h hour hours ora ore stunde stunden horas hora heure heures".split(), "h"),
    **dict.fromkeys("day days zi zile tag tage tagen dias dia jours jour giorni".split(), "d"),
    **dict.fromkeys("week weeks saptamana saptamani woche wochen semana semanas semaine semaines".split(), "wk"),
    **dict.fromkeys("month months luna luni monat monate monaten meses mes mois mesi".split(), "mo"),
    **dict.fromkeys("year years an ani anul jahr jahre jahren ano anos años ans annees anni".split(), "y"),
    **dict.fromkeys("km kilometre kilometres kilometer kilometers kilometri kilometro kilometros kilometres".split(), "km"),
    **dict.fromkeys("m metre metres meter meters metri metro metros".split(), "m"),
    **dict.fromkeys("cm centimetres centimeters centimetri".split(), "cm"),
    **dict.fromkeys("mi mile miles meile meilen millas".split(), "mi"),
    **dict.fromkeys("ft foot feet fuß".split(), "ft"),
    **dict.fromkeys("in inch inches".split(), "in"),
    **dict.fromkeys("mph".split(), "mph"),
    **dict.fromkeys("km/h kmh km/ora".split(), "km/h"),
    **dict.fromkeys("kg kilogram kilograms kilograme kilogramm kilogramos".split(), "kg"),
    **dict.fromkeys("t ton tons tonne tonnes tone tonnen toneladas".split(), "t"),
    **dict.fromkeys("g gram grams grame gramm gramos".split(), "g"),
    **dict.fromkeys("km2 km² square kilometres square kilometers".split(), "km2"),
    **dict.fromkeys("ha hectare hectares hektar".split(), "ha"),
    **dict.fromkeys("acre acres".split(), "acre"),
    **dict.fromkeys("°c grade celsius".split(), "°C"),
    **dict.fromkeys("°f fahrenheit".split(), "°F"),
}
