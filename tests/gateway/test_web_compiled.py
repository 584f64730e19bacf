"""The checked-in JavaScript of the web chat (``rag_gateway/static/js``) is exactly what the pinned
``tsc`` compiles from its TypeScript (``services/gateway/web/src``), with the project's tsconfig.json.

The gateway serves static/js as committed and nothing builds it at run time, so an edit of a .ts
file without ``make web`` would ship stale code unnoticed. ``make test`` installs the pinned compiler
(``scripts/ensure_tsc.sh``: ``npm ci`` when node_modules is not from the current lock). A machine
without Node.js fails here rather than skipping: a skip would let exactly that drift through CI.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WEB = REPO / "services" / "gateway" / "web"
STATIC_JS = REPO / "services" / "gateway" / "rag_gateway" / "static" / "js"
TSC = WEB / "node_modules" / "typescript" / "bin" / "tsc"
INSTALL = "run `bash scripts/ensure_tsc.sh` (`make test` does)"


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    """Every file the pinned tsc emits, by its path relative to the output folder."""
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is not on PATH: install Node.js 20 and npm, then " + INSTALL)
    if not TSC.is_file():
        pytest.fail(f"the pinned TypeScript compiler is not installed in {WEB / 'node_modules'}: {INSTALL}")
    pinned = json.loads((WEB / "package.json").read_text())["devDependencies"]["typescript"]
    installed = json.loads((WEB / "node_modules" / "typescript" / "package.json").read_text())["version"]
    if installed != pinned:
        pytest.fail(f"node_modules has typescript {installed}, package.json pins {pinned}: {INSTALL}")
    out = tmp_path_factory.mktemp("tsc-out")
    # Only the output folder differs from `make web`: every other option comes from tsconfig.json.
    result = subprocess.run(
        [node, str(TSC), "-p", str(WEB / "tsconfig.json"), "--outDir", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, f"tsc reports errors in services/gateway/web/src:\n{result.stdout}{result.stderr}"
    return {path.relative_to(out).as_posix(): path.read_bytes() for path in sorted(out.rglob("*")) if path.is_file()}


def test_tsc_emits_the_checked_in_files(compiled: dict[str, bytes]) -> None:
    assert compiled, "tsc emitted nothing: is services/gateway/web/src empty?"
    stale = [name for name, content in compiled.items() if _checked_in(name) != content]
    assert not stale, (
        f"rag_gateway/static/js differs from what tsc compiles from services/gateway/web/src: {', '.join(stale)}; "
        "run `make web` and commit the result"
    )


def test_every_checked_in_file_has_a_typescript_source(compiled: dict[str, bytes]) -> None:
    orphans = [path.relative_to(STATIC_JS).as_posix() for path in sorted(STATIC_JS.rglob("*")) if path.is_file()]
    orphans = [name for name in orphans if name not in compiled]
    assert not orphans, (
        f"rag_gateway/static/js has files no .ts in services/gateway/web/src compiles to: {', '.join(orphans)}; "
        "delete them (or add their source) and run `make web`"
    )


def _checked_in(name: str) -> bytes | None:
    path = STATIC_JS / name
    return path.read_bytes() if path.is_file() else None
