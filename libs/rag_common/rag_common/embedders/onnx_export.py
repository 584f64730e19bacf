"""The ONNX export of a local sentence-transformers model, cached next to a hash of its source weights.

``ensure_export(model_dir, cache_dir)`` returns ``<cache_dir>/<name>-<digest16>/model.onnx``, where
``digest`` is :func:`source_digest` of the weights directory: every file of the model (weights, config,
tokenizer, pooling) and :data:`EXPORT_FORMAT`. Changed weights hash differently, so a stale export is
never used: it is rebuilt under the new name (and the old one removed). Exporting needs torch and
transformers (the dev venv, an image's build stage); loading a finished export needs neither, so a
serving image can carry the export and no torch. Nothing is downloaded: the weights are a local directory.

The graph is the transformer alone — ``input_ids``, ``attention_mask``, ``token_type_ids`` in,
``last_hidden_state`` out — with batch and sequence axes dynamic; tokenisation, mean pooling and L2
normalisation stay in Python (:mod:`rag_common.embedders.onnx_runtime`), written as the torch path does them.

``python -m rag_common.embedders.onnx_export [MODEL ...]`` exports ahead of time into
``EMBEDDER_ONNX_CACHE_DIR`` (``make setup`` and the Dockerfiles do); MODEL defaults to ``all-MiniLM-L6-v2``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from rag_common.embedders.models import ModelNotAvailableError, resolve_model_path

logger = logging.getLogger("rag_common.embedders")

#: Bumped when the exported graph changes (inputs, outputs, opset), so older exports are rebuilt.
EXPORT_FORMAT = "rag-onnx-v1"
OPSET = 17
#: The model's files whose content does not change the network (hashing them would only rebuild for nothing).
_NOT_HASHED = {"README.md", ".gitattributes"}
#: What the export needs, named in the error when it is missing.
EXPORT_REQUIREMENT = "torch==2.13.0, transformers and onnx (pip install -c requirements/constraints.txt 'rag-common[export]')"


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rag" / "onnx"


def source_digest(model_dir: Path) -> str:
    """sha256 over every file of ``model_dir`` (relative path and content) and the export format."""
    digest = hashlib.sha256(EXPORT_FORMAT.encode())
    for path in sorted(p for p in model_dir.rglob("*") if p.is_file() and p.name not in _NOT_HASHED):
        digest.update(b"\x00" + path.relative_to(model_dir).as_posix().encode() + b"\x00")
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def export_dir(model_dir: Path, cache_dir: Path, digest: str) -> Path:
    return cache_dir / f"{model_dir.parent.name if model_dir.name == 'model' else model_dir.name}-{digest[:16]}"


def ensure_export(model_dir: Path, cache_dir: Path | None = None) -> Path:
    """The ``model.onnx`` of ``model_dir``'s current weights, exported now if none is cached."""
    cache_dir = Path(cache_dir) if cache_dir else default_cache_dir()
    digest = source_digest(model_dir)
    target = export_dir(model_dir, cache_dir, digest)
    onnx_path = target / "model.onnx"
    if _is_complete(target, digest):
        return onnx_path
    stale = [p for p in cache_dir.glob(f"{target.name[:-17]}-*") if p.is_dir() and p != target]
    logger.warning(
        "exporting %s to ONNX in %s (%s)", model_dir, target,
        f"replacing stale export {stale[0].name}" if stale else "no export of these weights yet",
    )
    cache_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=cache_dir))
    staging.chmod(0o755)  # mkdtemp's 0700 would hide the export from another user (an image's runtime uid)
    try:
        info = export_model(model_dir, staging / "model.onnx")
        (staging / "export.json").write_text(json.dumps({"source_digest": digest, "source": str(model_dir), **info}, indent=2))
        if target.exists() and not _is_complete(target, digest):
            shutil.rmtree(target, ignore_errors=True)  # an interrupted or damaged export of these weights
        try:
            staging.rename(target)  # atomic: a concurrent exporter's identical result may have won
        except OSError:
            if not _is_complete(target, digest):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for old in stale:
        shutil.rmtree(old, ignore_errors=True)
    return onnx_path


def _is_complete(target: Path, digest: str) -> bool:
    try:
        info = json.loads((target / "export.json").read_text())
    except (OSError, ValueError):
        return False
    return info.get("source_digest") == digest and (target / "model.onnx").is_file()


def export_model(model_dir: Path, out_path: Path) -> dict[str, object]:
    """Export the transformer of ``model_dir`` to ``out_path`` (fp32); returns facts for export.json."""
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:
        raise ModelNotAvailableError(
            f"no ONNX export of {model_dir} is cached and exporting one needs {EXPORT_REQUIREMENT}; "
            "export where those are installed (python -m rag_common.embedders.onnx_export) and set "
            "EMBEDDER_ONNX_CACHE_DIR to its folder, or set EMBEDDER_BACKEND=torch"
        ) from exc

    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True, attn_implementation="eager")
    model.eval()

    class LastHiddenState(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):  # noqa: ANN001, ANN202
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    # Traced with a padded row: a mask of all ones could let the model skip its masking code path,
    # and the trace would then ignore padding in every batch. The id is an ordinary token (not BERT's
    # pad 0 nor XLM-R's 1) that every vocabulary has, a small one included.
    ids = torch.full((2, 8), min(1000, model.config.vocab_size - 1), dtype=torch.long)
    mask = torch.ones((2, 8), dtype=torch.long)
    mask[1, 5:] = 0
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "sequence"} for name in names} | {"last_hidden_state": {0: "batch", 1: "sequence"}}
    with torch.no_grad():
        torch.onnx.export(
            LastHiddenState(), (ids, mask, torch.zeros_like(ids)), str(out_path),
            input_names=names, output_names=["last_hidden_state"], dynamic_axes=axes,
            opset_version=OPSET, do_constant_folding=True, dynamo=False,
        )
    return {"format": EXPORT_FORMAT, "opset": OPSET, "torch": torch.__version__}


def main(argv: list[str]) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    from rag_common.settings import EmbedderSettings

    cache_dir = Path(EmbedderSettings().onnx_cache_dir or default_cache_dir())
    for model in argv or ["all-MiniLM-L6-v2"]:
        try:
            path = ensure_export(resolve_model_path(model), cache_dir)
        except ModelNotAvailableError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"{model}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
