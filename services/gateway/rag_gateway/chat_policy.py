"""What a chat request gets when it does not say: the one policy object of the chat path.

Every value comes from :class:`GatewaySettings` and, for the languages, :class:`LanguageSettings`
(the ``RAG_*`` settings every service shares) (``ChatPolicy.of``), the one source of every default;
the dataclasses here take none of their own. The chat service reads the request defaults
(``top_k``, HyDE), the chat graph the rest (history window, search depth and mode, which stored
vectors travel on, the canned replies, how the question's language is named and its texts' language).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from rag_common.history import HistoryWindow
from rag_common.messages import LanguagePolicy, message
from rag_common.schemas import SearchMode
from rag_common.settings import LanguageSettings
from rag_gateway.settings import GatewaySettings

#: The replies of the branches without an LLM, by their catalog key.
Reply = Literal["chitchat", "thanks", "out_of_scope"]


@dataclass(frozen=True)
class Replies:
    """The fixed texts of the branches that need no LLM: the catalog's (``rag_common.messages``) in the
    question's language, unless ``GATEWAY_*_REPLY`` sets one (None: not set)."""

    chitchat: str | None
    thanks: str | None
    out_of_scope: str | None

    def text(self, reply: Reply, language: str) -> str:
        """``reply`` in ``language``: the setting's text when set, else the catalog's."""
        override = {"chitchat": self.chitchat, "thanks": self.thanks, "out_of_scope": self.out_of_scope}[reply]
        return message(reply, language) if override is None else override


@dataclass(frozen=True)
class ChatPolicy:
    #: Passages given to the generator when the request has no ``top_k``.
    default_top_k: int
    #: Search with the refiner's hypothetical answer when the request does not say (``hyde`` null).
    hyde_default: bool
    #: What the refiner and generator see of the conversation (cut once, in the graph).
    history: HistoryWindow
    #: Candidates the retriever is asked for, for the reranker to choose from (see :meth:`search_depth`).
    retrieval_candidates: int
    search_mode: SearchMode
    #: Ask the retriever for stored embeddings and hand them to the reranker (diffusion and gMMR
    #: need them; otherwise the reranker re-embeds every candidate).
    pass_embeddings: bool
    #: Ask the retriever for the candidates' stored sentence vectors and hand them to the generator
    #: (not to the reranker): answering then embeds no sentence.
    pass_sentence_vectors: bool
    replies: Replies
    #: How a question's language is named (once per turn) and which language the service's texts take.
    language: LanguagePolicy

    @classmethod
    def of(cls, settings: GatewaySettings, language_settings: LanguageSettings | None = None) -> ChatPolicy:
        """The policy of ``GATEWAY_DEFAULT_TOP_K``, ``_HYDE_DEFAULT``, the history window, the search
        depth and mode, the stored vectors passed on, the ``*_REPLY`` texts and the languages
        (``language_settings``, else the ``RAG_*`` environment's)."""
        return cls(
            default_top_k=settings.default_top_k,
            hyde_default=settings.hyde_default,
            history=settings.history_window(),
            retrieval_candidates=settings.retrieval_candidates,
            search_mode=settings.search_mode,
            pass_embeddings=settings.pass_embeddings,
            pass_sentence_vectors=settings.pass_sentence_vectors,
            replies=Replies(
                chitchat=settings.chitchat_reply,
                thanks=settings.thanks_reply,
                out_of_scope=settings.out_of_scope_reply,
            ),
            language=LanguagePolicy.of(language_settings),
        )

    def top_k(self, requested: int | None) -> int:
        """Passages the answer is written from: the request's, or the default."""
        return requested or self.default_top_k

    def hyde(self, requested: bool | None) -> bool:
        """Whether the refiner writes a hypothetical answer to search with: the request's say, or the default."""
        return self.hyde_default if requested is None else requested

    def search_depth(self, top_k: int) -> int:
        """The retriever's ``top_k`` when ``top_k`` passages are handed on: the candidate depth, or more
        if more passages are wanted. The one rule: what ``/v1/chat`` sends and what the evaluation's
        ``default`` run measures (``ragctl eval --run default``)."""
        return max(self.retrieval_candidates, top_k)
