"""``POST /v1/chat/completions`` in the OpenAI wire format, so existing chat UIs and SDKs work.

Stateless, as the OpenAI API is: the conversation so far comes in ``messages`` and nothing is
stored. User/assistant pairs become the history (cut to the same turn and token bounds as
``/v1/chat``); the last message must be the user's question. ``system`` and ``developer``
messages are ignored: the generator's own grounded prompt decides how to answer, and a client's
system prompt must not override "answer only from the sources".

The answer is the message content with a ``Sources:`` list appended (``[n] title (source, page
p)``), and the structured citations are in an extra top-level ``citations`` field (and, when the
sources disagree, the disagreement in ``conflict``; the answer text already names every side). With
``stream: true`` the response is ``chat.completion.chunk`` objects as data-only SSE lines ending
with ``data: [DONE]``; the sources and the ``citations`` (and ``conflict``) fields come with the last chunk. The
generator verifies the answer after streaming it; if verification changed the text, the verified
answer follows the streamed draft under a separator (a stream cannot take back what it sent).
A failure after the stream started is sent as ``data: {"error": {...}}``, which the OpenAI SDKs
raise as an APIError.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi.sse import format_sse_event
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from rag_common.errors import RagError
from rag_common.messages import SHIPPED, message
from rag_common.schemas import MAX_MESSAGE_CHARS, MAX_TOP_K, NOT_BLANK, Citation, JsonInt
from rag_common.service import status_for
from rag_gateway.chat_models import ChatResponse, Turn
from rag_gateway.chat_service import StreamEvent

def revised_separator(language: str | None) -> str:
    """What separates a streamed answer from the verified one that replaced it, in ``language``."""
    return "\n\n---\n" + message("verified_answer", language) + "\n"


SOURCES_HEADER = message("sources_header", None)
REVISED_SEPARATOR = revised_separator(None)


class ContentPart(BaseModel):
    """A text part of a message (images and audio are not read: the answer comes from the documents)."""

    model_config = ConfigDict(extra="ignore", strict=True)

    type: Literal["text"]
    text: str


def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("a user message is blank")
    return text


#: What a user message says: a non-blank string, or text parts (at least one).
QuestionContent = (
    Annotated[str, AfterValidator(_not_blank), Field(min_length=1, json_schema_extra=NOT_BLANK)]
    | Annotated[list[ContentPart], Field(min_length=1)]
)


class _Message(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    content: str | list[ContentPart] | None = None

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class UserMessage(_Message):
    role: Literal["user"]
    content: QuestionContent


class InstructionMessage(_Message):
    """Accepted for compatibility and ignored (see the module docstring)."""

    role: Literal["system", "developer"]
    content: str | list[ContentPart]


class AssistantMessage(_Message):
    role: Literal["assistant"]
    content: str | list[ContentPart] | None = None


ChatMessage = Annotated[UserMessage | InstructionMessage | AssistantMessage, Field(discriminator="role")]


class ChatCompletionRequest(BaseModel):
    """The fields the gateway uses; any other OpenAI parameter (temperature, max_tokens...) is ignored.

    Two rules JSON Schema cannot state are checked after it (422): the last message is the user's
    question, and its text is not blank and at most 8000 characters."""

    model_config = ConfigDict(extra="ignore", strict=True)

    model: str = Field(min_length=1, max_length=256)
    messages: list[ChatMessage] = Field(min_length=1, max_length=1000)
    stream: bool = False
    #: Extensions: passages given to the generator, and HyDE (None = the gateway defaults).
    top_k: JsonInt | None = Field(default=None, ge=1, le=MAX_TOP_K)
    hyde: bool | None = None

    @model_validator(mode="after")
    def last_message_is_a_user_question(self) -> ChatCompletionRequest:
        last = self.messages[-1]
        if last.role != "user":
            raise ValueError(f"the last message must have role 'user', not {last.role!r}")
        text = last.text
        if not text.strip():
            raise ValueError("the last user message is blank")
        if len(text) > MAX_MESSAGE_CHARS:
            raise ValueError(f"the last user message is longer than {MAX_MESSAGE_CHARS} characters")
        return self

    @property
    def question(self) -> str:
        return self.messages[-1].text


def strip_sources(content: str) -> str:
    """An earlier answer of this endpoint without its appended sources list (not useful as history)."""
    for language in SHIPPED:  # the answer was in one of them; its header says which
        head, sep, _ = content.rpartition("\n\n" + message("sources_header", language) + "\n")
        if sep:
            return head
    return content


def transcript(messages: list[ChatMessage]) -> list[Turn]:
    """The conversation before the last message as turns: each user message with the assistant
    reply that follows it (an empty answer when none does); system/developer messages skipped."""
    turns: list[Turn] = []
    pending: str | None = None
    for message in messages[:-1]:
        if message.role == "user":
            if pending is not None:
                turns.append(_turn(pending, ""))
            pending = message.text
        elif message.role == "assistant" and pending is not None:
            turns.append(_turn(pending, strip_sources(message.text)))
            pending = None
    if pending is not None:
        turns.append(_turn(pending, ""))
    return turns


def _turn(question: str, answer: str) -> Turn:
    return Turn(message=question, refined_query=question, answer=answer, created_at=0.0)


def format_sources(citations: list[Citation], language: str | None = None) -> str:
    """``\\n\\nSources:\\n[1] title (source, page 3)`` lines in ``language`` (the answer's), or "" when
    nothing is cited."""
    if not citations:
        return ""
    lines = []
    for c in citations:
        label = c.title or c.source or c.chunk_id
        details = [c.source] if c.title and c.source else []
        if c.page is not None:
            details.append(message("source_page", language, page=c.page))
        lines.append(f"[{c.id}] {label} ({', '.join(details)})" if details else f"[{c.id}] {label}")
    return "\n\n" + message("sources_header", language) + "\n" + "\n".join(lines)


def _citations_json(citations: list[Citation]) -> list[dict[str, Any]]:
    return [c.model_dump(mode="json") for c in citations]


def _structured(response: ChatResponse) -> dict[str, Any]:
    """The extra top-level fields: ``citations``, and ``conflict`` when the sources disagree."""
    extra: dict[str, Any] = {"citations": _citations_json(response.citations)}
    if response.conflict is not None:
        extra["conflict"] = response.conflict.model_dump(mode="json")
    return extra


def completion_id() -> str:
    return f"chatcmpl-{uuid.uuid4().hex}"


def completion(response: ChatResponse, model: str) -> dict[str, Any]:
    return {
        "id": completion_id(),
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": response.answer + format_sources(response.citations, response.language)},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        **_structured(response),
    }


async def completion_chunks(events: AsyncIterator[StreamEvent], model: str) -> AsyncIterator[bytes]:
    """The OpenAI streaming body: ``data: {chat.completion.chunk}`` lines, then ``data: [DONE]``."""
    cid, created = completion_id(), int(time.time())

    def chunk(delta: dict[str, Any], finish_reason: str | None = None, **extra: Any) -> bytes:
        body = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason, "logprobs": None}],
            **extra,
        }
        return format_sse_event(data_str=json.dumps(body))

    yield chunk({"role": "assistant", "content": ""})
    streamed = ""
    async for event in events:
        if event.name == "token":
            assert isinstance(event.data, dict)
            text = event.data["text"]
            streamed += text
            yield chunk({"content": text})
        elif event.name == "final":
            assert isinstance(event.data, ChatResponse)
            answer = event.data.answer
            if answer.startswith(streamed):
                tail = answer[len(streamed) :]
            else:
                tail = revised_separator(event.data.language) + answer
            tail += format_sources(event.data.citations, event.data.language)
            if tail:
                yield chunk({"content": tail})
            yield chunk({}, "stop", **_structured(event.data))
            yield format_sse_event(data_str="[DONE]")
            return
        elif event.name == "error":
            assert isinstance(event.data, RagError)
            error = {
                "message": event.data.message,
                "type": "server_error",
                "code": status_for(event.data),
                "param": None,
                "stage": event.data.stage,
            }
            yield format_sse_event(data_str=json.dumps({"error": error}))
            return
