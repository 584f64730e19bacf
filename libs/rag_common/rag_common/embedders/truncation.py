"""The truncation warning both embedders give: how many texts the model will cut at max_seq_length."""

from __future__ import annotations

import logging
from collections.abc import Callable

logger = logging.getLogger("rag_common.embedders")


def warn_truncation(texts: list[str], limit: int, input_tokens: Callable[[list[str]], list[int]]) -> int:
    """Log (warning) how many of ``texts`` exceed ``limit`` tokens (``input_tokens`` counts them with
    special tokens); returns that number."""
    if not texts:
        return 0
    # A token covers at least one character: shorter texts cannot exceed the limit (no tokenizing).
    lengths = input_tokens([t for t in texts if len(t) > limit - 2])
    over = [n for n in lengths if n > limit]
    if over:
        logger.warning(
            "%d of %d texts exceed the embedder's max_seq_length (%d tokens; longest %d) and are truncated "
            "for embedding: the cut part is not in their vectors", len(over), len(texts), limit, max(over),
        )
    return len(over)
