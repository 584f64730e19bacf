"""The import rules of the production code, checked statically (stdlib ``ast``, nothing is imported).

Every ``.py`` file of the production tree is parsed: services/*/rag_*/, libs/rag_common/rag_common/,
cli/ragctl/, eval/rag_eval/ and bench/*.py (tests/ is not production code and is not checked).
Both ``import a.b`` and ``from a import b`` count, relative imports are resolved against the file's
package, and imports nested anywhere (inside functions, ``if TYPE_CHECKING:``, ``try:``) count too:
a lazy import is still a dependency. Strings handed to uvicorn (``"rag_gateway.app:create_app"``)
and ``python -m rag_x`` are not imports.

The rules (docs/ARCHITECTURE.md, "Import rules"):
 1. No service package imports another service package.
 2. rag_common imports no service package, nor ragctl, nor rag_eval.
 3. FastAPI-free modules import no fastapi / starlette / sse_starlette / prometheus_fastapi_instrumentator:
    everything in rag_common and in the services except each service's app.py and FASTAPI_ALLOWED.
 4. Inside a service the HTTP module imports the logic, never the reverse: only rag_x/__main__.py
    may import rag_x.app.
 5. Nothing outside a service imports its app.py (other services, rag_common, ragctl, rag_eval, bench).
 6. The retriever's backends are independent: backends/embedded/ and whatever it imports from
    rag_retriever.backends never import backends/opensearch*.py, and vice versa.
 7. rag_eval, bench and ragctl import only production packages: rag_common, the services' logic
    modules (app.py is rule 5's), ragctl and rag_eval; never tests/ code or a source-tree path
    (``libs.``, ``cli.``, ``eval.``, ``services.``).
 8. Nothing above ``backends/`` names a concrete backend: no module of a service or of rag_common
    outside rag_retriever/backends/ imports ``rag_retriever.backends.embedded*`` or
    ``rag_retriever.backends.opensearch*``, except the composition root (CONCRETE_BACKEND_ALLOWED).
    The others see the protocols of ``backends/base.py`` and get a backend's abilities injected.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

SERVICE_PACKAGES = frozenset({"rag_gateway", "rag_refiner", "rag_retriever", "rag_reranker", "rag_generator"})
COMMON = "rag_common"
TOOL_PACKAGES = frozenset({"ragctl", "rag_eval", "bench"})
FASTAPI_PACKAGES = frozenset({"fastapi", "starlette", "sse_starlette", "prometheus_fastapi_instrumentator"})

#: Modules besides each service's ``app.py`` that may import FastAPI/Starlette: module -> why.
#: Keep it short; an entry whose module no longer imports them must be removed (rule 3 says so).
FASTAPI_ALLOWED: dict[str, str] = {
    "rag_common.service": "the app factory (create_service_app): every service's FastAPI app is built here",
    "rag_gateway.openai_compat": "wire format of POST /v1/chat/completions incl. its SSE framing; only app.py uses it",
}

BACKENDS = "rag_retriever.backends"
EMBEDDED_BACKEND = f"{BACKENDS}.embedded"
#: Module names (under ``BACKENDS``) of the concrete backends, the embedded package and every
#: ``opensearch*`` module (rule 8).
CONCRETE_BACKEND_PREFIXES = ("embedded", "opensearch")
#: Modules above ``backends/`` that may import a concrete backend: module -> why. Keep it to the
#: composition root; the app, the services and their __main__ get what runtime.py builds.
CONCRETE_BACKEND_ALLOWED: dict[str, str] = {
    "rag_retriever.runtime": "the composition root: opens the configured backend and injects its abilities",
}

#: Top-level names that would mean production code imports test code or a source-tree path
#: instead of an installed package.
NON_PRODUCTION_TOPS = frozenset({"tests", "conftest", "libs", "cli", "eval", "services", "bench"})
#: What rag_eval, bench and ragctl may import of the first-party code (rule 7).
TOOL_MAY_IMPORT = SERVICE_PACKAGES | {COMMON, "ragctl", "rag_eval"}

MIN_PRODUCTION_FILES = 50


# --------------------------------------------------------------------------- the scanner


@dataclass(frozen=True)
class Import:
    """One imported name: ``target`` is the absolute dotted name (``pkg.mod`` or ``pkg.mod.attr``)."""

    path: Path
    line: int
    target: str
    statement: str


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: list[Import] = field(default_factory=list)

    @property
    def top(self) -> str:
        return self.name.split(".")[0]


@dataclass(repr=False)
class Tree:
    root: Path
    modules: dict[str, Module]
    errors: list[str]

    def __repr__(self) -> str:  # short, so a failing test does not print every import
        return f"Tree({self.root}, {len(self.modules)} modules)"

    def where(self, imp: Import) -> str:
        try:
            rel = imp.path.relative_to(self.root)
        except ValueError:
            rel = imp.path
        return f"{rel}:{imp.line}: {imp.statement}"


def within(name: str, prefix: str) -> bool:
    """``name`` is ``prefix`` or something inside it (``a.b.c`` is within ``a.b``, ``a.bc`` is not)."""
    return name == prefix or name.startswith(prefix + ".")


def production_files(root: Path) -> list[tuple[Path, str]]:
    """``(file, dotted module name)`` of every production .py file under ``root``."""

    def package_files(package_dir: Path) -> Iterable[tuple[Path, str]]:
        if not package_dir.name.isidentifier():  # rag_x.egg-info and the like
            return
        for path in sorted(package_dir.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            parts = path.relative_to(package_dir.parent).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            yield path, ".".join(parts)

    found: list[tuple[Path, str]] = []
    for package_dir in sorted(root.glob("services/*/rag_*")):
        if package_dir.is_dir():
            found += package_files(package_dir)
    for package_dir in (root / "libs/rag_common/rag_common", root / "cli/ragctl", root / "eval/rag_eval"):
        if package_dir.is_dir():
            found += package_files(package_dir)
    found += [(path, f"bench.{path.stem}") for path in sorted(root.glob("bench/*.py"))]
    return found


def module_imports(path: Path, name: str, is_package: bool, tree: ast.AST) -> tuple[list[Import], list[str]]:
    imports: list[Import] = []
    errors: list[str] = []
    package = name.split(".") if is_package else name.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                imports.append(Import(path, node.lineno, alias.name, f"import {alias.name}"))
        elif isinstance(node, ast.ImportFrom):
            written = "." * node.level + (node.module or "")
            if node.level:
                if node.level > len(package):
                    errors.append(f"{path}:{node.lineno}: relative import beyond the top package: from {written}")
                    continue
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for alias in node.names:
                target = module if alias.name == "*" else f"{module}.{alias.name}"
                imports.append(Import(path, node.lineno, target, f"from {written} import {alias.name}"))
    return imports, errors


@cache
def scan(root: Path) -> Tree:
    modules: dict[str, Module] = {}
    errors: list[str] = []
    for path, name in production_files(root):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError as exc:
            errors.append(f"{path}:{exc.lineno}: cannot parse: {exc.msg}")
            continue
        module = Module(name, path, path.name == "__init__.py")
        module.imports, import_errors = module_imports(path, name, module.is_package, tree)
        errors += import_errors
        modules[name] = module
    return Tree(root, modules, errors)


def violations(tree: Tree, applies: Callable[[Module], bool], bad: Callable[[Module, Import], bool]) -> list[str]:
    return [
        tree.where(imp)
        for module in sorted(tree.modules.values(), key=lambda m: str(m.path))
        if applies(module)
        for imp in module.imports
        if bad(module, imp)
    ]


# --------------------------------------------------------------------------- the rules


def rule1_service_imports_other_service(tree: Tree) -> list[str]:
    return violations(
        tree,
        lambda m: m.top in SERVICE_PACKAGES,
        lambda m, imp: imp.target.split(".")[0] in SERVICE_PACKAGES - {m.top},
    )


def rule2_common_imports_service_or_tool(tree: Tree) -> list[str]:
    forbidden = SERVICE_PACKAGES | {"ragctl", "rag_eval"}
    return violations(tree, lambda m: m.top == COMMON, lambda m, imp: imp.target.split(".")[0] in forbidden)


def is_app_module(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 2 and parts[0] in SERVICE_PACKAGES and parts[1] == "app"


def rule3_fastapi_outside_http_modules(tree: Tree) -> list[str]:
    found = violations(
        tree,
        lambda m: (m.top == COMMON or m.top in SERVICE_PACKAGES)
        and not is_app_module(m.name)
        and m.name not in FASTAPI_ALLOWED,
        lambda m, imp: imp.target.split(".")[0] in FASTAPI_PACKAGES,
    )
    for name in sorted(FASTAPI_ALLOWED):
        module = tree.modules.get(name)
        if module is None or not any(imp.target.split(".")[0] in FASTAPI_PACKAGES for imp in module.imports):
            found.append(f"FASTAPI_ALLOWED[{name!r}]: the module no longer imports FastAPI/Starlette; remove the entry")
    return found


def rule4_service_logic_imports_its_app(tree: Tree) -> list[str]:
    return violations(
        tree,
        lambda m: m.top in SERVICE_PACKAGES and m.name != f"{m.top}.__main__",
        lambda m, imp: within(imp.target, f"{m.top}.app"),
    )


def rule5_app_imported_from_outside(tree: Tree) -> list[str]:
    return violations(
        tree,
        lambda m: True,
        lambda m, imp: (service := imp.target.split(".")[0]) in SERVICE_PACKAGES
        and service != m.top
        and within(imp.target, f"{service}.app"),
    )


def resolve(tree: Tree, target: str) -> str | None:
    """The scanned module ``target`` names: itself, or the longest scanned prefix (``mod.attr`` -> ``mod``)."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in tree.modules:
            return candidate
    return None


