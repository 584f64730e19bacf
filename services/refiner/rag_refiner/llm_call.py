"""One bounded model call: what every LLM step of the refiner shares.

A step's call either returns, or its output is unusable (``UnusableOutput``: the model answered
but not in the expected shape; the endpoint works), or the endpoint is unavailable
(``LLMUnavailable``: refused, HTTP error, no answer in time). Only the last means that further
calls in the same request are pointless.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

from openai import LengthFinishReasonError

logger = logging.getLogger(__name__)

T = TypeVar("T")


class UnusableOutput(Exception):
    """The model answered, but not in the shape the step needs."""


class LLMUnavailable(Exception):
    """The model did not answer: transport error, HTTP error, or timeout. ``str(exc)`` says which."""


async def bounded_llm_call(step: str, call: Awaitable[T], timeout_s: float) -> T:
    """Await ``call`` for at most ``timeout_s``; any failure but ``UnusableOutput`` becomes ``LLMUnavailable``."""
    try:
        async with asyncio.timeout(timeout_s):
            return await call
    except UnusableOutput:
        raise
    except LengthFinishReasonError as exc:
        # The endpoint works; the reply hit max_tokens before the JSON object closed.
        raise UnusableOutput("model reply cut at max_tokens before the JSON closed") from exc
    except TimeoutError as exc:
        logger.warning("%s: llm timed out after %ss", step, timeout_s)
        raise LLMUnavailable(f"llm timed out after {timeout_s:g}s") from exc
    except Exception as exc:  # noqa: BLE001 - any model failure degrades the step, never the request
        logger.warning("%s: llm failed (%s)", step, type(exc).__name__)
        raise LLMUnavailable(f"llm error: {type(exc).__name__}: {exc}"[:300]) from exc
