"""The answer text inside a JSON reply that is still being generated.

The model streams a JSON object (``{"answer": "...", "citations": [...], ...}``); a client must
see only the answer's text. Each ``feed`` re-reads the reply so far with langchain-core's
``parse_partial_json`` (which closes open strings and brackets) and returns the characters of
``answer`` not returned before. Only extensions of what was already returned are emitted, so the
concatenation of all deltas is always a prefix of the final answer string.
"""

from __future__ import annotations

import json

from langchain_core.utils.json import parse_partial_json


class AnswerTextStream:
    def __init__(self, key: str = "answer"):
        self._key = key
        self._raw = ""
        self._sent = ""
        self._closed = False

    @property
    def raw(self) -> str:
        """The reply text fed so far."""
        return self._raw

    @property
    def text(self) -> str:
        """The answer text returned so far (the concatenation of all deltas)."""
        return self._sent

    def feed(self, delta: str) -> str:
        """Add a piece of the reply; return the new answer characters (maybe ``""``)."""
        self._raw += delta
        if self._closed or not delta:
            return ""
        try:
            partial = parse_partial_json(self._raw)
        except (json.JSONDecodeError, ValueError):
            return ""
        if not isinstance(partial, dict):
            return ""
        keys = list(partial)
        if self._key in keys and keys[-1] != self._key:
            self._closed = True  # a later key has started: the answer string is complete
        return self._extend(partial.get(self._key))

    def finish(self, answer: str | None) -> str:
        """The rest of the final, fully parsed ``answer``, if it extends what was returned."""
        self._closed = True
        return self._extend(answer)

    def _extend(self, answer: object) -> str:
        if not isinstance(answer, str) or len(answer) <= len(self._sent) or not answer.startswith(self._sent):
            return ""
        delta, self._sent = answer[len(self._sent) :], answer
        return delta