def backend_closure(tree: Tree, start: str) -> dict[str, tuple[str, Import] | None]:
    """The rag_retriever.backends modules ``start`` loads, each with the (module, import) that brings it in.
    Importing ``backends.x`` also runs ``backends/__init__.py``, so parent packages are followed too."""
    reached: dict[str, tuple[str, Import] | None] = {start: None}
    queue = [start]
    while queue:
        current = queue.pop()
        for imp in tree.modules[current].imports:
            target = resolve(tree, imp.target)
            if target is None or not within(target, BACKENDS):
                continue
            loaded = [target] + [
                ".".join(target.split(".")[:end]) for end in range(len(BACKENDS.split(".")), len(target.split(".")))
            ]
            for name in loaded:
                if name in tree.modules and name not in reached:
                    reached[name] = (current, imp)
                    queue.append(name)
    return reached


def opensearch_backends(tree: Tree) -> list[str]:
    return sorted(
        name for name in tree.modules if within(name, BACKENDS) and name.split(".")[-1].startswith("opensearch")
    )


def rule6_backends_import_each_other(tree: Tree) -> list[str]:
    found = []
    pairs = [(EMBEDDED_BACKEND, set(opensearch_backends(tree)))]
    pairs += [(name, {EMBEDDED_BACKEND}) for name in opensearch_backends(tree)]
    for start, forbidden in pairs:
        if start not in tree.modules:
            continue
        reached = backend_closure(tree, start)
        for name in sorted(set(reached) & forbidden):
            chain, step = [], name
            while reached[step] is not None:
                importer, imp = reached[step]
                chain.append(tree.where(imp))
                step = importer
            found.append(f"{start} loads {name}: " + " <- ".join(chain))
    return found


