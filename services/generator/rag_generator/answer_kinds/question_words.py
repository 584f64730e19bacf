"""Interrogatives per language: the words that say what kind of answer a question wants.

A data table, read by :mod:`.question_kind`. Each entry is written as a regular-expression fragment
with diacritics (they are folded before compiling, so "când" also matches "cand"); a noun ending in
``*`` is a prefix ("oraș*" → "orașul", "orașului"). Only lowercase escapes (``\\b``, ``\\s``, ``\\w``)
may appear, since folding lowercases the fragment.

Per language:

- ``phrases``: fragment → kind, matched anywhere in the question at word boundaries ("who",
  "în ce an", "wie viele"). A phrase of kind ``UNKNOWN`` blocks shorter ones at the same place
  ("cum se numește" is not a "how").
- ``which``: the determiners of "which/what X" questions; the kind then comes from the first noun
  of ``nouns`` within the next four words ("which company" → organisation, "ce oraș" → place).
- ``yes_no``: words that, first in the question, make it a yes/no question (auxiliary-first in
  English, German, Dutch, the Scandinavian languages; "Este/Sunt/Oare" in Romanian; "Est-ce que" and
  inversion in French; "hal" in Arabic). Finnish "-ko/-kö", Russian "ли" and Turkish "mı/mi" are
  written as phrases.

Richest (nouns for every kind, description and yes/no forms): en, ro, de, es, fr. The others have
who/when/where/how many/which, why/how, nouns for year, date, city, country, company and person,
and yes/no where the language marks it with a word.
"""

from __future__ import annotations

from .kinds import AnswerKind

__all__ = ["QUESTION_WORDS"]

P, L, D, N, O, Y, S, U = (
    AnswerKind.PERSON,
    AnswerKind.PLACE,
    AnswerKind.DATE,
    AnswerKind.NUMBER,
    AnswerKind.ORGANISATION,
    AnswerKind.YES_NO,
    AnswerKind.DESCRIPTION,
    AnswerKind.UNKNOWN,
)

