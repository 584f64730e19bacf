"""Process-wide torch choices: which device the models run on and how many CPU threads they use."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


def resolve_device(device: str | None) -> str:
    """``device`` if given, else ``"cuda"`` when a GPU is visible, else ``"cpu"``."""
    if device:
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def apply_torch_threads(threads: int) -> None:
    """``0`` keeps torch's default (one thread per core); a positive number caps intra-op threads."""
    if threads < 0:
        raise ValueError(f"torch_threads must be 0 (torch default) or positive, got {threads}")
    if threads == 0:
        return
    import torch

    torch.set_num_threads(threads)
    logger.info("torch intra-op threads set to %d", threads)
