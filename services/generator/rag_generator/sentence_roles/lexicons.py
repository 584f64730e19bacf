"""Per-language word lists the sentence roles read: interrogative openers and navigation phrases.

Provenance: compiled for this project from each language's interrogative words (grammars) and from
the calls to action, consent banners, share bars and page chrome that web extraction leaves in news
and FAQ pages (trafilatura drops most, not all: "Check out the medal count.", "Citește mai mult").
No kept package lists either for sentences: jusText's boilerplate rules work on whole HTML blocks
(its stop lists are used for the stop-word density, :mod:`rag_generator.sentence_roles.features`).

Lists are data, one line per kind, whitespace-separated entries and ``|`` between multi-word phrases:

- ``interrogatives``: words that open a question written without a question mark (a FAQ heading
  "How do I reset my password"). Matched lowercased, *with* diacritics: Spanish "cómo" asks, "como"
  compares; French "où" asks, "ou" is "or". Multi-word openers ("de ce", "por que") are ``|``-separated.
- ``prefix``: a sentence that starts with one of these is navigation ("Read more about ...").
- ``whole``: a sentence that is only one of these is navigation ("Home", "Share", "Menu"); these
  are ordinary words at the start of a real sentence ("Home prices rose ...").
- ``contains``: boilerplate wherever it stands ("all rights reserved", "we use cookies").

Navigation phrases are matched with diacritics folded (:func:`rag_common.languages.fold_diacritics`),
lowercased, whitespace collapsed: a banner typed without diacritics is still a banner.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from rag_common.languages.text import fold_diacritics, normalise_text

__all__ = ["Lexicon", "lexicon"]

#: Interrogative openers of every supported language (``|`` between entries).
_INTERROGATIVES: dict[str, str] = {
    "en": "what|who|whom|whose|which|when|where|why|how|is|are|was|were|do|does|did|can|could|will|would|"
    "should|shall|may|might|has|have|had|isn't|aren't|don't|doesn't|didn't|can't|won't",
    "ro": "ce|cine|când|cînd|unde|de ce|cum|cât|câtă|câți|câte|care|oare|cui|pe cine|al cui|a cui|ai cui|ale cui",
    "de": "was|wer|wen|wem|wessen|wann|wo|woher|wohin|warum|weshalb|wieso|wie|welche|welcher|welches|welchen|"
    "welchem|ist|sind|war|waren|hat|haben|kann|können|wird|werden|gibt es",
    "es": "qué|quién|quiénes|cuándo|dónde|adónde|por qué|cómo|cuál|cuáles|cuánto|cuánta|cuántos|cuántas",
    "fr": "qu'est-ce|qu’est-ce|est-ce|quel|quelle|quels|quelles|qui|quoi|quand|où|pourquoi|comment|combien|"
    "lequel|laquelle|lesquels|lesquelles",
    "it": "che cosa|cosa|chi|quando|dove|perché|come|quale|quali|quanto|quanta|quanti|quante",
    "pt": "o que|o quê|quem|quando|onde|por que|por quê|como|qual|quais|quanto|quanta|quantos|quantas",
    "nl": "wat|wie|wanneer|waar|waarom|hoe|welke|welk|hoeveel|is|zijn|was|waren|heeft|hebben|kan|kunnen|wordt|worden",
    "da": "hvad|hvem|hvornår|hvor|hvorfor|hvordan|hvilken|hvilket|hvilke",
    "no": "hva|hvem|når|hvor|hvorfor|hvordan|hvilken|hvilket|hvilke",
    "sv": "vad|vem|vilka|när|var|varför|hur|vilken|vilket",
    "fi": "mikä|mitä|kuka|ketkä|milloin|missä|mistä|mihin|miksi|miten|kuinka|paljonko",
    "hu": "mi|mit|ki|kit|mikor|hol|honnan|hová|miért|hogyan|hány|mennyi|melyik",
    "tr": "ne|kim|ne zaman|nerede|neden|niçin|nasıl|hangi|kaç",
    "el": "τι|ποιος|ποια|ποιο|ποιοι|ποιες|πότε|πού|γιατί|πώς|πόσο|πόσα|πόσοι|πόσες|μήπως",
    "ru": "что|кто|когда|где|почему|зачем|как|какой|какая|какое|какие|сколько|чей|чья|чьё|чьи",
    "ar": "ما|ماذا|من|متى|أين|لماذا|كيف|كم|هل|أي",
}

#: Openers that make a title rather than a question ("How to reset a password").
_TITLE_OPENERS: dict[str, str] = {
    "en": "how to|what to|when to|where to|who to|which to|why to",
    "ro": "cum să|ce să|când să|unde să",
    "de": "wie man|was tun",
    "it": "come fare",
    "pt": "como fazer",
    "nl": "hoe je",
}

#: ``code: (prefix, whole, contains)``: navigation phrases, ``|``-separated (see the module docstring).
_NAVIGATION: dict[str, tuple[str, str, str]] = {
    "en": (
        "check out|read more|read the full|read next|read also|click here|click to|tap here|sign up|sign in|"
        "log in|subscribe|share this|share on|share:|follow us|like us on|see also|see more|see all|view all|"
        "view more|show more|load more|learn more|find out more|continue reading|keep reading|related articles|"
        "related stories|related:|more from|more on this|recommended for you|you may also like|"
        "you might also like|advertisement|sponsored content|skip to|back to top|jump to|download the app|"
        "download our|get the app|accept all|accept cookies|manage cookies|cookie settings|cookie policy|"
        "privacy policy|terms of use|terms and conditions|terms of service|next article|previous article|"
        "next story|previous story|next page|previous page|watch:|watch live|watch now|listen:|listen now|"
        "photo:|image:|credit:|photograph:|join now|join our|get our newsletter|sign up for|don't miss|"
        "trending now|most read|most popular|top stories|latest news|live updates|leave a comment|"
        "post a comment|print this|email this|table of contents|please enable javascript|"
        "your browser does not support|subscribe now|buy now|shop now|order now|book now|get started|"
        "try it free|contact us|about us|go to top|open in app|listen to this article|save for later|"
        "updated:|published:|last updated|you are here|for more information, see|send this page",
        "home|menu|search|contents|comments|reply|share|print|email|login|logout|next|previous|back|more|"
        "news|sport|sports|weather|video|videos|photos|gallery|newsletter|advertisement|medal tracker|"
        "medal count|schedule|results|live|faq|help|top|tweet|facebook|twitter|instagram|linkedin|whatsapp",
        "all rights reserved|click here|we use cookies|uses cookies|subscribe to our newsletter|"
        "sign up for our newsletter|enable javascript|whether or not you are a human visitor",
    ),
    "ro": (
        "citește mai mult|citește și|citeste si|vezi și|vezi si|vezi mai mult|vezi toate|vezi galeria|"
        "click aici|apasă aici|dă click|abonează-te|aboneaza-te|înscrie-te|autentifică-te|conectează-te|"
        "distribuie|urmărește-ne|urmareste-ne|articole similare|articole recomandate|știri similare|"
        "mai multe știri|mai multe din|ultimele știri|cele mai citite|publicitate|descarcă aplicația|"
        "acceptă toate|accept cookie|politica de confidențialitate|politica de cookie|termeni și condiții|"
        "articolul următor|articolul anterior|pagina următoare|pagina anterioară|înapoi sus|"
        "foto:|sursa foto|video:|urmărește live|lasă un comentariu|adaugă un comentariu|"
        "abonează-te la newsletter|continuă lectura|află mai multe|despre noi|"
        "actualizat:|publicat:|ultima actualizare|sunteți aici|vă aflați aici",
        "acasă|acasa|meniu|căutare|cautare|comentarii|răspunde|distribuie|printează|email|autentificare|"
        "următorul|anteriorul|înapoi|mai mult|știri|sport|vremea|video|foto|galerie|newsletter|"
        "publicitate|clasament|rezultate|program|live|contact|sus",
        "toate drepturile rezervate|folosim cookie|utilizează cookie|folosește cookie|abonează-te la newsletter",
    ),
    "de": (
        "mehr lesen|weiterlesen|mehr erfahren|mehr dazu|mehr zum thema|lesen sie auch|lesen sie mehr|"
        "hier klicken|klicken sie hier|jetzt anmelden|jetzt registrieren|jetzt abonnieren|"
        "teilen sie|folgen sie uns|siehe auch|alle anzeigen|mehr anzeigen|mehr laden|"
        "ähnliche artikel|verwandte artikel|das könnte sie auch interessieren|anzeige:|werbung:|"
        "zum inhalt springen|springe zum inhalt|nach oben|zurück nach oben|app herunterladen|"
        "alle akzeptieren|cookies akzeptieren|cookie-einstellungen|datenschutzerklärung|"
        "nutzungsbedingungen|nächster artikel|vorheriger artikel|nächste seite|vorherige seite|"
        "foto:|bild:|quelle:|video:|jetzt ansehen|live verfolgen|kommentar schreiben|"
        "artikel drucken|artikel teilen|newsletter abonnieren|über uns|aktualisiert:|"
        "veröffentlicht:|zuletzt aktualisiert|sie sind hier|sie befinden sich hier",
        "startseite|home|menü|suche|inhalt|kommentare|antworten|teilen|drucken|e-mail|anmelden|abmelden|"
        "weiter|zurück|mehr|nachrichten|sport|wetter|video|videos|fotos|bildergalerie|newsletter|anzeige|"
        "medaillenspiegel|ergebnisse|spielplan|live|kontakt|impressum|registrieren|abonnieren|einloggen|"
        "datenschutz|werbung|empfohlen",
        "alle rechte vorbehalten|wir verwenden cookies|verwendet cookies|nutzt cookies|"
        "newsletter abonnieren|javascript aktivieren",
    ),
    "es": (
        "leer más|lee más|leer también|lee también|haz clic|haga clic|pulsa aquí|clic aquí|regístrate|"
        "suscríbete|inicia sesión|iniciar sesión|compartir|comparte|síguenos|ver también|ver más|ver todo|"
        "ver todos|mostrar más|cargar más|más información|saber más|seguir leyendo|continuar leyendo|"
        "noticias relacionadas|artículos relacionados|te puede interesar|también te puede interesar|"
        "recomendado para ti|publicidad|saltar al contenido|volver arriba|ir arriba|descarga la app|"
        "descargar la aplicación|aceptar todas|aceptar cookies|configuración de cookies|política de privacidad|"
        "política de cookies|aviso legal|términos y condiciones|siguiente artículo|artículo anterior|"
        "página siguiente|página anterior|foto:|imagen:|fuente:|vídeo:|video:|ver en directo|en directo:|"
        "deja un comentario|escribe un comentario|enviar por correo|lo más leído|últimas noticias|"
        "quiénes somos|actualizado:|publicado:|última actualización|usted está aquí|está aquí:",
        "inicio|portada|menú|buscar|contenido|comentarios|responder|compartir|imprimir|correo|entrar|salir|"
        "siguiente|anterior|volver|más|noticias|deportes|tiempo|vídeo|vídeos|fotos|galería|boletín|"
        "publicidad|medallero|resultados|calendario|directo|contacto",
        "todos los derechos reservados|utilizamos cookies|usamos cookies|utiliza cookies|usa cookies|"
        "suscríbete a nuestro boletín|habilita javascript",
    ),
    "fr": (
        "lire la suite|lire plus|lire aussi|à lire aussi|en savoir plus|cliquez ici|cliquer ici|inscrivez-vous|"
        "s'inscrire|abonnez-vous|s'abonner|se connecter|connectez-vous|partagez|suivez-nous|"
        "voir aussi|voir plus|voir tout|voir tous|afficher plus|charger plus|continuer la lecture|"
        "articles similaires|articles liés|sur le même sujet|à voir aussi|recommandé pour vous|"
        "vous aimerez aussi|publicité|aller au contenu|retour en haut|haut de page|télécharger l'application|"
        "tout accepter|accepter les cookies|paramètres des cookies|gérer les cookies|politique de confidentialité|"
        "mentions légales|conditions générales|article suivant|article précédent|page suivante|page précédente|"
        "photo :|photo:|crédit photo|image :|source :|vidéo :|vidéo:|regarder en direct|en direct :|"
        "laisser un commentaire|ajouter un commentaire|envoyer par e-mail|les plus lus|"
        "dernières actualités|à la une|qui sommes-nous|mis à jour|publié le|vous êtes ici",
        "accueil|menu|rechercher|recherche|sommaire|commentaires|répondre|partager|imprimer|e-mail|connexion|"
        "déconnexion|suivant|précédent|retour|plus|actualités|sport|sports|météo|vidéo|vidéos|photos|"
        "galerie|newsletter|publicité|tableau des médailles|résultats|programme|direct|contact",
        "tous droits réservés|nous utilisons des cookies|utilise des cookies|abonnez-vous à notre newsletter|"
        "activer javascript",
    ),
    "it": (
        "leggi di più|leggi anche|continua a leggere|clicca qui|fai clic|registrati|iscriviti|abbonati|"
        "accedi|condividi|seguici|vedi anche|vedi tutto|vedi tutti|mostra di più|carica altri|scopri di più|"
        "ulteriori informazioni|articoli correlati|potrebbe interessarti|ti potrebbe interessare|pubblicità|"
        "vai al contenuto|torna su|torna all'inizio|scarica l'app|accetta tutti|accetta i cookie|"
        "impostazioni cookie|informativa sulla privacy|privacy policy|cookie policy|termini e condizioni|"
        "articolo successivo|articolo precedente|pagina successiva|pagina precedente|foto:|immagine:|fonte:|"
        "video:|guarda in diretta|lascia un commento|scrivi un commento|invia per email|i più letti|"
        "ultime notizie|chi siamo|aggiornato:|pubblicato:|ultimo aggiornamento|ti trovi in|sei qui",
        "home|menu|cerca|ricerca|sommario|commenti|rispondi|condividi|stampa|email|accedi|esci|successivo|"
        "precedente|indietro|altro|notizie|sport|meteo|video|foto|galleria|newsletter|pubblicità|"
        "medagliere|risultati|calendario|diretta|contatti",
        "tutti i diritti riservati|utilizziamo i cookie|usiamo i cookie|utilizza cookie|usa i cookie|"
        "iscriviti alla newsletter|abilita javascript",
    ),
    "pt": (
        "leia mais|ler mais|leia também|saiba mais|clique aqui|toque aqui|cadastre-se|registe-se|registre-se|"
        "inscreva-se|assine já|subscreva|iniciar sessão|compartilhar|partilhar|compartilhe|siga-nos|"
        "veja também|ver também|veja mais|ver mais|ver todos|mostrar mais|carregar mais|continue lendo|"
        "continuar a ler|notícias relacionadas|artigos relacionados|você também pode gostar|"
        "recomendado para você|publicidade|ir para o conteúdo|voltar ao topo|baixe o app|descarregue a app|"
        "aceitar todos|aceitar cookies|definições de cookies|configurações de cookies|política de privacidade|"
        "política de cookies|termos de uso|termos e condições|próximo artigo|artigo anterior|próxima página|"
        "página anterior|foto:|imagem:|fonte:|vídeo:|assista ao vivo|ao vivo:|deixe um comentário|"
        "escreva um comentário|enviar por e-mail|mais lidas|últimas notícias|"
        "quem somos|atualizado:|publicado:|última atualização|você está aqui|está aqui:",
        "início|inicio|página inicial|menu|buscar|pesquisar|conteúdo|comentários|responder|compartilhar|"
        "partilhar|imprimir|e-mail|entrar|sair|próximo|anterior|voltar|mais|notícias|esportes|desporto|"
        "tempo|vídeo|vídeos|fotos|galeria|newsletter|publicidade|quadro de medalhas|resultados|"
        "calendário|ao vivo|contato|contacto",
        "todos os direitos reservados|utilizamos cookies|usamos cookies|utiliza cookies|usa cookies|"
        "assine nossa newsletter|ative o javascript",
    ),
    "nl": (
        "lees meer|lees verder|lees ook|meer lezen|klik hier|meld je aan|schrijf je in|"
        "log in|deel dit|volg ons|zie ook|bekijk ook|bekijk meer|bekijk alles|toon meer|"
        "meer laden|meer informatie|meer weten|verder lezen|gerelateerde artikelen|gerelateerd nieuws|"
        "aanbevolen voor jou|dit vind je misschien ook leuk|advertentie|ga naar inhoud|naar boven|"
        "terug naar boven|download de app|alles accepteren|cookies accepteren|cookie-instellingen|"
        "cookie instellingen|privacybeleid|cookiebeleid|algemene voorwaarden|gebruiksvoorwaarden|"
        "volgend artikel|vorig artikel|volgende pagina|vorige pagina|foto:|beeld:|bron:|video:|kijk live|"
        "laat een reactie achter|plaats een reactie|meest gelezen|laatste nieuws|"
        "over ons|bijgewerkt:|gepubliceerd:|laatst bijgewerkt|u bent hier|je bent hier",
        "home|menu|zoeken|inhoud|reacties|reageren|delen|printen|afdrukken|e-mail|inloggen|uitloggen|"
        "volgende|vorige|terug|meer|nieuws|sport|weer|video|video's|foto's|fotogalerij|nieuwsbrief|"
        "advertentie|medaillespiegel|uitslagen|programma|live|contact",
        "alle rechten voorbehouden|wij gebruiken cookies|we gebruiken cookies|gebruikt cookies|"
        "schrijf je in voor de nieuwsbrief|javascript inschakelen",
    ),
}


#: Boilerplate in any language: a copyright line.
_EVERY_LANGUAGE_CONTAINS = "©"


def _key(text: str) -> str:
    """The matching form of a navigation phrase: NFC, folded, lowercased, whitespace collapsed."""
    return " ".join(fold_diacritics(normalise_text(text)).lower().split())


def _entries(data: str) -> tuple[str, ...]:
    return tuple(entry.strip() for entry in data.split("|") if entry.strip())


def _opening(phrases: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for "the text opens with one of ``phrases`` as whole words" ("read more" opens
    "read more »", not "read mores"); longest first, so the longest phrase is the one matched."""
    if not phrases:
        return re.compile(r"(?!)")
    ordered = sorted(phrases, key=len, reverse=True)
    alternatives = [re.escape(p) + (r"(?![^\W_])" if p[-1].isalnum() else "") for p in ordered]
    return re.compile("(?:" + "|".join(alternatives) + ")")


