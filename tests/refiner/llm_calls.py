"""Count the refiner's model calls with a langchain callback on its real ``ChatOpenAI``."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackHandler
from langchain_openai import ChatOpenAI

from rag_common.llm import build_chat_model
from rag_common.settings import LLMSettings
from rag_refiner.rewrite_prompt import REWRITE_MAX_TOKENS


class CallCounter(AsyncCallbackHandler):
    """Counts chat-model calls started (a refused or hung call counts too), with each call's last message
    (``prompts``) and its system message (``systems``)."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.systems: list[str] = []

    @property
    def calls(self) -> int:
        return len(self.prompts)

    async def on_chat_model_start(self, serialized: dict[str, Any], messages: list[list[Any]], **kwargs: Any) -> None:
        self.prompts.append(str(messages[0][-1].content))
        self.systems.append(str(messages[0][0].content) if messages[0][0].type == "system" else "")


def counted_chat_model(settings: LLMSettings) -> tuple[ChatOpenAI, CallCounter]:
    """The refiner's real chat model for ``settings``, with a callback counting every call it starts."""
    counter = CallCounter()
    model = build_chat_model(settings, max_tokens=REWRITE_MAX_TOKENS)
    return model.model_copy(update={"callbacks": [counter]}), counter
