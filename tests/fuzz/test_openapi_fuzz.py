"""Every service's OpenAPI document is true: a seeded schemathesis run (examples, coverage and
fuzzing phases, every check) against the real services, failing on any 5xx, any status, header or
body the document does not declare, any schema-valid request refused and any schema-violating one
accepted. What may be checked off, and why, is in ``schemathesis.toml`` next to this file.

Issue 12 found the drift this guards against: undocumented 400/404s, a body the document did not
declare, JSON errors on a stream route declared as text/event-stream, ``0`` taken for ``false``,
405s without ``Allow``.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from ragctl.stack import SERVICES

pytestmark = pytest.mark.e2e

CONFIG = Path(__file__).with_name("schemathesis.toml")
#: Who the fuzzer is to the internal services: every scope, in the stack's default tenant.
FUZZ_IDENTITY = encode_identity(Identity(tenant="default", user="fuzzer", scopes=["chat", "ingest", "admin"]))
#: Fixed, so a failure reproduces; schemathesis prints the seed and a replay command with each one.
SEED = 20261124


@pytest.mark.parametrize("service", SERVICES)
def test_the_openapi_document_tells_the_truth(fuzzed_stack: dict[str, str], service: str) -> None:
    url = fuzzed_stack[service]
    command = [
        str(Path(sys.executable).with_name("schemathesis")),
        "--no-color",
        "--config-file",
        str(CONFIG),
        "run",
        f"{url}/openapi.json",
        "--seed",
        str(SEED),
        "--request-timeout",
        "120",
        # The gateway's credential and the internal services' one (each service ignores the other's);
        # schemathesis's `ignored_auth` check also sends requests without them, expecting 401.
        "--header",
        f"Authorization: Bearer {fuzzed_stack['api_key']}",
        "--header",
        f"X-RAG-Service-Token: {fuzzed_stack['service_token']}",
    ]
    if service != "gateway":
        # The caller's identity as the gateway passes it on (the retriever's `RagIdentity` scheme,
        # 401 without it; the other services ignore it).
        command += ["--header", f"{IDENTITY_HEADER}: {FUZZ_IDENTITY}"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
    # The failures section first (it names each case and its curl), then the summary.
    failures = result.stdout.find("FAILURES")
    report = (result.stdout[failures:] if failures >= 0 else result.stdout)[:30000] + result.stderr[-2000:]
    assert result.returncode == 0, f"schemathesis found problems in the {service} API:\n{report}"
    assert "generated" in result.stdout and " passed" in result.stdout, report
