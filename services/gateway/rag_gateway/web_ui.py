"""The web chat (``/``): what its routes in ``app.py`` serve: the static page and its compiled
script (an allow-list of files), the headers with a strict CSP, and the sign-in configuration.

The front end is TypeScript in ``services/gateway/web/src``, compiled by ``make web`` into
``rag_gateway/static/js`` and checked in, so nothing is built at run time and nothing is fetched from
another origin (docs/web-ui.md). The page talks to the same JSON API as any client; the only route it
adds is ``GET /v1/auth/config``, which tells it how to sign in.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import Field

from rag_common.errors import NotFound
from rag_common.schemas import WireModel
from rag_gateway.settings import GatewaySettings

STATIC = Path(__file__).with_name("static")
MEDIA_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


class OidcConfig(WireModel):
    """Where the browser signs in: authorization code with PKCE, as a public client."""

    provider_name: str
    client_id: str
    authorization_url: str
    token_url: str
    scope: str


class AuthConfig(WireModel):
    auth: Literal["on", "off"] = Field(description="off: every caller is the configured local user; no sign-in needed.")
    api_keys: bool = Field(description="API keys are accepted (always, when auth is on).")
    oidc: OidcConfig | None = Field(description="The OIDC provider the page offers, if one is configured.")


def auth_config(settings: GatewaySettings) -> AuthConfig:
    oidc = None
    if settings.auth == "on" and settings.jwt_issuer and settings.oidc_client_id and settings.oidc_authorization_url and settings.oidc_token_url:
        oidc = OidcConfig(
            provider_name=settings.oidc_provider_name,
            client_id=settings.oidc_client_id,
            authorization_url=settings.oidc_authorization_url,
            token_url=settings.oidc_token_url,
            scope=settings.oidc_scope,
        )
    return AuthConfig(auth=settings.auth, api_keys=settings.auth == "on", oidc=oidc)


def content_security_policy(config: AuthConfig) -> str:
    """Scripts, styles and requests only from this origin (plus the OIDC token endpoint, which the
    browser must reach to exchange its code); no inline script or style, no frames, no plugins."""
    connect = ["'self'"]
    if config.oidc is not None:
        parts = urlsplit(config.oidc.token_url)
        connect.append(f"{parts.scheme}://{parts.netloc}")
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src {' '.join(connect)}",
            "form-action 'self'",
            "base-uri 'none'",
            "frame-ancestors 'none'",
        ]
    )


def security_headers(config: AuthConfig) -> dict[str, str]:
    return {
        "Content-Security-Policy": content_security_policy(config),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "X-Frame-Options": "DENY",
        "Cache-Control": "no-cache",
    }


class StaticFiles:
    """The files the page may load, by their URL path under ``/static/``; nothing else is served."""

    def __init__(self, root: Path = STATIC) -> None:
        self.root = root
        self._files = {
            path.relative_to(root).as_posix(): path
            for path in sorted(root.rglob("*"))
            if path.is_file() and path.suffix in MEDIA_TYPES
        }

    @property
    def index(self) -> Path:
        return self.root / "index.html"

    def find(self, name: str) -> tuple[Path, str]:
        """The file and its media type; NotFound (404) for anything not in the allow-list."""
        path = self._files.get(name)
        if path is None:
            raise NotFound(f"no static file {name!r}")
        return path, MEDIA_TYPES[path.suffix]
