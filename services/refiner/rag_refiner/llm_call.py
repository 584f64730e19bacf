"""One bounded model call: what every LLM step of the refiner shares.

A step's call either returns, or its output is unusable (``UnusableOutput``: the model answered
but not in the expected shape; the endpoint works), or the endpoint is unavailable
(``LLMUnavailable``: refused, HTTP error, no answer in time). Only the last means that further
calls in the same request are pointless.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable
from typing import TypeVar

from openai import LengthFinishReasonError

from rag_common.llm_admission import LLMAdmission, LLMBusy

logger = logging.getLogger(__name__)

T = TypeVar("T")


class UnusableOutput(Exception):
    """The model answered, but not in the shape the step needs."""


class LLMUnavailable(Exception):
    """The model did not answer: transport error, HTTP error, or timeout. ``str(exc)`` says which."""


class LLMRefused(LLMUnavailable):
    """The admission control refused the call at once: the model is too busy to answer in time."""


async def bounded_llm_call(
    step: str, call: Awaitable[T], timeout_s: float, admission: LLMAdmission | None = None
) -> T:
    """Await ``call`` for at most ``timeout_s`` (waiting for a slot included); any failure but
    ``UnusableOutput`` becomes ``LLMUnavailable`` (``LLMRefused`` when no slot could be expected in time)."""
    try:
        async with asyncio.timeout(timeout_s):
            if admission is None:
                return await call
            async with admission.slot(timeout_s):
                return await call
    except LLMBusy as exc:
        if inspect.iscoroutine(call):
            call.close()  # never started: close it rather than leave it un-awaited
        logger.info("%s: llm refused by admission control (%s)", step, exc.reason)
        raise LLMRefused(exc.message) from exc
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