def rule7_tools_import_only_production_packages(tree: Tree) -> list[str]:
    first_party = SERVICE_PACKAGES | {COMMON} | TOOL_PACKAGES | NON_PRODUCTION_TOPS
    return violations(
        tree,
        lambda m: m.top in TOOL_PACKAGES,
        lambda m, imp: (top := imp.target.split(".")[0]) in first_party and top not in TOOL_MAY_IMPORT,
    )


def is_concrete_backend(target: str) -> bool:
    """``target`` is (inside) ``rag_retriever.backends.embedded*`` or ``rag_retriever.backends.opensearch*``."""
    if not within(target, BACKENDS) or target == BACKENDS:
        return False
    return target[len(BACKENDS) + 1 :].split(".")[0].startswith(CONCRETE_BACKEND_PREFIXES)


def rule8_concrete_backend_above_backends(tree: Tree) -> list[str]:
    found = violations(
        tree,
        lambda m: (m.top == COMMON or m.top in SERVICE_PACKAGES)
        and not within(m.name, BACKENDS)
        and m.name not in CONCRETE_BACKEND_ALLOWED,
        lambda m, imp: is_concrete_backend(imp.target),
    )
    for name in sorted(CONCRETE_BACKEND_ALLOWED):
        module = tree.modules.get(name)
        if module is None or not any(is_concrete_backend(imp.target) for imp in module.imports):
            found.append(
                f"CONCRETE_BACKEND_ALLOWED[{name!r}]: the module imports no concrete backend; remove the entry"
            )
    return found


