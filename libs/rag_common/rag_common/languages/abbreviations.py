"""Abbreviations per language: a period after one of them does not end a sentence (``rag_common.sentences``).

Provenance: compiled for this project from the languages' common written abbreviations (style guides,
legal and academic usage; Romanian from the drafting of laws and university regulations: "art. 5 alin.
(2) lit. b)", "prof. univ. dr."). No kept package covers the supported languages: pysbd (MIT) has no
Romanian, Portuguese, Swedish, Finnish, Hungarian, Turkish or Norwegian, NLTK's Punkt models are a
download. Lists are short on purpose: an entry that is also an ordinary word ("sat", "loc", "cal" in
Romanian) would glue two sentences together, so only unambiguous forms are listed, and the ambiguous
ones that matter before numbers are ``FINAL``, which costs nothing when they end a sentence.

Two kinds, per language:

- ``inner``: never ends a sentence; titles before a name ("dr. Ion", "Mr. Smith") and connectives
  that a capitalised word may follow ("z. B. Äpfel", German capitalises nouns).
- ``final``: ends a sentence only before an uppercase word that is not a Roman numeral ("etc. Apoi"
  is a boundary, "etc. și" is not; "art. 5", "cap. II", "nr. 1/2011", "alin. (2)" are not).

Entries are written without their last period ("z.b" for "z.B."). Lowercase entries match in any case;
an entry with an uppercase letter matches only as written ("No" = number, "no" is a word). An entry
with diacritics also matches its plain form ("ș.a" = "s.a"), but a plain entry does not match a word
with diacritics (Romanian "mar" is not "măr").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

from rag_common.languages.text import fold_diacritics, normalise_text

__all__ = ["Abbreviations", "AbbreviationKind", "abbreviations"]

AbbreviationKind = Literal["inner", "final"]

#: ``code: (inner, final, ordinal_dot)``, words whitespace-separated; the month abbreviations written
#: with a period are ``final``. ``ordinal_dot``: the language writes ordinals as a number and a period
#: ("am 1. Januar", "im 19. Jahrhundert", "2020. január 1."), so a number of at most three digits and a
#: period does not end a sentence there (a capitalised noun may follow it in German), unless an
#: abbreviation precedes it: "Abs. 2." and "S. 5." are references, and end a sentence like any word.
_DATA: dict[str, tuple[str, str, bool]] = {
    "en": (
        "mr mrs ms dr prof rev hon gov sen rep gen col capt lt sgt st mt e.g i.e cf vs viz approx ca",
        "etc al inc ltd co corp jr sr No Nos Fig Figs fig figs sec secs ch chap vol vols ed eds pp p eq eqs "
        "dept est govt univ Jan Feb Mar Apr Jun Jul Aug Sep Sept Oct Nov Dec",
        False,
    ),
    "ro": (
        "dl dna dra dlui dnei d-l d-na d-lui dvs prof univ conf lect asist dr drd ing ec av acad pr sf "
        "ex cf vs cca aprox resp",
        "etc ș.a ș.a.m.d ș.u art alin lit nr pct cap secț tit par parag ord dec hot str bd bld bul "
        "ap bl sc et jud mun com reg ed vol pag pp p fig tab crt lb pt "
        "ian feb mart apr iun iul aug sept oct nov",
        False,
    ),
    "de": (
        "z z.b z.t d.h u.a u.ä s.o s.u o.ä bzw vgl ggf sog evtl inkl zzgl ca Dr Prof Hr Fr Frl St geb",
        "usw etc Nr Abs Art Bd Jh Kap Abb Tab Anm Hrsg Aufl Str S f ff bspw insb Mio Mrd "
        "Jan Feb Mär Apr Jun Jul Aug Sep Sept Okt Nov Dez",
        True,
    ),
    "fr": (
        "m mm mme mlle mgr dr pr me cf p.ex c.-à-d c.à.d env vs",
        "etc art al n° chap éd vol p pp fig tab av bd ch apr janv févr avr juil sept oct nov déc",
        False,
    ),
    "es": (
        "sr sra srta sres dr dra lic ing prof d dña ud uds vd vds p.ej cf vs aprox",
        "etc art núm nº cap vol pág págs p pp fig tab av avda c/ ed "
        "ene feb mar abr jun jul ago sept oct nov dic",
        False,
    ),
    "it": (
        "sig sigg sig.ra dott dott.ssa prof ing avv arch on geom rag p.es cfr vs ca",
        "ecc etc art n num cap vol pag pagg p pp fig tab ed gen febb mar apr magg giu lug ago sett ott nov dic",
        False,
    ),
    "pt": (
        "sr sra srta dr dra prof profa eng exmo exma p.ex cf vs aprox",
        "etc art nº n cap vol pág págs p pp fig tab av ed jan fev mar abr jun jul ago set out nov dez",
        False,
    ),
    "nl": (
        "dhr mevr mw dr prof ir ing drs mr m.a.w d.w.z o.a i.p.v bijv bv vgl ca",
        "etc enz art nr blz p pp fig tab hfst jan feb mrt apr jun jul aug sep sept okt nov dec",
        False,
    ),
    "ru": (
        "т.е т.к т.н г-н г-жа проф акад см ср напр ок",
        "т.д т.п др пр ст гл рис табл стр тыс млн млрд руб коп янв февр апр авг сент окт нояб дек",
        False,
    ),
    "da": (
        "hr fr dr prof bl.a f.eks dvs mht ca vs jf",
        "osv mv etc nr stk kap fig tab jan feb mar apr jun jul aug sep sept okt nov dec",
        True,
    ),
    "no": (
        "hr fr dr prof bl.a f.eks dvs mht ca vs jf",
        "osv mv etc nr stk kap fig tab jan feb mar apr jun jul aug sep sept okt nov des",
        True,
    ),
    "sv": (
        "hr fr dr prof bl.a t.ex d.v.s dvs m.fl ca jfr vs",
        "osv m.m etc nr kap fig tab jan feb mar apr jun jul aug sep sept okt nov dec",
        False,
    ),
    "fi": (
        "esim ns mm vrt ks prof tri",
        "jne ym yms nro kpl taul tammik helmik maalisk huhtik toukok kesäk heinäk elok syysk lokak marrask jouluk",
        True,
    ),
    "hu": (
        "dr prof id ifj özv pl ill kb vö ld",
        "stb sz old fej jan febr márc ápr jún júl aug szept okt nov dec",
        True,
    ),
    "tr": (
        "dr prof doç yrd av müh sn örn",
        "vb vs no md bkz şek tab oca şub mar nis haz tem ağu eyl eki kas ara",
        True,
    ),
    "el": (
        "κα δρ καθ π.χ δηλ βλ",
        "κ.λπ κ.ά κ.τ.λ κλπ αρ σελ κεφ εικ ιαν φεβ μαρ απρ ιουν ιουλ αυγ σεπ οκτ νοε δεκ",
        False,
    ),
}


@dataclass(frozen=True, slots=True)
class Abbreviations:
    """One language's abbreviations, ready for lookup (see the module docstring)."""

    any_case: dict[str, AbbreviationKind]
    exact_case: dict[str, AbbreviationKind]
    ordinal_dot: bool

    @classmethod
    def parse(cls, inner: str, final: str, ordinal_dot: bool) -> Abbreviations:
        any_case: dict[str, AbbreviationKind] = {}
        exact_case: dict[str, AbbreviationKind] = {}
        for kind, words in (("final", final), ("inner", inner)):  # a word in both lists is inner
            for word in words.split():
                word = normalise_text(word)
                table, key = (any_case, word.casefold()) if word == word.lower() else (exact_case, word)
                table[key] = kind
                # The plain form of an entry with diacritics ("ș.a" → "s.a"); a plain entry gets no
                # form with diacritics, so "măr" is never looked up as "mar".
                table.setdefault(fold_diacritics(key), kind)
        return cls(any_case, exact_case, ordinal_dot)

    def kind(self, word: str) -> AbbreviationKind | None:
        """What ``word`` (the text before a period, without it) is, if an abbreviation of the language."""
        word = normalise_text(word)
        return self.exact_case.get(word) or self.any_case.get(word.casefold())


def abbreviations(code: str | None) -> Abbreviations:
    """The lists of language ``code``; None (language unknown) → English's, as the splitter always
    behaved; a code without lists (Arabic) → none (only the splitter's language-independent rules apply)."""
    return _parsed(code or "en")


@cache
def _parsed(code: str) -> Abbreviations:
    inner, final, ordinal_dot = _DATA.get(code, ("", "", False))
    return Abbreviations.parse(inner, final, ordinal_dot)
