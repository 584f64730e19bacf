"""What a chat request gets when it does not say: the one policy object of the chat path.

Every value comes from :class:`GatewaySettings` (``ChatPolicy.of``), the one source of every
default; the dataclasses here take none of their own. The chat service reads the request
defaults (``top_k``, HyDE), the chat graph the rest (history window, search depth and mode, which
stored vectors travel on, the canned replies).
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_common.history import HistoryWindow
from rag_common.schemas import SearchMode
from rag_gateway.settings import GatewaySettings


@dataclass(frozen=True)
class Replies:
    """The fixed texts of the branches that need no LLM (``GATEWAY_*_REPLY``)."""

    chitchat: str
    thanks: str
    out_of_scope: str


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

    @classmethod
    def of(cls, settings: GatewaySettings) -> ChatPolicy:
        """The policy of ``GATEWAY_DEFAULT_TOP_K``, ``_HYDE_DEFAULT``, the history window, the search
        depth and mode, the stored vectors passed on and the ``*_REPLY`` texts."""
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
