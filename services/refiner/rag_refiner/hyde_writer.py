"""HyDE: a hypothetical passage answering the query, to search with instead of the bare query.

A passage that answers a question shares more vocabulary (and embedding neighbourhood) with the
document that really answers it than the question does. The passage may be wrong; it is only a
search key, never shown to the user. ``hyde_query`` is the refined query followed by the passage:
the user's own words stay in the search text, so lexical (BM25) matching on them is kept and a
hallucinated passage can only add terms, never remove the ones the user typed.
"""

from __future__ import annotations

import re

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from rag_refiner.llm_call import UnusableOutput
from rag_refiner.prompt_language import write_in

#: Default ``hyde_max_tokens`` (setting ``REFINER_HYDE_MAX_TOKENS``): two or three sentences.
DEFAULT_HYDE_MAX_TOKENS = 96
#: A truncated passage is cut back to its last full sentence if that keeps at least this much.
_MIN_SENTENCE_CUT_CHARS = 40

SYSTEM_INSTRUCTIONS = (
    "Write a short passage, two or three sentences, that answers the question "
    "the way a reference document or manual would. State facts directly. "
    "Do not repeat the question, do not ask anything, do not add a preface."
)


class UnusablePassage(UnusableOutput):
    """The model answered with nothing usable as a passage."""


class HydeWriter:
    """One plain-text call bounded by ``max_tokens``; transport errors propagate."""

    def __init__(self, chat_model: BaseChatModel, *, max_tokens: int):
        self._model = chat_model.bind(max_tokens=max_tokens)

    async def write(self, query: str, language: str | None = None) -> str:
        """The hypothetical passage for ``query``, whitespace-normalised, cut to whole sentences; in
        ``language`` when it is known (a passage in another language shares no words with the documents)."""
        reply = await self._model.ainvoke(build_hyde_messages(query, language))
        content = reply.content if isinstance(reply.content, str) else ""
        passage = _trim_to_sentence(" ".join(content.split()))
        if not passage:
            raise UnusablePassage("model returned an empty passage")
        return passage

    @staticmethod
    def search_text(query: str, passage: str) -> str:
        """What HyDE searches with: the query first (its words keep their lexical weight), then the passage."""
        return f"{query}\n{passage}"


def build_hyde_messages(query: str, language: str | None = None) -> list[BaseMessage]:
    return [SystemMessage(SYSTEM_INSTRUCTIONS + write_in(language, "the passage")), HumanMessage(query.strip())]


def _trim_to_sentence(text: str) -> str:
    # A reply stopped by max_tokens ends mid-sentence; a half sentence adds noise, not meaning.
    if not text or text[-1] in ".!?\"')":
        return text
    ends = [match.end() for match in re.finditer(r"[.!?](?=\s|$)", text)]
    return text[: ends[-1]] if ends and ends[-1] >= _MIN_SENTENCE_CUT_CHARS else text
