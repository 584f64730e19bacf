"""The schemathesis command line that fuzzes one service's OpenAPI document, shared by the seeded run
in ``make test`` (tests/fuzz/test_openapi_fuzz.py) and ``make fuzz`` (bench/openapi_fuzz.py).

Every phase (examples, coverage, fuzzing) and every check; what is checked off, and why, is in
``schemathesis.toml`` next to this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity

CONFIG = Path(__file__).with_name("schemathesis.toml")
#: Who the fuzzer is to the internal services: every scope, in the stack's default tenant.
FUZZ_IDENTITY = encode_identity(Identity(tenant="default", user="fuzzer", scopes=["chat", "ingest", "admin"]))


def schemathesis_command(
    service: str,
    url: str,
    *,
    api_key: str,
    service_token: str,
    seed: int,
    max_examples: int | None = None,
    report_json: Path | None = None,
    report_har: Path | None = None,
    request_timeout_s: float = 120.0,
) -> list[str]:
    """``schemathesis run`` against ``url``/openapi.json with the stack's credentials.

    ``max_examples`` overrides the configuration's per-operation bound; ``report_json`` asks for
    schemathesis's JSON run report (cases, failures grouped by kind) at that path, ``report_har``
    for a HAR file of every request sent and its response."""
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--no-color",
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/openapi.json",
        "--seed",
        str(seed),
        "--request-timeout",
        str(request_timeout_s),
        # The gateway's credential and the internal services' one (each service ignores the other's);
        # schemathesis's `ignored_auth` check also sends requests without them, expecting 401.
        "--header",
        f"Authorization: Bearer {api_key}",
        "--header",
        f"X-RAG-Service-Token: {service_token}",
    ]
    if service != "gateway":
        # The caller's identity as the gateway passes it on (the retriever's `RagIdentity` scheme,
        # 401 without it; the other services ignore it).
        command += ["--header", f"{IDENTITY_HEADER}: {FUZZ_IDENTITY}"]
    if max_examples is not None:
        command += ["--max-examples", str(max_examples)]
    reports = {"json": report_json, "har": report_har}
    if any(reports.values()):
        command += ["--report", ",".join(kind for kind, path in reports.items() if path)]
        command += [arg for kind, path in reports.items() if path for arg in (f"--report-{kind}-path", str(path))]
    return command
