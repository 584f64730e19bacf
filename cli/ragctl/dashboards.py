"""``make dashboards`` / ``ragctl dashboards``: install the query log's OpenSearch side.

Three steps, each one HTTP request built by a function here (tests pin them byte for byte):

1. ``PUT {opensearch}/_index_template/rag-query-logs``: ``deploy/opensearch/query-logs-template.json``;
2. ``PUT {opensearch}/_plugins/_ism/policies/rag-query-logs-retention``:
   ``deploy/opensearch/query-logs-ism-policy.json`` (an existing policy is replaced: its
   ``_seq_no``/``_primary_term`` are read first, as the ISM API requires for an update);
3. ``POST {dashboards}/api/saved_objects/_import?overwrite=true`` with the ``osd-xsrf`` header and
   one ``multipart/form-data`` file part per ``deploy/dashboards/*.ndjson``.

The multipart boundary is fixed so the request body is the same bytes on every run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
TEMPLATE_PATH = REPO_ROOT / "deploy" / "opensearch" / "query-logs-template.json"
ISM_POLICY_PATH = REPO_ROOT / "deploy" / "opensearch" / "query-logs-ism-policy.json"
DASHBOARDS_DIR = REPO_ROOT / "deploy" / "dashboards"
TEMPLATE_NAME = "rag-query-logs"
ISM_POLICY_ID = "rag-query-logs-retention"
#: Fixed so that the import request is reproducible (and pinned by tests/deploy/test_query_log_deploy.py).
MULTIPART_BOUNDARY = "rag-query-logs-saved-objects"


def _base(url: str) -> str:
    return url.rstrip("/")


def template_request(opensearch_url: str, template_path: Path = TEMPLATE_PATH) -> httpx.Request:
    return httpx.Request(
        "PUT",
        f"{_base(opensearch_url)}/_index_template/{TEMPLATE_NAME}",
        json=json.loads(template_path.read_text(encoding="utf-8")),
    )


def ism_policy_request(
    opensearch_url: str, policy_path: Path = ISM_POLICY_PATH, *, seq_no: int | None = None, primary_term: int | None = None
) -> httpx.Request:
    """Create the policy, or with ``seq_no``/``primary_term`` (from a GET) replace it."""
    params = {} if seq_no is None else {"if_seq_no": seq_no, "if_primary_term": primary_term}
    return httpx.Request(
        "PUT",
        f"{_base(opensearch_url)}/_plugins/_ism/policies/{ISM_POLICY_ID}",
        params=params,
        json=json.loads(policy_path.read_text(encoding="utf-8")),
    )


def saved_object_files(directory: Path = DASHBOARDS_DIR) -> list[Path]:
    return sorted(directory.glob("*.ndjson"))


def import_request(dashboards_url: str, ndjson: Path) -> httpx.Request:
    """The saved-objects import of one NDJSON file: multipart form field ``file``, ``overwrite=true``
    (a re-import updates the objects in place) and the ``osd-xsrf`` header the Dashboards API demands."""
    return httpx.Request(
        "POST",
        f"{_base(dashboards_url)}/api/saved_objects/_import",
        params={"overwrite": "true"},
        headers={"osd-xsrf": "true", "Content-Type": f"multipart/form-data; boundary={MULTIPART_BOUNDARY}"},
        files={"file": (ndjson.name, ndjson.read_bytes(), "application/ndjson")},
    )


@dataclass
class InstallReport:
    steps: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(step["ok"] for step in self.steps)


def _step(report: InstallReport, name: str, response: httpx.Response) -> dict[str, Any]:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text[:500]
    ok = response.is_success and not (isinstance(body, dict) and body.get("success") is False)
    report.steps.append({"step": name, "status": response.status_code, "ok": ok, "body": body})
    return body if isinstance(body, dict) else {}


def install(
    opensearch_url: str | None,
    dashboards_url: str | None,
    *,
    auth: tuple[str, str] | None = None,
    verify: bool = True,
    timeout_s: float = 30.0,
) -> InstallReport:
    """Run the steps whose URL is given (None skips the OpenSearch or the Dashboards side)."""
    report = InstallReport()
    with httpx.Client(auth=auth, verify=verify, timeout=timeout_s) as client:
        if opensearch_url:
            _step(report, "index template", client.send(template_request(opensearch_url)))
            existing = client.get(f"{_base(opensearch_url)}/_plugins/_ism/policies/{ISM_POLICY_ID}")
            if existing.status_code == 200:
                current = existing.json()
                request = ism_policy_request(opensearch_url, seq_no=current["_seq_no"], primary_term=current["_primary_term"])
            else:
                request = ism_policy_request(opensearch_url)
            _step(report, "ISM policy", client.send(request))
        if dashboards_url:
            for ndjson in saved_object_files():
                _step(report, f"saved objects {ndjson.name}", client.send(import_request(dashboards_url, ndjson)))
    return report