RULES: dict[str, Callable[[Tree], list[str]]] = {
    "rule1": rule1_service_imports_other_service,
    "rule2": rule2_common_imports_service_or_tool,
    "rule3": rule3_fastapi_outside_http_modules,
    "rule4": rule4_service_logic_imports_its_app,
    "rule5": rule5_app_imported_from_outside,
    "rule6": rule6_backends_import_each_other,
    "rule7": rule7_tools_import_only_production_packages,
    "rule8": rule8_concrete_backend_above_backends,
}


def report(title: str, found: list[str]) -> str:
    return f"{title} ({len(found)}):\n  " + "\n  ".join(found)


def fail_on(found: list[str], title: str) -> None:
    if found:
        pytest.fail(report(title, found), pytrace=False)


@pytest.fixture(scope="module")
def tree() -> Tree:
    return scan(REPO)


# --------------------------------------------------------------------------- the scanner works


def test_scanner_reads_the_production_tree(tree: Tree) -> None:
    assert len(tree.modules) > MIN_PRODUCTION_FILES, (
        f"only {len(tree.modules)} production files found under {REPO}: the rules below would pass on nothing"
    )
    tops = {module.top for module in tree.modules.values()}
    expected = SERVICE_PACKAGES | {COMMON, "ragctl", "rag_eval", "bench"}
    assert expected <= tops, f"no file found for {sorted(expected - tops)}"
    assert sum(len(m.imports) for m in tree.modules.values()) > 10 * MIN_PRODUCTION_FILES, "suspiciously few imports"
    fail_on(tree.errors, "files or imports the scanner could not read")


