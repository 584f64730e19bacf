"""The service's own texts in English: the catalog's reference, every key defined (``rag_common.messages``).

Placeholders in braces are filled by ``message(key, language, **fields)``.
"""

from __future__ import annotations

MESSAGES: dict[str, str] = {
    # The generator's answer whenever it abstains, whatever the reason (abstain_reason says which).
    "abstain": "I could not find this in the documents.",
    # The gateway's canned replies (intent chitchat, a thank-you, intent out_of_scope).
    "chitchat": "Hello! I answer questions about the indexed documents. What would you like to know?",
    "thanks": "You're welcome! Ask me anything else about the documents.",
    "out_of_scope": "Sorry, I can only answer questions about the indexed documents, and that is outside them.",
    # The meta branch ("what did I ask?"): the user's earlier questions, one per line after the heading.
    "meta_no_questions": "You haven't asked me anything about the documents yet in this conversation.",
    "meta_questions": "So far in this conversation you asked:\n{questions}",
    # The gateway's stand-in when the generator is down and no top passage matches the question.
    "generator_unavailable": (
        "The answer service is unavailable right now and none of the top passages matches the question "
        "closely enough to quote. Please try again shortly."
    ),
    # A stored answer that cites a document the caller may no longer read.
    "withheld_answer": "This answer is withheld: it cited a document you can no longer read.",
    # What a user is told when the chat request fails (the error event's ``message``; ``error`` keeps the
    # operator's text): a service down, a service too slow, the language model's queue full, anything else.
    "error_unavailable": "The assistant is unavailable right now. Please try again in a moment.",
    "error_timeout": "The assistant took too long to answer. Please try again.",
    "error_busy": "The assistant is busy right now. Please try again in a moment.",
    "error_internal": "Something went wrong while answering. Please try again.",
    # The OpenAI-compatible endpoint writes the cited sources under the answer, as text.
    "sources_header": "Sources:",
    "source_page": "page {page}",
    # A streamed answer the generator revised after streaming (the verified one follows this line).
    "verified_answer": "Verified answer:",
    # The answer's lead-in when the sources give different values of what was asked; each value and its
    # citations follow ("The sources disagree: Facebook [1]; Apple [2].").
    "sources_disagree": "The sources disagree:",
}
