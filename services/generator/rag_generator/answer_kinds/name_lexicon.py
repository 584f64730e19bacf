"""Words that tell what a proper name names, and the small words names are built with.

Folded (lowercase, no diacritics) and matched token by token, so "Universität" and "Universitatea"
are found as "universitat", "universitatea". An organisation word anywhere in a name makes it an
organisation ("Universitatea din București", "Apple Inc."); a place word makes it a place ("Tampa
Bay", "Marea Neagră", "Rhein-Main-Gebiet" is not: only whole tokens count). Both are hand-kept lists of
legal forms and institution words across the registry's languages, not guesses about names.
"""

from __future__ import annotations

__all__ = [
    "ARTICLES",
    "DETERMINERS_DE",
    "NAME_PARTICLES",
    "NOUN_SUFFIXES_DE",
    "ORGANISATION_WORDS",
    "PLACE_WORDS",
    "TITLE_WORDS",
]

ORGANISATION_WORDS: frozenset[str] = frozenset(
    # legal forms
    "inc inc. ltd ltd. llc corp corp. corporation co co. plc gmbh ag kg se s.a. sa s.r.l. srl s.a.s sas sarl "
    "s.p.a. spa s.l. sl b.v. bv n.v. nv a/s as ab oy oyj asa kft zrt rt a.s. ao pao ooo "
    # companies, institutions, bodies
    "company compania companiei companie companhia compagnie compania compañía gesellschaft "
    "group grupul grupo groupe gruppe holding holdings industries enterprises "
    "bank banca banque banco "
    "university universitatea universitatii universitat universitaet universidad universite universita universidade "
    "universiteit universitet universitetet yliopisto egyetem universitesi universitesi университет "
    "college colegiul kolleg academy academia academie akademie academiei akademi "
    "institute institutul institut instituto istituto institutt "
    "school scoala schule escuela ecole scuola "
    "ministry ministerul ministerium ministerio ministere ministero "
    "agency agentia agentur agencia agence agenzia "
    "party partidul partei partido parti partito "
    "association asociatia verein verband asociacion association associazione "
    "foundation fundatia stiftung fundacion fondation fondazione "
    "council consiliul rat conseil consejo consiglio "
    "commission comisia kommission comision commissione "
    "federation federatia federation federacion "
    "union uniunea "
    "club fc cf ac "
    "committee comitetul komitee comite "
    "organization organisation organizatia organisation organizacion "
    "corporation societe societa sociedad societatea "
    "airlines airways records studios motors pictures press network television broadcasting radio news "
    "times journal magazine front league liga ligue lega movement army navy police "
    "nasa nato unesco unicef eu un".split()
)

PLACE_WORDS: frozenset[str] = frozenset(
    "river raul fluss rio riviere fiume "
    "mountain mountains mount mt muntele muntii berg gebirge monte montagne "
    "lake lacul see lago lac "
    "sea marea meer mar mer ocean oceanul ozean oceano "
    "bay golful bucht bahia baie "
    "island islands insula insulele insel isla ile isola "
    "street strada str. straße strasse calle rue via avenue bulevardul boulevard "
    "county judetul kreis condado comte "
    "province provincia provinz "
    "valley valea tal valle vallee "
    "city town village orasul stadt ciudad ville citta "
    "peninsula peninsula halbinsel "
    "desert desertul wuste desierto "
    "stadium stadionul stadion estadio stade "
    "park parcul parque parc "
    "square piata platz plaza place piazza "
    "airport aeroportul flughafen aeropuerto aeroport "
    "zona zone region regiunea cartierul quartier barrio viertel district districtul delta defileul canyon "
    "gorge palace palatul palast palacio palais castle castelul schloss castillo chateau cathedral catedrala "
    "orasul oras satul comuna ciudad pueblo stadt dorf ville village city town "
    "straße strasse strada calle rue "
    "center centre centrul zentrum centro yard campus hall tower turnul turm torre tour bridge podul brucke "
    "puente pont station gara bahnhof estacion gare harbor harbour portul hafen puerto highway autostrada".split()
)

#: Leading articles dropped from a name anywhere ("the Beatles" and "Beatles" are one value).
ARTICLES: frozenset[str] = frozenset("the a an der die das den dem des el la los las le les il lo gli l' o a os as".split())

#: Lowercase words allowed inside a name between capitalised ones ("Leonardo da Vinci", "Universitatea
#: din București", "Bank of America", "Ludwig van Beethoven").
NAME_PARTICLES: frozenset[str] = frozenset(
    "de da van von der den del della di du des la le y e of din al bin ibn ter zu do dos das".split()
)

#: Words that precede a name but are not part of it when they start a sentence or stand alone.
TITLE_WORDS: frozenset[str] = frozenset(
    "mr mr. mrs mrs. ms ms. dr dr. prof prof. sir dl dl. dna dna. herr frau sr sr. sra sra. m. mme mme.".split()
)

#: German capitalises every noun: a single capitalised German word with one of these endings is a
#: common noun, not a name ("Regierung", "Freiheit", "Mannschaft").
NOUN_SUFFIXES_DE: tuple[str, ...] = (
    "ung", "heit", "keit", "schaft", "tion", "tat", "ismus", "chen", "lein", "ling", "nis", "tum", "ment",
    "ur", "ik", "ie", "enz", "anz", "ei",
)

#: German determiners and article contractions: a single capitalised word after one is a common noun
#: ("die Regierung", "im Jahr").
DETERMINERS_DE: frozenset[str] = frozenset(
    "der die das den dem des ein eine einen einem einer eines im am zum zur vom beim ins kein keine keinen "
    "dieser diese dieses diesem diesen jeder jede jedes sein seine ihr ihre unser unsere".split()
)
