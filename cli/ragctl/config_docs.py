"""``ragctl config-docs``: write ``docs/configuration.md``, the environment-variable reference, from the
services' pydantic-settings classes.

The settings classes are the one source of every default and every description (``Field(description=...)``);
this module only renders them: per service a table of each variable (its real name: prefix, alias),
type, default and description, then the shared ``LLM_*`` and ``EMBEDDER_*`` classes once each. The output
is deterministic (fields in declared order, no path of this machine), so ``tests/test_configuration_docs.py``
can regenerate it in memory and fail when the checked-in file is stale.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import NoneType, UnionType

from pydantic import SecretStr
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode

from rag_common.settings import EmbedderSettings, LanguageSettings, LLMSettings
from rag_gateway.settings import GatewaySettings
from rag_generator.settings import GeneratorSettings
from rag_refiner.settings import RefinerSettings
from rag_reranker.settings import RerankerSettings
from rag_retriever.settings import RetrieverSettings

REPO_ROOT = Path(__file__).resolve().parents[2]
DOC_PATH = REPO_ROOT / "docs" / "configuration.md"
REGENERATE = "make config-docs"


@dataclass(frozen=True)
class SharedSettings:
    """A settings class several services read: documented once, linked from each of them."""

    title: str
    anchor: str
    settings: type[BaseSettings]


@dataclass(frozen=True)
class ServiceConfig:
    """What one service reads: its own class (``ServiceSettings`` fields included) and shared ones."""

    name: str
    settings: type[BaseSettings]
    shared: tuple[SharedSettings, ...]


LLM = SharedSettings("LLM endpoint", "llm-endpoint", LLMSettings)
EMBEDDER = SharedSettings("Embedder runtime", "embedder-runtime", EmbedderSettings)
LANGUAGES = SharedSettings("Languages", "languages", LanguageSettings)

# Which service opens which shared class (their runtime.py); a settings class missing here fails
# tests/test_configuration_docs.py, which finds them all in the source.
SERVICES: tuple[ServiceConfig, ...] = (
    ServiceConfig("gateway", GatewaySettings, (LANGUAGES,)),
    ServiceConfig("refiner", RefinerSettings, (LLM,)),
    ServiceConfig("retriever", RetrieverSettings, (EMBEDDER, LANGUAGES)),
    ServiceConfig("reranker", RerankerSettings, (LLM, EMBEDDER)),
    ServiceConfig("generator", GeneratorSettings, (LLM, EMBEDDER, LANGUAGES)),
)
SHARED: tuple[SharedSettings, ...] = (LLM, EMBEDDER, LANGUAGES)


@dataclass(frozen=True)
class Variable:
    """One field of a settings class as an operator sets it."""

    names: tuple[str, ...]
    type: str
    default: str
    description: str


def documented_classes() -> tuple[type[BaseSettings], ...]:
    """Every settings class the reference covers."""
    return tuple(service.settings for service in SERVICES) + tuple(shared.settings for shared in SHARED)


def variables(settings: type[BaseSettings]) -> Iterator[Variable]:
    """The class's fields in declared order (inherited ones first, as pydantic orders them)."""
    source = EnvSettingsSource(settings)
    for name, field in settings.model_fields.items():
        yield Variable(
            names=env_names(source, name, field),
            type=type_name(field.annotation, decoded=NoDecode not in field.metadata),
            default=default_text(field),
            description=" ".join((field.description or "").split()),
        )


def undescribed() -> list[str]:
    """Variables without a description (rendered with an empty one)."""
    return [
        variable.names[0]
        for settings in documented_classes()
        for variable in variables(settings)
        if not variable.description
    ]


def env_names(source: EnvSettingsSource, name: str, field: FieldInfo) -> tuple[str, ...]:
    """The variables pydantic-settings reads for ``field``, asked of its own environment source so
    prefixes, ``validation_alias`` and ``populate_by_name`` count exactly as they do at start-up."""
    names = (env_name.upper() for _, env_name, _ in source._extract_field_info(field, name))
    return tuple(dict.fromkeys(names))