@dataclass(frozen=True, slots=True)
class Lexicon:
    """One language's lists, ready for matching (interrogatives lowercased as written, the rest keyed),
    with the patterns that match them (one regular expression per list: a few µs per sentence)."""

    interrogatives: tuple[str, ...]
    title_openers: tuple[str, ...]
    prefix: tuple[str, ...]
    whole: frozenset[str]
    contains: tuple[str, ...]
    opens_interrogative: re.Pattern[str] = field(init=False)
    opens_title: re.Pattern[str] = field(init=False)
    opens_navigation: re.Pattern[str] = field(init=False)
    holds_navigation: re.Pattern[str] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "opens_interrogative", _opening(self.interrogatives))
        object.__setattr__(self, "opens_title", _opening(self.title_openers))
        object.__setattr__(self, "opens_navigation", _opening(self.prefix))
        object.__setattr__(self, "holds_navigation", re.compile("|".join(map(re.escape, self.contains))))


@cache
def lexicon(code: str | None) -> Lexicon:
    """The lists of ``code``; None means English's (the project's rule when a text's language is
    unknown); a supported language without navigation lists gets English's navigation phrases
    (English chrome is common on any site) and its own interrogatives."""
    code = code or "en"
    prefix, whole, contains = _NAVIGATION.get(code, _NAVIGATION["en"])
    return Lexicon(
        interrogatives=tuple(normalise_text(e).lower() for e in _entries(_INTERROGATIVES.get(code, ""))),
        title_openers=tuple(normalise_text(e).lower() for e in _entries(_TITLE_OPENERS.get(code, ""))),
        prefix=tuple(_key(e) for e in _entries(prefix)),
        whole=frozenset(_key(e) for e in _entries(whole)),
        contains=tuple(_key(e) for e in _entries(f"{contains}|{_EVERY_LANGUAGE_CONTAINS}")),
    )
