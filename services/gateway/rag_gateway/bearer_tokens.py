"""OIDC/JWT bearer tokens: the signature checked against a JWKS URL or a static public key, then
issuer, audience and expiry; the claims mapped to an :class:`Identity` by configuration.

PyJWT does the cryptography and the registered-claim checks; ``PyJWKClient`` fetches and caches the
identity provider's key set (its blocking fetch runs in a worker thread).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import jwt
from pydantic import ValidationError

from rag_common.identity import ALL_SCOPES, Identity, Scope

if TYPE_CHECKING:
    from rag_gateway.settings import GatewaySettings


class InvalidToken(Exception):
    """The token is not one this gateway accepts; ``str(exc)`` says why (safe to show the caller)."""


@dataclass(frozen=True)
class ClaimMapping:
    """Which claims hold the identity. ``scopes_claim`` may be a space-separated string (OAuth's
    ``scope``) or a list; only the product's scopes (chat, ingest, admin) are kept from it. The
    claims' names have no defaults of their own: ``of(settings)``, whose ``jwt_*`` fields are the one
    source."""

    tenant_claim: str
    user_claim: str
    groups_claim: str
    scopes_claim: str
    #: The tenant of a token without the tenant claim; None = such a token is refused.
    default_tenant: str | None
    #: The scopes of a token whose scope claim names none of the product's.
    default_scopes: Sequence[Scope] = field(default_factory=lambda: ("chat",))

    @classmethod
    def of(cls, settings: GatewaySettings) -> ClaimMapping:
        return cls(
            tenant_claim=settings.jwt_tenant_claim, user_claim=settings.jwt_user_claim,
            groups_claim=settings.jwt_groups_claim, scopes_claim=settings.jwt_scopes_claim,
            default_tenant=settings.jwt_default_tenant,
        )


class JwtVerifier:
    def __init__(
        self,
        *,
        issuer: str,
        audience: str,
        algorithms: Sequence[str],
        claims: ClaimMapping,
        jwks_url: str | None = None,
        public_key: str | None = None,
        leeway_s: float = 30.0,
    ) -> None:
        """``algorithms`` and ``claims``: the settings' (``jwt_algorithms``, ``ClaimMapping.of``)."""
        if (jwks_url is None) == (public_key is None):
            raise ValueError("configure exactly one of jwks_url and public_key")
        self._issuer = issuer
        self._audience = audience
        self._jwks = jwt.PyJWKClient(jwks_url, cache_keys=True, lifespan=300) if jwks_url else None
        self._public_key = public_key
        self._algorithms = list(algorithms)
        self._claims = claims
        self._leeway_s = leeway_s

    async def verify(self, token: str) -> Identity:
        """The token's identity; raises InvalidToken for a bad signature, issuer, audience, expiry or claims."""
        try:
            key: Any = self._public_key
            if self._jwks is not None:
                key = (await asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)).key
            claims = jwt.decode(
                token,
                key,
                algorithms=self._algorithms,
                audience=self._audience,
                issuer=self._issuer,
                leeway=self._leeway_s,
                options={"require": ["exp", "iss", "aud", self._claims.user_claim]},
            )
        except jwt.ExpiredSignatureError as exc:
            raise InvalidToken("token expired") from exc
        except jwt.PyJWKClientError as exc:
            raise InvalidToken(f"no signing key for this token: {exc}") from exc
        except jwt.InvalidTokenError as exc:
            raise InvalidToken(f"invalid token: {exc}") from exc
        return self._identity(claims)

    def _identity(self, claims: dict[str, Any]) -> Identity:
        mapping = self._claims
        tenant = claims.get(mapping.tenant_claim, mapping.default_tenant)
        if tenant is None:
            raise InvalidToken(f"token has no {mapping.tenant_claim!r} claim")
        groups = claims.get(mapping.groups_claim, [])
        if isinstance(groups, str):
            groups = [groups]
        raw_scopes = claims.get(mapping.scopes_claim, "")
        named = raw_scopes.split() if isinstance(raw_scopes, str) else list(raw_scopes or [])
        scopes = [scope for scope in ALL_SCOPES if scope in named] or list(mapping.default_scopes)
        try:
            return Identity(tenant=str(tenant), user=str(claims[mapping.user_claim]), groups=groups, scopes=scopes)
        except ValidationError as exc:
            raise InvalidToken(f"token claims do not form an identity: {exc.errors()[0]['msg']}") from exc
