"""What a stored conversation shows of the documents: whatever the caller may read *now*.

A turn keeps the answer and citations it was given, but the documents behind them may since have
changed their ACL or been deleted. Whenever stored turns are shown again (``GET
/v1/conversations/{id}``) or handed to the models as the history of a follow-up, each turn that cites
a document the caller may no longer read (asked of the retriever: ``DocumentService.readable``) has
its answer replaced by the withheld notice and its citations (with the answer span and conflict that
quote them) dropped (docs/security.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from rag_common.identity import Identity
from rag_common.messages import message
from rag_gateway.chat_models import SourceChunk, Turn
from rag_gateway.conversation_store import ConversationStore
from rag_gateway.document_service import DocumentService


class ConversationAccess:
    def __init__(
        self, store: ConversationStore, documents: DocumentService, withheld_answer: str | None,
        default_language: str,
    ) -> None:
        """``withheld_answer``: ``GATEWAY_WITHHELD_ANSWER_REPLY`` (None: the catalog's text in the turn's
        language, else ``default_language``)."""
        self._store = store
        self._documents = documents
        self._withheld_answer = withheld_answer
        self._default_language = default_language

    def withheld_answer(self, language: str | None) -> str:
        if self._withheld_answer is not None:
            return self._withheld_answer
        return message("withheld_answer", language or self._default_language)

    async def visible(self, identity: Identity, conversation: str, turns: Sequence[Turn]) -> list[Turn]:
        """``turns`` of the stored ``conversation`` as ``identity`` may see them now. Fails closed: a
        retriever that cannot answer raises ``DependencyFailed``."""
        if not any(turn.citations for turn in turns):
            return list(turns)
        sources = await self._store.sources(conversation)
        readable = await self._documents.readable(identity, {source.doc_id for source in sources.values()})
        return [self._shown(turn, sources, readable) for turn in turns]

    def withheld(self, turns: Sequence[Turn]) -> list[Turn]:
        """``turns`` with every answer that cites anything withheld: what is left to show when the
        retriever cannot say what the caller may read."""
        return [self._withhold(turn) if turn.citations else turn for turn in turns]

    async def readable_source(self, identity: Identity, source: SourceChunk) -> bool:
        return source.doc_id in await self._documents.readable(identity, {source.doc_id})

    def _shown(self, turn: Turn, sources: dict[str, SourceChunk], readable: set[str]) -> Turn:
        cited = {citation.chunk_id for citation in turn.citations}
        if all(chunk_id in sources and sources[chunk_id].doc_id in readable for chunk_id in cited):
            return turn
        return self._withhold(turn)

    def _withhold(self, turn: Turn) -> Turn:
        # The span and the conflict quote the documents too: they go with the citations.
        update = {"answer": self.withheld_answer(turn.language), "citations": [], "answer_span": None, "conflict": None}
        return turn.model_copy(update=update)
