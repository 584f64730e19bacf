"""API keys from the command line (``ragctl keys``) and the local stack's own key.

Keys live in the gateway's Redis (``rag_gateway.api_keys``: only a hash of each is stored), so the
CLI talks to Redis directly, as an operator with access to it would; the token is shown once.
"""

from __future__ import annotations

import asyncio
import getpass
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from redis.asyncio import Redis

from rag_common.identity import ALL_SCOPES, Scope
from rag_gateway.api_keys import ApiKeyInfo, ApiKeyStore, CreatedKey
from rag_gateway.audit_log import AuditLog

T = TypeVar("T")


def _with_store(redis_url: str, action: Callable[[ApiKeyStore, AuditLog], Awaitable[T]]) -> T:
    async def run() -> T:
        redis = Redis.from_url(redis_url, socket_connect_timeout=5)
        try:
            return await action(ApiKeyStore(redis), AuditLog(redis))
        finally:
            await redis.aclose()

    return asyncio.run(run())


def _operator() -> str:
    """Who ran the command, for the audit log: the operating-system user."""
    return f"operator:{getpass.getuser()}"


def create_key(
    redis_url: str,
    *,
    tenant: str,
    user: str,
    groups: list[str] | None = None,
    scopes: list[Scope],
    ttl_s: float | None = None,
    description: str = "",
) -> CreatedKey:
    async def create(store: ApiKeyStore, audit: AuditLog) -> CreatedKey:
        created = await store.create(
            tenant=tenant, user=user, groups=groups, scopes=scopes, ttl_s=ttl_s, description=description
        )
        info = created.info
        await audit.record(
            _operator(), "key.create", info.key_id, tenant=tenant, user=user, groups=info.groups, scopes=info.scopes
        )
        return created

    return _with_store(redis_url, create)


def list_keys(redis_url: str) -> list[ApiKeyInfo]:
    return _with_store(redis_url, lambda store, _: store.list())


def revoke_key(redis_url: str, key_id: str) -> bool:
    async def revoke(store: ApiKeyStore, audit: AuditLog) -> bool:
        revoked = await store.revoke(key_id)
        if revoked:
            await audit.record(_operator(), "key.revoke", key_id)
        return revoked

    return _with_store(redis_url, revoke)


def create_local_admin_key(redis_url: str) -> str:
    """The key ``ragctl up`` prints: tenant ``default``, user ``local-admin``, every scope."""
    created = create_key(
        redis_url, tenant="default", user="local-admin", scopes=list(ALL_SCOPES), description="created by ragctl up"
    )
    return created.token


def is_valid_key(redis_url: str, token: str) -> bool:
    return _with_store(redis_url, lambda store, _: store.verify(token)) is not None


def local_admin_key(redis_url: str, key_file: Path | None) -> str:
    """The local stack's key: the one in ``key_file`` while Redis still knows it (so a restarted
    ``make run`` keeps the key you exported), else a new one, written there (mode 0600)."""
    if key_file is not None and key_file.is_file():
        token = key_file.read_text().strip()
        if token and is_valid_key(redis_url, token):
            return token
    token = create_local_admin_key(redis_url)
    if key_file is not None:
        key_file.parent.mkdir(parents=True, exist_ok=True)
        key_file.write_text(token + "\n")
        key_file.chmod(0o600)
    return token
