"""Every service's OpenAPI document is true: a seeded schemathesis run (examples, coverage and
fuzzing phases, every check) against the real services, failing on any 5xx, any status, header or
body the document does not declare, any schema-valid request refused and any schema-violating one
accepted. What may be checked off, and why, is in ``cli/ragctl/schemathesis.toml``, shared with
``make fuzz`` (bench/openapi_fuzz.py), which runs thousands of cases per API.

Issue 12 found the drift this guards against: undocumented 400/404s, a body the document did not
declare, JSON errors on a stream route declared as text/event-stream, ``0`` taken for ``false``,
405s without ``Allow``.
"""

from __future__ import annotations

import subprocess

import pytest

from ragctl.fuzzing import schemathesis_command
from ragctl.stack import SERVICES

pytestmark = pytest.mark.e2e

#: Fixed, so a failure reproduces; schemathesis prints the seed and a replay command with each one.
SEED = 20261124


@pytest.mark.parametrize("service", SERVICES)
def test_the_openapi_document_tells_the_truth(fuzzed_stack: dict[str, str], service: str) -> None:
    command = schemathesis_command(
        service,
        fuzzed_stack[service],
        api_key=fuzzed_stack["api_key"],
        service_token=fuzzed_stack["service_token"],
        seed=SEED,
    )
    result = subprocess.run(command, capture_output=True, text=True, timeout=1200, check=False)
    # The failures section first (it names each case and its curl), then the summary.
    failures = result.stdout.find("FAILURES")
    report = (result.stdout[failures:] if failures >= 0 else result.stdout)[:30000] + result.stderr[-2000:]
    assert result.returncode == 0, f"schemathesis found problems in the {service} API:\n{report}"
    assert "generated" in result.stdout and " passed" in result.stdout, report
