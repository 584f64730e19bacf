"""The service credential: only the gateway (or an operator holding the secret) may call the
internal services, so that reaching the retriever's port does not bypass the gateway's
authentication.

Every service shares one secret, ``RAG_SERVICE_TOKEN`` (a Kubernetes Secret in production, a random
value per local stack). The gateway's clients send it in ``X-RAG-Service-Token``; an internal
service given the secret refuses any other request with 401, except its probes, metrics and API
docs (``ServiceTokenMiddleware`` in ``rag_common.service``, the HTTP layer). mTLS between the pods is the alternative for deployments that have a mesh (docs/security.md).
"""

from __future__ import annotations

from typing import Any

SERVICE_TOKEN_HEADER = "X-RAG-Service-Token"
#: Reachable without the credential: what orchestrators and operators poll, and the API's description.
OPEN_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"})
SECURITY_SCHEME = "ServiceToken"


def document_service_token(openapi: dict[str, Any]) -> dict[str, Any]:
    """Declare the credential in the OpenAPI document: the scheme, and on every operation outside
    ``OPEN_PATHS`` the requirement and its 401."""
    components = openapi.setdefault("components", {})
    components.setdefault("securitySchemes", {})[SECURITY_SCHEME] = {
        "type": "apiKey",
        "in": "header",
        "name": SERVICE_TOKEN_HEADER,
        "description": "The shared service credential (RAG_SERVICE_TOKEN); only the gateway holds it",
    }
    for path, item in openapi.get("paths", {}).items():
        if path in OPEN_PATHS:
            continue
        for operation in item.values():
            operation["security"] = [{SECURITY_SCHEME: []}]
            operation.setdefault("responses", {}).setdefault("401", {"description": "Without the service credential"})
    return openapi