def test_checker_finds_violations_in_a_synthetic_tree(tmp_path: Path) -> None:
    files = {
        # rule 1 (lazy, inside a function) and a legitimate rag_common import
        "services/gateway/rag_gateway/__init__.py": "",
        "services/gateway/rag_gateway/chat.py": (
            "from rag_common import schemas\n\ndef f():\n    import rag_refiner.query_refiner\n"
        ),
        "services/refiner/rag_refiner/__init__.py": "",
        "services/refiner/rag_refiner/query_refiner.py": "import json\n",
        # the HTTP module and __main__ may do what the logic may not
        "services/refiner/rag_refiner/app.py": "from fastapi import FastAPI\nfrom . import query_refiner\n",
        "services/refiner/rag_refiner/__main__.py": "from rag_refiner.app import create_app\n",
        # rule 4 through a relative import, rule 3 in a service logic module
        "services/refiner/rag_refiner/helper.py": (
            "from .app import create_app\nfrom starlette.requests import Request\n"
        ),
        # rule 2 and rule 3 in rag_common; service.py is the allowed app factory
        "libs/rag_common/rag_common/__init__.py": "",
        "libs/rag_common/rag_common/util.py": "from fastapi import FastAPI\nfrom rag_gateway import chat\n",
        "libs/rag_common/rag_common/service.py": "from fastapi import FastAPI\n",
        # rule 6, transitively through a helper module of the backends package
        "services/retriever/rag_retriever/__init__.py": "",
        "services/retriever/rag_retriever/backends/__init__.py": "",
        "services/retriever/rag_retriever/backends/embedded.py": "from . import helpers\n",
        "services/retriever/rag_retriever/backends/helpers.py": (
            "from rag_retriever.backends.opensearch import Search\n"
        ),
        "services/retriever/rag_retriever/backends/opensearch.py": "import json\n",
        # rule 8: the composition root may name a concrete backend, a service module may not (even
        # lazily, relatively or through the package); base.py is not a concrete backend
        "services/retriever/rag_retriever/runtime.py": (
            "def open_backend():\n    from rag_retriever.backends.embedded import EmbeddedBackend\n"
        ),
        "services/retriever/rag_retriever/search_service.py": (
            "from rag_retriever.backends.base import Searcher\n"
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .backends.embedded import EmbeddedIndex\n"
        ),
        "services/retriever/rag_retriever/graph_retrieval.py": "from rag_retriever.backends import opensearch\n",
        # rule 5 from bench, rule 7 from rag_eval; a service logic module is fine for both
        "bench/quality.py": "from rag_refiner.app import create_app\nfrom rag_refiner.query_refiner import Q\n",
        "eval/rag_eval/__init__.py": "",
        "eval/rag_eval/pipeline.py": "from tests.helpers import fake\nfrom rag_refiner import query_refiner\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    fake = scan(tmp_path)
    assert len(fake.modules) == len(files) and not fake.errors, (sorted(fake.modules), fake.errors)

    found = {rule: check(fake) for rule, check in RULES.items()}
    assert found["rule1"] == ["services/gateway/rag_gateway/chat.py:4: import rag_refiner.query_refiner"]
    assert found["rule2"] == ["libs/rag_common/rag_common/util.py:2: from rag_gateway import chat"]
    assert found["rule3"] == [
        "libs/rag_common/rag_common/util.py:1: from fastapi import FastAPI",
        "services/refiner/rag_refiner/helper.py:2: from starlette.requests import Request",
        "FASTAPI_ALLOWED['rag_gateway.openai_compat']: the module no longer imports FastAPI/Starlette; "
        "remove the entry",
    ]
    assert found["rule4"] == ["services/refiner/rag_refiner/helper.py:1: from .app import create_app"]
    assert found["rule5"] == ["bench/quality.py:1: from rag_refiner.app import create_app"]
    assert found["rule6"] == [
        "rag_retriever.backends.embedded loads rag_retriever.backends.opensearch: "
        "services/retriever/rag_retriever/backends/helpers.py:1: from rag_retriever.backends.opensearch import Search"
        " <- services/retriever/rag_retriever/backends/embedded.py:1: from . import helpers"
    ]
    assert found["rule7"] == ["eval/rag_eval/pipeline.py:1: from tests.helpers import fake"]
    assert found["rule8"] == [
        "services/retriever/rag_retriever/graph_retrieval.py:1: from rag_retriever.backends import opensearch",
        "services/retriever/rag_retriever/search_service.py:4: from .backends.embedded import EmbeddedIndex",
    ]


# --------------------------------------------------------------------------- the rules on the real tree


def test_rule1_no_service_imports_another_service(tree: Tree) -> None:
    fail_on(
        rule1_service_imports_other_service(tree),
        "rule 1: a service package imports another service package (services talk over HTTP, via rag_common.schemas)",
    )


def test_rule2_rag_common_imports_no_service_nor_tool(tree: Tree) -> None:
    fail_on(
        rule2_common_imports_service_or_tool(tree), "rule 2: rag_common imports a service package, ragctl or rag_eval"
    )


def test_rule3_fastapi_only_in_http_modules(tree: Tree) -> None:
    fail_on(
        rule3_fastapi_outside_http_modules(tree),
        "rule 3: FastAPI/Starlette imported outside the HTTP modules (each service's app.py, FASTAPI_ALLOWED)",
    )


def test_rule4_service_logic_never_imports_its_app(tree: Tree) -> None:
    fail_on(
        rule4_service_logic_imports_its_app(tree),
        "rule 4: a service module imports its own app.py (only its __main__.py may)",
    )


def test_rule5_nothing_outside_a_service_imports_its_app(tree: Tree) -> None:
    fail_on(
        rule5_app_imported_from_outside(tree),
        "rule 5: code outside a service imports its app.py (import its logic module instead; "
        "uvicorn takes the string 'rag_x.app:create_app')",
    )


def test_rule6_retriever_backends_are_independent(tree: Tree) -> None:
    assert EMBEDDED_BACKEND in tree.modules, f"{EMBEDDED_BACKEND} not found: the rule would check nothing"
    assert opensearch_backends(tree), f"no {BACKENDS}.opensearch* module found: the rule would check nothing"
    fail_on(rule6_backends_import_each_other(tree), "rule 6: one retriever backend loads the other")


def test_rule7_tools_import_only_production_packages(tree: Tree) -> None:
    fail_on(
        rule7_tools_import_only_production_packages(tree),
        f"rule 7: rag_eval/bench/ragctl import something other than {sorted(TOOL_MAY_IMPORT)} "
        "(tests/ code or a source-tree path)",
    )


def test_rule8_nothing_above_backends_imports_a_concrete_backend(tree: Tree) -> None:
    fail_on(
        rule8_concrete_backend_above_backends(tree),
        "rule 8: a module above rag_retriever/backends/ imports a concrete backend (take the protocols of "
        "backends/base.py and have runtime.py inject the backend and its abilities)",
    )
