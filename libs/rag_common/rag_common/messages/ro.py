"""The service's own texts in Romanian (comma-below ș and ț; formal address, as a university writes).

Every key of ``en.MESSAGES`` is here (tests/common/test_messages.py checks it).
"""

from __future__ import annotations

MESSAGES: dict[str, str] = {
    "abstain": "Nu am găsit informația în documente.",
    "chitchat": "Bună ziua! Răspund la întrebări despre documentele indexate. Ce doriți să aflați?",
    "thanks": "Cu plăcere! Mă puteți întreba orice altceva despre documente.",
    "out_of_scope": "Îmi pare rău, pot răspunde doar la întrebări despre documentele indexate, iar aceasta nu ține de ele.",
    "meta_no_questions": "Încă nu mi-ați pus nicio întrebare despre documente în această conversație.",
    "meta_questions": "Până acum, în această conversație, ați întrebat:\n{questions}",
    "generator_unavailable": (
        "Serviciul care formulează răspunsurile nu este disponibil acum, iar niciunul dintre primele pasaje nu "
        "se potrivește suficient de bine cu întrebarea pentru a fi citat. Vă rugăm să încercați din nou în curând."
    ),
    "withheld_answer": "Acest răspuns nu mai este afișat: citează un document pe care nu îl mai puteți accesa.",
    "error_unavailable": "Asistentul nu este disponibil acum. Vă rugăm să încercați din nou peste puțin timp.",
    "error_timeout": "Asistentul a răspuns prea încet. Vă rugăm să încercați din nou.",
    "error_busy": "Asistentul este ocupat acum. Vă rugăm să încercați din nou peste puțin timp.",
    "error_internal": "A apărut o eroare în timpul răspunsului. Vă rugăm să încercați din nou.",
    "sources_header": "Surse:",
    "source_page": "pagina {page}",
    "verified_answer": "Răspuns verificat:",
    "sources_disagree": "Sursele nu sunt de acord:",
}
