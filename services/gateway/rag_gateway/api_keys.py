"""API keys: high-entropy bearer tokens, stored only as hashes in Redis with the identity they stand for.

A key reads ``rag_<key_id>_<secret>``: ``key_id`` (12 hex characters) is public and names the key in
listings, revocations and the audit log; ``secret`` is 32 random bytes (``secrets.token_urlsafe``).
Redis holds ``rag:apikey:<key_id>`` → the SHA-256 of the whole token and the key's tenant, user,
groups, scopes and expiry; the token itself is shown once, at creation, and never stored. A plain
hash is enough for a 256-bit random secret (no dictionary to guess from, so no slow KDF is needed),
and the stored hash is compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass

from redis.asyncio import Redis

from rag_common.identity import Identity, Scope

KEY_PREFIX = "rag:apikey:"
TOKEN_PREFIX = "rag_"
_TOKEN = re.compile(r"^rag_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


@dataclass(frozen=True)
class ApiKeyInfo:
    """What is stored about a key (never the token)."""

    key_id: str
    tenant: str
    user: str
    groups: list[str]
    scopes: list[Scope]
    created_at: float
    #: Unix time after which the key is refused; None = does not expire.
    expires_at: float | None
    description: str = ""

    def identity(self) -> Identity:
        return Identity(tenant=self.tenant, user=self.user, groups=self.groups, scopes=self.scopes)

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now >= self.expires_at


@dataclass(frozen=True)
class CreatedKey:
    token: str
    info: ApiKeyInfo


def looks_like_api_key(token: str) -> bool:
    """True for anything shaped like one of our keys (a JWT never starts with ``rag_``)."""
    return token.startswith(TOKEN_PREFIX)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class ApiKeyStore:
    def __init__(self, redis: Redis) -> None:
        self._redis = redis

    async def create(
        self,
        *,
        tenant: str,
        user: str,
        groups: list[str] | None = None,
        scopes: list[Scope],
        ttl_s: float | None = None,
        description: str = "",
    ) -> CreatedKey:
        # Validated as an Identity first, so a key can never stand for an identity the services refuse.
        identity = Identity(tenant=tenant, user=user, groups=groups or [], scopes=scopes)
        key_id = secrets.token_hex(6)
        token = f"{TOKEN_PREFIX}{key_id}_{secrets.token_urlsafe(32)}"
        now = time.time()
        info = ApiKeyInfo(
            key_id=key_id,
            tenant=identity.tenant,
            user=identity.user,
            groups=identity.groups,
            scopes=identity.scopes,
            created_at=now,
            expires_at=now + ttl_s if ttl_s is not None else None,
            description=description,
        )
        record = {
            "digest": _digest(token),
            "tenant": info.tenant,
            "user": info.user,
            "groups": json.dumps(info.groups),
            "scopes": json.dumps(info.scopes),
            "created_at": repr(info.created_at),
            "expires_at": "" if info.expires_at is None else repr(info.expires_at),
            "description": description,
        }
        async with self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(KEY_PREFIX + key_id, mapping=record)
            if ttl_s is not None:
                # Redis drops the record itself once it is useless; expiry is also checked on use.
                pipe.expire(KEY_PREFIX + key_id, max(1, int(ttl_s) + 1))
            await pipe.execute()
        return CreatedKey(token, info)

    async def verify(self, token: str) -> ApiKeyInfo | None:
        """The key's record if ``token`` is a valid, unexpired, unrevoked key; else None."""
        match = _TOKEN.match(token)
        if match is None:
            return None
        record = await self._redis.hgetall(KEY_PREFIX + match.group(1))
        if not record:
            return None
        info = _info(match.group(1), record)
        stored = _text(record.get(b"digest", record.get("digest", "")))
        if not hmac.compare_digest(stored, _digest(token)) or info.expired(time.time()):
            return None
        return info

    async def list(self) -> list[ApiKeyInfo]:
        infos = []
        async for key in self._redis.scan_iter(match=KEY_PREFIX + "*", count=500):
            name = _text(key)
            record = await self._redis.hgetall(name)
            if record:
                infos.append(_info(name.removeprefix(KEY_PREFIX), record))
        return sorted(infos, key=lambda info: info.created_at)

    async def revoke(self, key_id: str) -> bool:
        """Delete the key; True if it existed."""
        return bool(await self._redis.delete(KEY_PREFIX + key_id))


def _text(value: bytes | str) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _info(key_id: str, raw: dict) -> ApiKeyInfo:
    record = {_text(k): _text(v) for k, v in raw.items()}
    return ApiKeyInfo(
        key_id=key_id,
        tenant=record["tenant"],
        user=record["user"],
        groups=json.loads(record["groups"]),
        scopes=json.loads(record["scopes"]),
        created_at=float(record["created_at"]),
        expires_at=float(record["expires_at"]) if record.get("expires_at") else None,
        description=record.get("description", ""),
    )
