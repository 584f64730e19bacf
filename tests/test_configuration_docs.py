"""docs/configuration.md is generated from the settings classes (``ragctl config-docs``): it must be
current, cover every settings class of the production code, and name the variables pydantic-settings
really reads."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path
from typing import Literal

import pytest
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings
from typer.testing import CliRunner

from rag_gateway.settings import GatewaySettings
from rag_retriever.settings import RetrieverSettings
from ragctl import config_docs
from ragctl.cli import app

REPO = Path(__file__).resolve().parents[1]
PRODUCTION_DIRS = [
    REPO / "libs/rag_common/rag_common", REPO / "cli/ragctl", REPO / "eval/rag_eval", *sorted(REPO.glob("services/*/rag_*"))
]
#: Settings classes documented through their subclasses, not on their own.
BASES = {"rag_common.settings.ServiceSettings"}


def test_configuration_doc_is_current() -> None:
    expected = config_docs.render()
    actual = config_docs.DOC_PATH.read_text(encoding="utf-8") if config_docs.DOC_PATH.exists() else ""
    assert actual == expected, "docs/configuration.md is stale: run `make config-docs`"


def test_rendering_does_not_depend_on_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Defaults come from the classes, not from an instance that would read this shell's variables."""
    first = config_docs.render()
    monkeypatch.setenv("GATEWAY_PORT", "9999")
    monkeypatch.setenv("LLM_BASE_URL", "http://elsewhere/v1")
    assert config_docs.render() == first


def test_no_path_of_this_machine_in_the_doc() -> None:
    text = config_docs.render()
    assert str(REPO) not in text
    assert str(Path.home()) not in text


def _settings_classes_in_source() -> set[str]:
    """Every class of the production tree deriving, by name, from ``BaseSettings``."""
    classes: dict[str, tuple[str, list[str]]] = {}
    for root in PRODUCTION_DIRS:
        for path in sorted(root.rglob("*.py")):
            module = ".".join(path.relative_to(root.parent).with_suffix("").parts)
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ClassDef):
                    bases = [base.id if isinstance(base, ast.Name) else ast.unparse(base) for base in node.bases]
                    classes[f"{module}.{node.name}"] = (node.name, bases)
    settings_names = {"BaseSettings"}
    found: set[str] = set()
    while True:
        new = {key for key, (name, bases) in classes.items() if key not in found and settings_names & set(bases)}
        if not new:
            return found
        found |= new
        settings_names |= {classes[key][0] for key in new}


def test_every_settings_class_is_documented() -> None:
    in_source = _settings_classes_in_source()
    assert "rag_gateway.settings.GatewaySettings" in in_source  # the scan finds what it should
    documented = {f"{cls.__module__}.{cls.__name__}" for cls in config_docs.documented_classes()}
    missing = sorted(in_source - documented - BASES)
    assert not missing, f"settings classes not in ragctl/config_docs.py's SERVICES or SHARED: {missing}"


def test_every_variable_is_described() -> None:
    """A field without a description is rendered with an empty one and reported, not failed."""
    missing = config_docs.undescribed()
    if missing:
        warnings.warn(f"settings fields without a description: {missing}", stacklevel=1)


def test_every_service_and_shared_class_has_a_section() -> None:
    text = config_docs.render()
    for service in config_docs.SERVICES:
        assert f"\n## {service.name}\n" in text
    for shared in config_docs.SHARED:
        assert f"\n## {shared.title}\n" in text
    for variable in config_docs.variables(RetrieverSettings):
        assert f"`{variable.names[0]}`" in text


def test_documented_names_are_the_ones_read(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = {variable.names[0]: variable for variable in config_docs.variables(GatewaySettings)}
    assert rows["GATEWAY_PORT"].default == "`8000`"
    token = rows["RAG_SERVICE_TOKEN"]
    assert token.names == ("RAG_SERVICE_TOKEN", "GATEWAY_SERVICE_TOKEN")
    for name in token.names:
        with monkeypatch.context() as env:
            env.setenv(name, f"set-by-{name}")
            assert GatewaySettings().service_token == f"set-by-{name}"
    monkeypatch.setenv("GATEWAY_PORT", "8123")
    assert GatewaySettings().port == 8123


def test_types_and_defaults_render_as_one_sets_them(tmp_path: Path) -> None:
    class Example(BaseSettings):
        mode: Literal["a", "b"] | None = Field(default=None, description="x")
        secret: SecretStr = Field(default=SecretStr(""), description="x")
        names: list[str] = Field(default_factory=lambda: ["x", "y"], description="x")
        switch: bool = Field(default=False, description="x")
        path: str = Field(default=str(config_docs.REPO_ROOT / "var" / "index"), description="x")
        template: str = Field(default="{a}\n{b}", description="x")
        bare: int = 3

    rows = {variable.names[0]: variable for variable in config_docs.variables(Example)}
    assert rows["MODE"].type == "one of `a`, `b`, optional" and rows["MODE"].default == "unset"
    assert rows["SECRET"].type == "secret str" and rows["SECRET"].default == "empty"
    assert rows["NAMES"].type == "list of str (JSON)" and rows["NAMES"].default == '`["x", "y"]`'
    assert rows["SWITCH"].default == "`false`"
    assert rows["PATH"].default == "`<repo>/var/index`"
    assert rows["TEMPLATE"].default == "`{a}\\n{b}`"
    assert rows["BARE"].description == ""


def test_prose_escapes_markdown_outside_code_spans() -> None:
    assert config_docs.prose("<alias>-v1 `<alias>` a|b `a|b` *_DEVICE") == r"\<alias>-v1 `<alias>` a\|b `a\|b` \*_DEVICE"


def test_check_command() -> None:
    result = CliRunner().invoke(app, ["config-docs", "--check"])
    assert result.exit_code == 0, result.output
    assert "up to date" in result.output
