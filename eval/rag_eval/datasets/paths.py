"""Where the (read-only, shared) benchmark datasets live."""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "RAG_DATASETS_DIR"

#: ``../shared/datasets`` next to the repository (``/work/shared/datasets`` for ``/work/main``),
#: as the datasets' README recommends. Valid for the editable install of this repository.
DEFAULT_DIR = Path(__file__).resolve().parents[3].parent / "shared" / "datasets"


class DatasetNotFound(FileNotFoundError):
    """A dataset file or folder is missing; the message names the path and the env var to set."""

    def __init__(self, name: str, path: Path, *, env_var: str = ENV_VAR) -> None:
        self.name = name
        self.path = Path(path)
        configured = os.environ.get(env_var)
        where = f"{env_var}={configured}" if configured else f"{env_var} is not set; default {DEFAULT_DIR}"
        super().__init__(
            f"dataset {name!r} not found: {self.path} does not exist ({where}). "
            f"Set {env_var} to the folder that holds the datasets (vaswani/, hotpotqa/, clapnq/, mtrag-un/, xquad/) "
            "or pass root= explicitly."
        )


def datasets_dir(root: str | Path | None = None) -> Path:
    """``root`` if given, else ``$RAG_DATASETS_DIR``, else :data:`DEFAULT_DIR`. Not checked for existence."""
    if root is not None:
        return Path(root).expanduser()
    configured = os.environ.get(ENV_VAR)
    return Path(configured).expanduser() if configured else DEFAULT_DIR


def require(name: str, path: Path) -> Path:
    """``path`` if it exists, else :class:`DatasetNotFound` naming it."""
    if not path.exists():
        raise DatasetNotFound(name, path)
    return path
