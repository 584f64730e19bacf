"""What a sentence-transformers model folder declares about its use, read from its files (no torch).

The torch embedder gets these from sentence-transformers itself; the ONNX embedder runs the bare
transformer and must do the rest as the folder says: the pooling (``1_Pooling/config.json``: mean for
paraphrase-multilingual-MiniLM-L12-v2, CLS for BAAI/bge-m3), the padding token (XLM-R's ``<pad>`` is id 1,
not BERT's ``[PAD]``), and — for both embedders — the prompts the model was trained with
(``config_sentence_transformers.json``, e.g. ``{"query": "query: ", "document": "passage: "}``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

from rag_common.embedders.models import ModelNotAvailableError

Pooling = Literal["mean", "cls"]

#: Module types the ONNX embedder reproduces: the transformer, its pooling and the L2 normalisation it always applies.
_REPRODUCED = ("Transformer", "Pooling", "Normalize")
#: sentence-transformers' legacy pooling flags (the format of the hub's models), in its order.
_LEGACY_POOLING = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
#: Prompt names sentence-transformers' encode_document tries, in its order.
_DOCUMENT_PROMPTS = ("document", "passage", "corpus")


def _read_json(path: Path) -> dict | list | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


def pooling_mode(model_dir: Path) -> Pooling:
    """The pooling of ``model_dir``'s sentence-transformers modules: ``"mean"`` or ``"cls"``.

    A folder without ``modules.json`` is a bare transformer, which sentence-transformers mean-pools.
    Raises ModelNotAvailableError for what the ONNX embedder cannot reproduce (another pooling, a Dense
    layer, several poolings), naming the torch backend that can.
    """
    modules = _read_json(model_dir / "modules.json")
    if modules is None:
        return "mean"
    unsupported = [m["type"] for m in modules if not m["type"].endswith(_REPRODUCED)]
    poolings = [m for m in modules if m["type"].endswith("Pooling")]
    modes: list[str] = ["mean"]
    if poolings:
        config = _read_json(model_dir / poolings[0]["path"] / "config.json") or {}
        declared = config.get("pooling_mode")
        if declared is None:
            modes = [mode for key, mode in _LEGACY_POOLING.items() if config.get(key)] or ["mean"]
        else:
            modes = [declared] if isinstance(declared, str) else list(declared)
    if unsupported or len(poolings) > 1 or len(modes) != 1 or modes[0] not in ("mean", "cls"):
        raise ModelNotAvailableError(
            f"{model_dir}: EMBEDDER_BACKEND=onnx runs a transformer with mean or CLS pooling only; this model has "
            f"pooling {'+'.join(modes)}{' and modules ' + ', '.join(unsupported) if unsupported else ''}: "
            "use EMBEDDER_BACKEND=torch for it"
        )
    return modes[0]  # type: ignore[return-value]


def pad_token(model_dir: Path) -> str:
    """The tokenizer's padding token (``tokenizer_config.json``, else ``special_tokens_map.json``), else ``[PAD]``."""
    for name in ("tokenizer_config.json", "special_tokens_map.json"):
        token = (_read_json(model_dir / name) or {}).get("pad_token")
        if isinstance(token, dict):
            token = token.get("content")
        if isinstance(token, str) and token:
            return token
    return "[PAD]"


def declared_prompts(model_dir: Path) -> tuple[str, str]:
    """(query prefix, document prefix) the model declares in ``config_sentence_transformers.json``'s
    ``prompts`` — what sentence-transformers' encode_query / encode_document put in front; ``""`` if none."""
    prompts = (_read_json(model_dir / "config_sentence_transformers.json") or {}).get("prompts") or {}
    document = next((prompts[name] for name in _DOCUMENT_PROMPTS if prompts.get(name)), "")
    return prompts.get("query") or "", document
