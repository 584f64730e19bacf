"""The anchored intent patterns, one table per language (data only; ``intent_rules`` matches them).

Every pattern is written for text as ``intent_rules.normalize`` leaves it: lower-cased, contractions
expanded, diacritics folded ("mulțumesc" and "multumesc" are both ``multumesc``), spaces collapsed.
Each pattern must match a *whole* message; ``intent_rules`` adds the polite tail and trailing
punctuation. A table is a greeting/thanks/farewell/acknowledgement (``chitchat``) list and a
question-about-this-conversation (``meta``) list, plus the polite words that may end either.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PatternTable:
    chitchat: tuple[str, ...]
    meta: tuple[str, ...]
    #: Words that may trail any pattern without changing what is asked ("please", "again").
    polite: str


# English: optional lead-ins that do not change what the message asks for.
_LEAD_EN = r"(?:(?:ok(?:ay)?|great|cool|perfect|awesome|nice|alright|right|well|oh|so|hey|hi|hello)[ ,.!]+)?"

ENGLISH = PatternTable(
    chitchat=(
        # Greetings, optionally addressed: "hi", "hello there", "good morning everyone".
        r"(?:hi+|hello+|hey+|hiya|howdy|yo|greetings|hallo|(?:good )?(?:morning|afternoon|evening)|good day)"
        r"(?:[ ,]+(?:there|all|everyone|everybody|folks|team|friend|mate|assistant|bot))?",
        # Thanks, with or without a lead-in: "thanks a lot", "ok thank you so much", "cheers".
        _LEAD_EN + r"(?:thanks|thank you|thank u|thx|ty|cheers|many thanks|much appreciated|appreciate it)(?:[ ,]+mate)?"
        r"(?: (?:a lot|a bunch|so much|very much|again|anyway|for (?:the|your) (?:help|answer|answers|info|information)))*",
        # Farewells: "bye", "see you later", "good night", "that's all for now".
        _LEAD_EN + r"(?:bye(?: bye)?|goodbye|good bye|see you(?: later| soon| tomorrow)?|see ya|cya|good night|goodnight"
        r"|take care|that is all|that will be all|that is it|i am done)(?: for (?:now|today))?",
        # How are you.
        _LEAD_EN + r"how are you(?: doing)?(?: today)?|how is it going|what is up|how do you do",
        # Bare acknowledgements and compliments: "ok", "got it", "sounds good", "you are the best".
        _LEAD_EN + r"(?:ok(?:ay)?|k|alright|all right|got it|i see|understood|sounds good|makes sense|that makes sense"
        r"|cool|great|perfect|awesome|nice|wow|lol|haha|good to know|no worries|no problem|never mind|nevermind"
        r"|i appreciate (?:it|that|your help)|you are (?:the best|great|awesome|amazing|very helpful|so helpful))",
    ),
    meta=(
        # "What did I ask (you) before?", "what have I asked so far?"
        r"(?:what|which questions?) (?:did|have) i (?:just )?ask(?:ed)?(?: you)?"
        r"(?: (?:before|earlier|previously|so far|first|last|at the (?:start|beginning)|in this (?:chat|conversation)))?",
        # "What was my previous question?", "repeat my last question", "go back to my first question".
        r"(?:(?:what|which) (?:was|were)|repeat|show(?: me)?|remind me(?: of| what)?|go back to|back to) my "
        r"(?:previous|last|earlier|first|original|prior) questions?(?: was)?",
        # "Summarize our conversation", "can you recap the chat so far".
        r"(?:(?:can|could|would) you |please )?(?:summari[sz]e|recap|sum up) (?:our|this|the) (?:conversation|chat|discussion)"
        r"(?: (?:so far|until now|up to now))?",
        # "What have we talked about (so far)?"
        r"what (?:have|did) we (?:talk(?:ed)?|discuss(?:ed)?|cover(?:ed)?)(?: about)?(?: (?:so far|until now|earlier|before))?",
    ),
    polite=r"please|pls|again|now",
)

_LEAD_RO = r"(?:(?:ok(?:ay)?|bine|foarte bine|super|perfect|excelent|minunat|grozav|aha|ah|hei|deci|bun)[ ,.!]+)?"
_SO_FAR_RO = r"(?: (?:inainte|mai devreme|anterior|pana acum|prima data|ultima data|la inceput|azi|astazi))?"

ROMANIAN = PatternTable(
    chitchat=(
        # "bună", "bună ziua", "salut", "servus", "neața", "bună seara tuturor".
        r"(?:buna(?: (?:ziua|dimineata|seara))?|salut(?:are)?|servus|neata|hei|ceau|ciao|sarut mana|sa traiti)"
        r"(?:[ ,]+(?:tuturor|si tie|si voua|domnule|doamna|prietene|asistentule|robotule))?",
        # "mulțumesc", "mersi", "mulțumesc frumos", "vă mulțumesc pentru ajutor".
        _LEAD_RO + r"(?:(?:va |iti |ti )?multumesc|multumim|multumiri|mii de multumiri|mersi|merci|mersic|ms|apreciez)"
        r"(?: (?:mult|frumos|tare|foarte mult|din suflet|inca o data|oricum"
        r"|pentru (?:ajutor|raspuns|raspunsuri|informatii|informatie|tot)))*",
        # "la revedere", "pa", "o zi bună", "ne vedem mai târziu", "asta e tot deocamdată".
        _LEAD_RO + r"(?:la revedere|pa(?: pa)?|bye|ciao|pe curand|pe mai tarziu|ne vedem(?: mai tarziu| curand| maine)?"
        r"|o (?:zi|seara|saptamana) (?:buna|frumoasa)|noapte buna|toate cele bune|numai bine|asta (?:e|este) tot"
        r"|am terminat)(?: (?:pentru (?:moment|azi|acum)|deocamdata))?",
        # "ce faci?", "ce mai faci?", "cum ești?".
        _LEAD_RO + r"(?:ce (?:mai )?(?:faci|faceti|zici)|cum (?:mai )?(?:esti|sunteti|o duci|merge)|ce se aude"
        r"|ce mai e nou)(?: (?:azi|astazi))?",
        # "ok", "am înțeles", "perfect", "bine", "ești cel mai bun".
        _LEAD_RO + r"(?:ok(?:ay)?|oki|bine|e bine|foarte bine|perfect|super|excelent|minunat|grozav|am inteles|inteleg"
        r"|clar|e clar|aha|bun|in regula|e in regula|nicio problema|nu-i nimic|nu conteaza|are sens|ce tare|wow|haha"
        r"|(?:esti|sunteti) (?:cel mai bun|cea mai buna|grozav|minunat|super|de mare ajutor|foarte de ajutor))",
    ),
    meta=(
        # "ce te-am întrebat?", "ce am întrebat înainte?", "ce întrebări am pus până acum?"
        r"ce (?:te-am|ti-am|v-am|am) (?:mai )?intrebat" + _SO_FAR_RO,
        r"ce intrebar(?:e|i) (?:ti-|v-)?am (?:pus|adresat)" + _SO_FAR_RO,
        # "care a fost întrebarea mea anterioară?", "repetă prima mea întrebare", "înapoi la prima întrebare".
        r"(?:care (?:a fost|au fost|era|erau)|repeta(?:-mi)?|arata(?:-mi)?|(?:re)?aminteste-mi"
        r"|(?:intoarce-te|revino|sa revenim|inapoi) la) "
        r"(?:(?:prima|primele|ultima|ultimele|precedenta|anterioara) (?:mea |mele )?intrebar(?:e|i|ea|ile)"
        r"|intrebar(?:ea|ile) (?:mea |mele )?(?:anterioar[ae]|precedent[ae]|dinainte|de dinainte|initial[ae]))",
        # "rezumă conversația noastră", "poți să faci un rezumat al discuției?"
        r"(?:(?:poti|puteti|ai putea|ati putea) (?:sa )?|te rog (?:sa )?|va rog (?:sa )?)?"
        r"(?:rezuma|rezumi|rezumati|recapituleaza|(?:fa|faci|faceti) un rezumat (?:al|la)) "
        r"(?:conversati(?:a|ei)|discuti(?:a|ei)|chat-?ul(?:ui)?)(?: (?:noastr[ae]|asta|aceasta|de pana acum|pana acum))*",
        # "despre ce am vorbit până acum?", "ce am discutat?"
        r"(?:despre )?ce am (?:vorbit|discutat)(?: despre)?" + _SO_FAR_RO,
    ),
    polite=r"va rog|te rog|din nou|acum",
)

_LEAD_DE = r"(?:(?:ok(?:ay)?|super|gut|prima|perfekt|toll|alles klar|ah|oh|na|also)[ ,.!]+)?"

GERMAN = PatternTable(
    chitchat=(
        r"(?:hallo|hi|hey|moin(?: moin)?|servus|gruss gott|guten (?:morgen|tag|abend))"
        r"(?:[ ,]+(?:zusammen|alle|allerseits|leute))?",
        _LEAD_DE + r"(?:danke(?:schon)?|vielen dank|herzlichen dank|besten dank|tausend dank)"
        r"(?: (?:schon|sehr|vielmals|dir|ihnen|euch|fur (?:die|deine|ihre) (?:hilfe|antwort|antworten|info)))*",
        _LEAD_DE + r"(?:tschuss|auf wiedersehen|bis (?:bald|spater|morgen|dann)|gute nacht|ciao|schonen tag(?: noch)?"
        r"|das (?:war|ist) (?:alles|es))",
        _LEAD_DE + r"(?:wie geht(?:s| es)?(?: (?:dir|ihnen|euch))?|wie gehts|was gibt(?:s| es) neues)",
        _LEAD_DE + r"(?:ok(?:ay)?|alles klar|verstanden|ich verstehe|super|prima|klasse|genau|gut|sehr gut|perfekt|toll"
        r"|macht sinn|kein problem|passt)",
    ),
    meta=(
        r"was (?:habe|hab) ich (?:dich |sie )?(?:vorhin |vorher |zuerst |zuletzt |bisher |eben )?gefragt",
        r"was war meine (?:letzte|vorherige|erste) frage",
        r"(?:fasse|fass) (?:unser|das|dieses) (?:gesprach|chat|unterhaltung) zusammen",
        r"woruber haben wir (?:bisher |bis jetzt )?(?:gesprochen|geredet)",
    ),
    polite=r"bitte|nochmal|jetzt",
)

_LEAD_ES = r"(?:(?:ok|vale|genial|perfecto|bien|bueno|ah|oh|pues)[ ,.!]+)?"

SPANISH = PatternTable(
    chitchat=(
        r"(?:hola|buenas|buenos dias|buenas (?:tardes|noches)|saludos)(?:[ ,]+(?:a todos|amigo|equipo))?",
        _LEAD_ES + r"(?:gracias|muchas gracias|mil gracias|muchisimas gracias|te lo agradezco|se lo agradezco)"
        r"(?: (?:de nuevo|otra vez|por (?:la|tu|su) (?:ayuda|respuesta|informacion)))*",
        _LEAD_ES + r"(?:adios|chao|hasta (?:luego|pronto|manana|la vista)|nos vemos|eso es todo)",
        _LEAD_ES + r"(?:como (?:estas|esta usted|te va|va todo)|que tal)",
        _LEAD_ES + r"(?:ok|vale|de acuerdo|entendido|perfecto|genial|claro|bien|muy bien|ya veo|tiene sentido"
        r"|no hay problema|entiendo)",
    ),
    meta=(
        r"que te (?:he )?pregunt(?:e|ado)(?: (?:antes|hasta ahora|al principio))?",
        r"cual (?:fue|era) mi (?:ultima|primera|anterior) pregunta",
        r"(?:resume|resumeme) (?:nuestra|la|esta) conversacion",
        r"de que hemos hablado(?: hasta ahora)?",
    ),
    polite=r"por favor|otra vez|ahora",
)

_LEAD_FR = r"(?:(?:ok|d'accord|super|parfait|bien|ah|oh|bon)[ ,.!]+)?"

FRENCH = PatternTable(
    chitchat=(
        r"(?:bonjour|bonsoir|salut|coucou)(?:[ ,]+(?:a tous|tout le monde|l'equipe))?",
        _LEAD_FR + r"(?:merci|mille mercis|je vous remercie|je te remercie)"
        r"(?: (?:beaucoup|bien|mille fois|infiniment|encore|pour (?:l'aide|votre aide|ton aide|la reponse|l'info)))*",
        _LEAD_FR + r"(?:au revoir|a (?:bientot|plus(?: tard)?|demain)|bonne (?:journee|soiree|nuit)|ciao|c'est tout)",
        _LEAD_FR + r"(?:comment (?:ca va|allez-vous|vas-tu|tu vas|vous allez)|ca va|quoi de neuf)",
        _LEAD_FR + r"(?:ok|d'accord|entendu|compris|j'ai compris|je vois|parfait|super|genial|tres bien|bien"
        r"|pas de probleme|ca marche|c'est clair)",
    ),
    meta=(
        r"qu'est-ce que je (?:t'ai|vous ai) demande(?: (?:avant|tout a l'heure|au debut))?",
        r"quelle (?:etait|a ete) ma (?:derniere|premiere|precedente) question",
        r"(?:resume|resumez) (?:notre|la|cette) conversation",
        r"de quoi (?:avons-nous|on a) parle(?: jusqu'ici)?",
    ),
    polite=r"s'il (?:te|vous) plait|encore|maintenant",
)

#: The shipped tables by ISO 639-1 code; a language without one is matched against all of them.
TABLES: dict[str, PatternTable] = {"en": ENGLISH, "ro": ROMANIAN, "de": GERMAN, "es": SPANISH, "fr": FRENCH}