QUESTION_WORDS: dict[str, dict] = {
    "en": {
        "phrases": {
            r"who|whom|whose": P,
            r"when|what time": D,
            r"where|whereabouts": L,
            r"how (?:many|much|long|old|far|big|large|tall|high|often|wide|deep|fast|heavy|small)": N,
            r"why|how come|for what reason": S,
            r"how": S,
            r"what (?:is|are|was|were) (?:a |an |the )?\w+(?: \w+)?\s*\??$": S,
            r"what does [\w\s]+ mean|what is meant by|define|describe|explain": S,
        },
        "which": r"which|what",
        "nouns": {
            D: "year* date* day* month* century centuries decade* era",
            L: "city cities country countries state* region* place* location* continent* river* town* village* "
            "capital* province* county counties island* mountain* lake* ocean* sea* stadium* venue* nation* "
            "street* neighbo*hood* district* area* borough* port*",
            O: "compan* organi* team* universit* college* school* institution* agenc* group* band* party parties "
            "firm* corporation* club* network* channel* newspaper* magazine* publisher* manufacturer* brand* "
            "airline* bank* label* studio* union* league*",
            P: "person* people man men woman women player* president* author* writer* actor* actress* king* queen* "
            "emperor* scientist* artist* singer* leader* coach* composer* architect* inventor* founder* director* "
            "pope* general* minister* governor* mayor* chancellor* ruler* philosopher* explorer* owner*",
            N: "percent* proportion* fraction* number* amount* population* size* cost* price* age* rate* "
            "temperature* length* distance* height* weight* score* total* sum* quantit*",
        },
        "yes_no": r"is|are|was|were|do|does|did|can|could|will|would|should|has|have|had|may|might|must|shall|"
        r"isn't|aren't|wasn't|weren't|doesn't|don't|didn't|can't|won't|hasn't|haven't",
    },
    "ro": {
        "phrases": {
            r"cine|cui|pe cine|(?:al|a|ai|ale) cui": P,
            r"când|de când|până când|cît timp în urmă": D,
            r"unde|de unde|încotro|pe unde": L,
            r"câți|câte|cât|câtă|cîți|cîte|cît": N,
            r"de ce|din ce cauză|din ce motiv|cum": S,
            r"ce (?:este|e|sunt|era|erau|înseamnă|reprezintă) (?:un |o )?\w+(?: \w+)?\s*\??$|ce înseamnă|descrieți|explicați": S,
            r"cum se (?:numește|numea|numesc|numeau|cheamă|chema)|care (?:este|era|e) numele": U,
        },
        "which": r"care|ce|ce fel de|cărui|cărei|căror|căreia|căruia|pe care",
        "nouns": {
            D: "an anul anului anii ani dată data datei zi ziua zilei lun* secol* decenii deceniu* perioad* epoc*",
            L: "oraș* țar* stat statul statului regiun* loc locul locului locați* continent* râu* orășel* sat satul "
            "capital* provinci* județ* insul* munte* munți* lac* ocean* stadion* zon* cartier* port*",
            O: "companie* companii* firm* organizați* echip* universit* facult* instituți* agenți* grup* formați* "
            "trup* partid* club* banc* rețea* post* ziar* revist* editur* producător* marc* asociați*",
            P: "persoan* om omul oamen* bărbat* femei* femeie jucător* președinte* autor* scriitor* actor* actriț* "
            "rege* regin* împărat* savant* artist* cântăreț* lider* antrenor* compozitor* arhitect* inventator* "
            "fondator* director* papă papa ministr* guvernator* primar* cancelar* conducător* filozof* proprietar*",
            N: "procent* proporți* fracți* număr* sum* cantitat* populați* mărim* cost* preț* vârst* rat* "
            "temperatur* lungim* distanț* înălțim* greutat* scor* total*",
        },
        "yes_no": r"este|e|sunt|era|erau|a fost|au fost|poate|pot|putea|există|oare|are|au avut|a avut|s-a|s-au|va|vor",
    },
    "de": {
        "phrases": {
            r"wer|wem|wen|wessen|von wem|mit wem": P,
            r"wann|seit wann|bis wann": D,
            r"wo|woher|wohin": L,
            r"wie (?:viele|viel|lange|alt|weit|groß|hoch|oft|breit|tief|schnell|schwer)": N,
            r"warum|wieso|weshalb|weswegen|wie": S,
            r"was (?:ist|sind|war|waren|bedeutet|bedeuten) (?:ein |eine |der |die |das )?\w+(?: \w+)?\s*\??$": S,
            r"was bedeutet|was versteht man unter|beschreiben sie|erklären sie": S,
            r"wie (?:heißt|hieß|heißen|hießen|nennt man|lautet|lauten|lautete|ist der name)|wie (?:wird|werden|wurde|wurden) [\w\s-]+ (?:genannt|bezeichnet|benannt)": U,
        },
        "which": r"welche|welcher|welches|welchem|welchen|was für|in welchem|an welchem",
        "nouns": {
            D: "jahr* datum tag* monat* jahrhundert* jahrzehnt* zeitraum* epoche* zeitpunkt*",
            L: "stadt städte land länder staat* region* ort* stelle* kontinent* fluss* flüss* dorf* dörfer "
            "hauptstadt* provinz* bezirk* insel* berg* see* meer* ozean* stadion* gebiet* stadtteil* hafen*",
            O: "unternehmen firma firmen organisation* mannschaft* team* universität* hochschule* schule* "
            "institut* behörde* agentur* gruppe* band* partei* konzern* verein* sender* zeitung* zeitschrift* "
            "verlag* hersteller* marke* fluggesellschaft* bank* club* liga*",
            P: "person* mensch* mann männer frau* spieler* präsident* autor* schriftsteller* schauspieler* könig* "
            "kaiser* wissenschaftler* künstler* sänger* anführer* trainer* komponist* architekt* erfinder* "
            "gründer* direktor* papst* minister* gouverneur* bürgermeister* kanzler* herrscher* philosoph* besitzer*",
            N: "prozent* anteil* zahl* anzahl* menge* betrag* bevölkerung* größe* kosten preis* alter* rate* "
            "temperatur* länge* entfernung* höhe* gewicht* punktzahl* summe*",
        },
        "yes_no": r"ist|sind|war|waren|hat|haben|hatte|hatten|kann|können|konnte|wird|werden|wurde|wurden|gibt|gab|"
        r"darf|muss|soll|sollte|stimmt es|existiert",
    },
    "es": {
        "phrases": {
            r"quién|quiénes|a quién|de quién|con quién": P,
            r"cuándo|desde cuándo|hasta cuándo": D,
            r"dónde|adónde|de dónde|en dónde": L,
            r"cuántos|cuántas|cuánto|cuánta": N,
            r"por qué|cómo|para qué": S,
            r"qué (?:es|son|era|eran|significa) (?:un |una |el |la )?\w+(?: \w+)?\s*\??$|qué significa|describa|explique": S,
            r"cómo se (?:llama|llamaba|llaman|llamaban|denomina)|cuál (?:es|era) el nombre": U,
        },
        "which": r"qué|cuál|cuáles|en qué|de qué",
        "nouns": {
            D: "año* fecha* día* mes meses siglo* década* época* período* periodo*",
            L: "ciudad* país* paises estado* región* regiones lugar* ubicación* continente* río* pueblo* "
            "capital* provincia* condado* isla* montaña* lago* océano* mar estadio* zona* barrio* puerto*",
            O: "empresa* compañía* organización* organizaciones equipo* universidad* escuela* institución* "
            "agencia* grupo* banda* partido* firma* club* cadena* periódico* revista* editorial* fabricante* "
            "marca* aerolínea* banco* liga*",
            P: "persona* hombre* mujer* jugador* presidente* autor* escritor* actor* actriz* rey* reina* "
            "emperador* científic* artista* cantante* líder* entrenador* compositor* arquitect* inventor* "
            "fundador* director* papa ministr* gobernador* alcalde* canciller* filósofo* dueño* propietario*",
            N: "porcentaje* proporción* fracción* número* cantidad* población* tamaño* costo* coste* precio* "
            "edad* tasa* temperatura* longitud* distancia* altura* peso* puntuación* total* suma*",
        },
        "yes_no": r"es|son|era|eran|fue|fueron|está|están|hay|había|puede|pueden|existe|tiene|tienen|ha|han",
    },
    "fr": {
        "phrases": {
            r"qui|à qui|de qui|avec qui|par qui": P,
            r"quand|depuis quand|jusqu'à quand|à quelle date": D,
            r"où|d'où|par où": L,
            r"combien": N,
            r"pourquoi|comment": S,
            r"qu'est-ce que|qu'est-ce qu'|que signifie|que veut dire|décrivez|expliquez": S,
            r"comment (?:s'appelle|s'appelait|s'appellent|appelle-t-on|nomme-t-on)|quel (?:est|était) le nom": U,
        },
        "which": r"quel|quelle|quels|quelles|lequel|laquelle|en quelle|de quel|de quelle",
        "nouns": {
            D: "année* an ans date* jour* mois siècle* décennie* époque* période*",
            L: "ville* pays état* région* lieu* endroit* continent* fleuve* rivière* village* capitale* "
            "province* département* île* montagne* lac* océan* mer* stade* zone* quartier* port*",
            O: "entreprise* société* sociétés compagnie* organisation* équipe* université* école* institution* "
            "agence* groupe* parti* firme* club* chaîne* journal journaux magazine* éditeur* fabricant* "
            "marque* banque* ligue*",
            P: "personne* homme* femme* joueu* président* auteur* écrivain* acteur* actrice* roi* reine* "
            "empereur* scientifique* artiste* chanteu* chef* entraîneur* compositeur* architecte* inventeur* "
            "fondateu* directeur* pape* ministre* gouverneur* maire* chancelier* philosophe* propriétaire*",
            N: "pourcentage* proportion* fraction* nombre* montant* quantité* population* taille* coût* prix "
            "âge* taux température* longueur* distance* hauteur* poids score* total*",
        },
        "yes_no": r"est-ce que|est-ce qu'|\w+-(?:t-)?(?:il|elle|ils|elles|on)",
    },
    "it": {
        "phrases": {
            r"chi|a chi|di chi": P,
            r"quando|in che anno|in quale anno": D,
            r"dove|da dove": L,
            r"quanti|quante|quanto|quanta": N,
            r"perché|come": S,
            r"come si (?:chiama|chiamava|chiamano)": U,
        },
        "which": r"quale|quali|che|in quale|in che",
        "nouns": {
            D: "anno anni data* giorno* mese* secolo* decennio*",
            L: "città paese* stato* regione* luogo* fiume* capitale* isola*",
            O: "azienda* società compagnia* organizzazione* squadra* università partito* gruppo*",
            P: "persona* uomo donna* giocator* presidente* autore* re regina*",
        },
        "yes_no": r"è|sono|era|erano|c'è|ci sono|esiste|può|ha|hanno",
    },
    "pt": {
        "phrases": {
            r"quem|de quem|a quem": P,
            r"quando|em que ano|em qual ano": D,
            r"onde|aonde|de onde": L,
            r"quantos|quantas|quanto|quanta": N,
            r"por que|porque|por quê|como": S,
            r"como se (?:chama|chamava|chamam)": U,
        },
        "which": r"qual|quais|que|em que",
        "nouns": {
            D: "ano* data* dia* mês meses século* década*",
            L: "cidade* país* países estado* região* lugar* rio* capital* ilha*",
            O: "empresa* companhia* organização* equipe* equipa* universidade* partido* grupo*",
            P: "pessoa* homem* mulher* jogador* presidente* autor* rei rainha*",
        },
        "yes_no": r"é|são|era|eram|foi|foram|existe|há|pode|tem|têm",
    },
    "nl": {
        "phrases": {
            r"wie|wiens|aan wie|door wie": P,
            r"wanneer|in welk jaar": D,
            r"waar|waarheen|vanwaar": L,
            r"hoeveel|hoe (?:lang|oud|ver|groot|hoog|vaak)": N,
            r"waarom|hoe": S,
            r"hoe (?:heet|heette|heten)": U,
        },
        "which": r"welke|welk|wat voor",
        "nouns": {
            D: "jaar jaren datum dag* maand* eeuw* decennium*",
            L: "stad steden land landen staat regio* plaats* rivier* hoofdstad* eiland*",
            O: "bedrijf* onderneming* organisatie* team* ploeg* universiteit* partij* groep* firma*",
            P: "persoon* man vrouw* speler* president* auteur* schrijver* koning*",
        },
        "yes_no": r"is|zijn|was|waren|heeft|hebben|had|kan|kunnen|wordt|werd|bestaat",
    },
    "da": {
        "phrases": {
            r"hvem|hvis": P,
            r"hvornår|hvilket år": D,
            r"hvor|hvorfra|hvorhen": L,
            r"hvor (?:mange|meget|lang|langt|gammel|stor|høj)": N,
            r"hvorfor|hvordan": S,
            r"hvad (?:hedder|hed)": U,
        },
        "which": r"hvilken|hvilket|hvilke",
        "nouns": {
            D: "år dato* dag* måned* århundrede*",
            L: "by byen land* stat* region* sted* flod* hovedstad* ø",
            O: "virksomhed* firma* selskab* organisation* hold* universitet* parti* gruppe*",
            P: "person* mand kvinde* spiller* præsident* forfatter* konge*",
        },
        "yes_no": r"er|var|har|havde|kan|kunne|vil|bliver|blev|findes",
    },
    "no": {
        "phrases": {
            r"hvem|hvis": P,
            r"når|hvilket år": D,
            r"hvor|hvorfra|hvorhen": L,
            r"hvor (?:mange|mye|lang|langt|gammel|stor|høy)": N,
            r"hvorfor|hvordan": S,
            r"hva (?:heter|het)": U,
        },
        "which": r"hvilken|hvilket|hvilke",
        "nouns": {
            D: "år dato* dag* måned* århundre*",
            L: "by byen land* stat* region* sted* elv* hovedstad* øy*",
            O: "selskap* firma* bedrift* organisasjon* lag* universitet* parti* gruppe*",
            P: "person* mann kvinne* spiller* president* forfatter* konge*",
        },
        "yes_no": r"er|var|har|hadde|kan|kunne|vil|blir|ble|finnes",
    },
    "sv": {
        "phrases": {
            r"vem|vems|vilka": P,
            r"när|vilket år": D,
            r"var|varifrån|vart": L,
            r"hur (?:många|mycket|lång|långt|gammal|stor|hög)": N,
            r"varför|hur": S,
            r"vad (?:heter|hette)": U,
            r"var (?:det|den|han|hon|de|ni|du|jag)": Y,
        },
        "which": r"vilken|vilket|vilka",
        "nouns": {
            D: "år* datum dag* månad* århundrade*",
            L: "stad* land* stat* region* plats* flod* huvudstad* ö",
            O: "företag* firma* bolag* organisation* lag* universitet* parti* grupp*",
            P: "person* man kvinna* spelare* president* författare* kung*",
        },
        "yes_no": r"är|har|hade|kan|kunde|blir|blev|finns",
    },
    "fi": {
        "phrases": {
            r"kuka|ketkä|kenen|kenelle|kenet": P,
            r"milloin|minä vuonna|mihin aikaan|koska": D,
            r"missä|mistä|mihin|minne": L,
            r"kuinka (?:monta|paljon|pitkä|vanha|suuri|korkea)|montako|paljonko": N,
            r"miksi|miten|kuinka": S,
            r"^\w+(?:ko|kö)": Y,
        },
        "which": r"mikä|mitkä|minkä|missä|mille|mihin",
        "nouns": {
            D: "vuon* päivä* kuukau* vuosisa*",
            L: "kaupun* maa* maassa valtio* alue* paik* joki* joe* pääkaupun* saar*",
            O: "yhtiö* yritys* yrityk* järjestö* joukkue* yliopisto* puolue* ryhmä*",
            P: "henkilö* mies miehe* nainen naise* pelaaja* presidentti* kirjailija* kuningas*",
        },
        "yes_no": r"onko|oliko|ovatko|olivatko|voiko|onks",
    },
    "hu": {
        "phrases": {
            r"ki|kik|kit|kinek|kié|kivel": P,
            r"mikor|melyik évben|hányban": D,
            r"hol|honnan|hová|hova": L,
            r"hány|mennyi|hányan": N,
            r"miért|hogyan": S,
        },
        "which": r"melyik|milyen|mely",
        "nouns": {
            D: "év* dátum* nap* hónap* század*",
            L: "város* ország* állam* régió* hely* foly* főváros* sziget*",
            O: "cég* vállalat* társaság* szervezet* csapat* egyetem* párt* csoport*",
            P: "személy* ember* férfi* nő* játékos* elnök* szerző* író* király*",
        },
        "yes_no": r"igaz|\w+-e",
    },
    "tr": {
        "phrases": {
            r"kim|kimin|kime|kimi|kimden|kiminle": P,
            r"ne zaman|hangi yıl\w*|kaçında": D,
            r"nerede|nereye|nereden|nerde|neresi\w*": L,
            r"kaç|ne kadar": N,
            r"neden|niçin|niye|nasıl": S,
            r"mı|mi|mu|mü|mıdır|midir|mudur|müdür": Y,
        },
        "which": r"hangi",
        "nouns": {
            D: "yıl* tarih* gün* ay* yüzyıl*",
            L: "şehir* şehr* kent* ülke* devlet* bölge* yer* nehir* başkent* ada*",
            O: "şirket* firma* kuruluş* örgüt* takım* üniversite* parti* grup*",
            P: "kişi* adam kadın* oyuncu* başkan* yazar* kral*",
        },
        "yes_no": r"acaba",
    },
    "ru": {
        "phrases": {
            r"кто|кого|кому|кем|чей|чья|чьё|чьи": P,
            r"когда|в каком году": D,
            r"где|куда|откуда": L,
            r"сколько": N,
            r"почему|зачем|как": S,
            r"\w+ ли": Y,
            r"как (?:называется|назывался|называлась|называют|зовут|звали)": U,
        },
        "which": r"какой|какая|какое|какие|каком|какого|какую|каких|который|которая|которое|которые",
        "nouns": {
            D: "год* дат* день дня месяц* век* десятилет*",
            L: "город* стран* государств* регион* мест* рек* столиц* остров*",
            O: "компани* организаци* команд* университет* парти* групп* фирм*",
            P: "человек* мужчин* женщин* игрок* президент* автор* писател* корол* цар*",
        },
        "yes_no": r"правда ли|разве|неужели",
    },
    "el": {
        "phrases": {
            r"ποιος|ποια|ποιοι|ποιον|ποιου|ποιανού|ποιας": P,
            r"πότε|ποιο έτος|ποια χρονιά": D,
            r"^(?:από )?πού": L,
            r"πόσοι|πόσες|πόσα|πόσο|πόση": N,
            r"γιατί|πώς": S,
        },
        "which": r"ποιο|ποια|ποιος|ποιας|ποιου|ποιες|ποιοι|τι",
        "nouns": {
            D: "έτος* έτη χρονι* ημερομηνί* ημέρα* μήνα* αιών*",
            L: "πόλη* πόλεις χώρα* χώρες κράτ* περιοχ* τόπο* ποταμ* πρωτεύουσ* νησ*",
            O: "εταιρεί* εταιρία* οργανισμ* ομάδα* πανεπιστήμι* κόμμα* όμιλ*",
            P: "πρόσωπ* άνθρωπ* άνδρα* γυναίκα* παίκτη* πρόεδρο* συγγραφέα* βασιλιά*",
        },
        "yes_no": r"είναι|ήταν|υπάρχει|υπήρχε|έχει|είχε|μπορεί",
    },
    "ar": {
        "phrases": {
            r"^من|من هو|من هي|من هم|من الذي|من التي|لمن": P,
            r"متى|في أي عام|في أي سنة|في أي عام": D,
            r"أين|إلى أين|من أين": L,
            r"كم": N,
            r"لماذا|كيف|ما هو|ما هي": S,
        },
        "which": r"أي|أية|ما",
        "nouns": {
            D: "عام سنة تاريخ يوم شهر قرن",
            L: "مدينة دولة بلد منطقة مكان نهر عاصمة جزيرة",
            O: "شركة منظمة فريق جامعة حزب مجموعة",
            P: "شخص رجل امرأة لاعب رئيس مؤلف كاتب ملك",
        },
        "yes_no": r"هل|أليس",
    },
}