def type_name(annotation: object, *, decoded: bool = True) -> str:
    """A type as an operator writes it into a variable."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, UnionType):
        present = [arg for arg in args if arg is not NoneType]
        text = " or ".join(type_name(arg, decoded=decoded) for arg in present)
        return f"{text}, optional" if len(present) < len(args) else text
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{value}`" for value in args)
    if origin is list:
        item = type_name(args[0]) if args else "any"
        item = item.removeprefix("one of ")  # "list of `a`, `b`", not "list of one of"
        # NoDecode: the raw string goes to the field's own validator (its description says how).
        return f"list of {item} (JSON)" if decoded else f"list of {item}"
    if annotation is SecretStr:
        return "secret str"
    return annotation.__name__ if isinstance(annotation, type) else str(annotation)


def default_text(field: FieldInfo) -> str:
    """The default as one would set it: ``unset`` for None, factories evaluated, secrets as defined,
    lists as JSON (or comma-joined for a field that decodes its own string)."""
    value = field.get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "`true`" if value else "`false`"
    if isinstance(value, list):
        text = json.dumps(value) if NoDecode not in field.metadata else ",".join(str(item) for item in value)
    else:
        text = str(value)
    if text == "":
        return "empty"
    return code(symbolic_paths(text.replace("\n", "\\n"))).replace("|", "\\|")  # a table cell


def symbolic_paths(text: str) -> str:
    """A default built from this checkout's or this user's path, written as ``<repo>`` / ``~``."""
    return text.replace(str(REPO_ROOT), "<repo>").replace(str(Path.home()), "~")


def code(text: str) -> str:
    """``text`` as a Markdown code span (longer fences when it holds backticks)."""
    fence = "`" * (max((len(run) for run in re.findall(r"`+", text)), default=0) + 1)
    padded = f" {text} " if text.startswith("`") or text.endswith("`") else text
    return f"{fence}{padded}{fence}"


def prose(text: str) -> str:
    """Prose for Markdown and table cells: outside code spans ``<``, ``*`` and ``\\`` are escaped
    (``<alias>`` would vanish as an HTML tag, ``*`` start emphasis); ``|`` everywhere, tables split on it."""
    parts = re.split(r"(`+[^`]*`+)", text)
    escaped = [part if index % 2 else re.sub(r"([<*|\\])", r"\\\1", part) for index, part in enumerate(parts)]
    return "".join(part.replace("|", "\\|") if index % 2 else part for index, part in enumerate(escaped))


def table(settings: type[BaseSettings]) -> list[str]:
    rows = ["| variable | type | default | description |", "|---|---|---|---|"]
    for variable in variables(settings):
        names = "<br>".join(f"`{name}`" for name in variable.names)
        rows.append(f"| {names} | {prose(variable.type)} | {variable.default} | {prose(variable.description)} |")
    return rows


def class_summary(settings: type[BaseSettings]) -> list[str]:
    """Where the class lives, and its docstring as one paragraph if it has its own."""
    lines = [f"From `{settings.__module__}.{settings.__name__}`."]
    if settings.__doc__:  # a class's own: Python does not inherit __doc__
        lines += ["", prose(" ".join(settings.__doc__.split()))]
    return lines


def render(services: Sequence[ServiceConfig] = SERVICES, shared: Sequence[SharedSettings] = SHARED) -> str:
    """The whole reference, as written to ``docs/configuration.md``."""
    lines = [
        "# Configuration: every environment variable",
        "",
        f"<!-- Generated by `{REGENERATE}` (`ragctl config-docs`) from the settings classes; do not edit. -->",
        "",
        "Generated from the services' pydantic-settings classes, the one source of every default: edit a",
        f"field's `description` there and run `{REGENERATE}`; `tests/test_configuration_docs.py` fails",
        "when this file is stale. Names are case-insensitive; a variable listed twice in one row reads",
        "either name. `list ... (JSON)` values are JSON arrays (`[\"RS256\"]`). Relative paths are relative",
        "to the process's working directory. `make run` (`ragctl up`) sets a few of these itself: the services'",
        "URLs, ports, data paths and `RAG_SERVICE_TOKEN` (`stack_env`, `start_service` in `cli/ragctl/stack.py`).",
        "",
        "Tracing and log export read the standard `OTEL_*` variables, not a settings class: see",
        "[observability.md](observability.md).",
        "",
    ]
    for service in services:
        lines += [f"## {service.name}", "", *class_summary(service.settings), ""]
        if service.shared:
            links = ", ".join(f"[{entry.title}](#{entry.anchor})" for entry in service.shared)
            lines += [f"Also reads: {links}.", ""]
        lines += [*table(service.settings), ""]
    for entry in shared:
        readers = ", ".join(service.name for service in services if entry in service.shared)
        lines += [f"## {entry.title}", "", *class_summary(entry.settings), "", f"Read by: {readers}.", ""]
        lines += [*table(entry.settings), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def write(path: Path = DOC_PATH) -> bool:
    """Write the reference; whether the file changed."""
    text = render()
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def is_current(path: Path = DOC_PATH) -> bool:
    return path.exists() and path.read_text(encoding="utf-8") == render()
