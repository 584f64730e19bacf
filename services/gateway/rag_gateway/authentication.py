"""Who is calling: an ``Authorization: Bearer`` credential → an :class:`Identity`, and its scopes checked.

Two kinds of credential, told apart by shape: our API keys (``rag_…``, ``api_keys.py``) and OIDC/JWT
bearer tokens (``bearer_tokens.py``, only when an issuer is configured). With authentication turned
off (``GATEWAY_AUTH_MODE=off``, logged as a warning at start) every caller is one configured identity.
"""

from __future__ import annotations

from redis.exceptions import RedisError

from rag_common.errors import DependencyFailed, Forbidden, Unauthenticated
from rag_common.identity import Identity, Scope
from rag_gateway.api_keys import ApiKeyStore, looks_like_api_key
from rag_gateway.bearer_tokens import InvalidToken, JwtVerifier


class Authenticator:
    def __init__(self, keys: ApiKeyStore, tokens: JwtVerifier | None = None, *, anonymous: Identity | None = None):
        """``anonymous`` set means authentication is off and every caller is that identity."""
        self._keys = keys
        self._tokens = tokens
        self._anonymous = anonymous

    @property
    def enabled(self) -> bool:
        return self._anonymous is None

    async def authenticate(self, authorization: str | None) -> Identity:
        if self._anonymous is not None:
            return self._anonymous
        if not authorization:
            raise Unauthenticated("no credential: send 'Authorization: Bearer <API key or token>'")
        scheme, _, token = authorization.strip().partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise Unauthenticated("the Authorization header must be 'Bearer <API key or token>'")
        if looks_like_api_key(token):
            try:
                info = await self._keys.verify(token)
            except RedisError as exc:
                raise DependencyFailed("api_keys", "unavailable", f"Redis: {type(exc).__name__}") from exc
            if info is None:
                raise Unauthenticated("invalid, expired or revoked API key")
            return info.identity()
        if self._tokens is None:
            raise Unauthenticated("not an API key, and this gateway accepts no other bearer tokens")
        try:
            return await self._tokens.verify(token)
        except InvalidToken as exc:
            raise Unauthenticated(str(exc)) from exc


def require_scope(identity: Identity, scope: Scope) -> Identity:
    if not identity.has_scope(scope):
        raise Forbidden(f"this credential lacks the {scope!r} scope")
    return identity
