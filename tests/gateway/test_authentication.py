"""Credentials → identities: API keys in real Redis, JWTs signed with real RSA keys (a static public
key, and a JWKS document served over real HTTP), rate limits and the audit log in real Redis."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import AsyncIterator, Iterator

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI
from redis.asyncio import Redis

from rag_common.errors import Forbidden, RateLimited, Unauthenticated
from rag_common.identity import Identity
from rag_gateway.api_keys import KEY_PREFIX, ApiKeyStore
from rag_gateway.audit_log import AuditLog
from rag_gateway.authentication import Authenticator, require_scope
from rag_gateway.bearer_tokens import ClaimMapping, JwtVerifier
from rag_gateway.rate_limits import RateLimits
from rag_gateway.settings import GatewaySettings
from ragctl.in_process import serve_in_thread

ISSUER, AUDIENCE = "https://idp.example.edu", "rag-gateway"


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url)
    yield client
    await client.aclose()


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def public_pem(signing_key: rsa.RSAPrivateKey) -> str:
    return signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


@pytest.fixture(scope="module")
def jwks_url(signing_key: rsa.RSAPrivateKey) -> Iterator[str]:
    """The identity provider's key set, served over real HTTP."""
    jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(signing_key.public_key()))
    app = FastAPI()

    @app.get("/.well-known/jwks.json")
    async def jwks() -> dict:
        return {"keys": [{**jwk, "kid": "key-1", "use": "sig", "alg": "RS256"}]}

    with serve_in_thread(app) as url:
        yield f"{url}/.well-known/jwks.json"


def sign(key: rsa.RSAPrivateKey, **overrides) -> str:
    claims = {
        "iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "tenant": "uni", "groups": ["staff", "physics"],
        "scope": "openid chat ingest", "exp": int(time.time()) + 300,
    }
    claims.update(overrides)
    claims = {k: v for k, v in claims.items() if v is not None}
    return jwt.encode(claims, key, algorithm="RS256", headers={"kid": "key-1"})


# --------------------------------------------------------------------------- API keys


async def test_a_created_key_authenticates_as_its_identity_and_only_its_hash_is_stored(redis: Redis) -> None:
    store = ApiKeyStore(redis)
    created = await store.create(tenant="uni", user="bob", groups=["students"], scopes=["chat"], description="t")
    assert created.token.startswith("rag_") and len(created.token) > 50
    raw = await redis.hgetall(KEY_PREFIX + created.info.key_id)
    assert created.token.encode() not in b"".join(raw.values())  # never stored in clear
    identity = await Authenticator(store).authenticate(f"Bearer {created.token}")
    assert identity == Identity(tenant="uni", user="bob", groups=["students"], scopes=["chat"])
    assert created.info.key_id in {info.key_id for info in await store.list()}


async def test_revoked_expired_tampered_and_unknown_keys_are_401(redis: Redis) -> None:
    store = ApiKeyStore(redis)
    auth = Authenticator(store)
    revoked = await store.create(tenant="uni", user="carol", scopes=["chat"])
    assert await store.revoke(revoked.info.key_id)
    expired = await store.create(tenant="uni", user="dave", scopes=["chat"], ttl_s=0.01)
    await asyncio.sleep(0.05)
    valid = await store.create(tenant="uni", user="erin", scopes=["chat"])
    tampered = valid.token[:-1] + ("A" if valid.token[-1] != "A" else "B")
    for header in (f"Bearer {revoked.token}", f"Bearer {expired.token}", f"Bearer {tampered}",
                   "Bearer rag_000000000000_" + "x" * 43, None, "", "Basic dXNlcjpwdw==", "Bearer"):
        with pytest.raises(Unauthenticated):
            await auth.authenticate(header)
    assert (await auth.authenticate(f"bearer  {valid.token} ")).user == "erin"


async def test_a_key_for_an_invalid_identity_is_never_created(redis: Redis) -> None:
    with pytest.raises(ValueError):
        await ApiKeyStore(redis).create(tenant="bad tenant!", user="x", scopes=["chat"])


def test_scopes_are_checked() -> None:
    identity = Identity(tenant="uni", user="bob", scopes=["chat"])
    assert require_scope(identity, "chat") is identity
    with pytest.raises(Forbidden, match="'ingest' scope"):
        require_scope(identity, "ingest")


# --------------------------------------------------------------------------- JWT


def settings_verifier(**source: str) -> JwtVerifier:
    """A verifier with the settings' algorithms and claim mapping (``GatewaySettings``, the one source)."""
    settings = GatewaySettings()
    return JwtVerifier(algorithms=settings.jwt_algorithms, claims=ClaimMapping.of(settings), **source)


@pytest.mark.parametrize("source", ["jwks", "static"])
async def test_a_valid_jwt_maps_its_claims_to_an_identity(source, signing_key, public_pem, jwks_url, redis) -> None:
    verifier = settings_verifier(
        issuer=ISSUER, audience=AUDIENCE, **({"jwks_url": jwks_url} if source == "jwks" else {"public_key": public_pem})
    )
    identity = await Authenticator(ApiKeyStore(redis), verifier).authenticate(f"Bearer {sign(signing_key)}")
    assert identity == Identity(tenant="uni", user="alice", groups=["staff", "physics"], scopes=["chat", "ingest"])


@pytest.mark.parametrize(
    ("claims", "reason"),
    [
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"aud": "someone-else"}, "(?i)audience"),
        ({"iss": "https://evil.example"}, "(?i)issuer"),
        ({"tenant": None}, "'tenant' claim"),
        ({"sub": None}, "sub"),
        ({"tenant": "not a tenant!"}, "identity"),
    ],
)
async def test_bad_jwts_are_401_with_the_reason(claims, reason, signing_key, jwks_url, redis) -> None:
    auth = Authenticator(ApiKeyStore(redis), settings_verifier(issuer=ISSUER, audience=AUDIENCE, jwks_url=jwks_url))
    with pytest.raises(Unauthenticated, match=reason):
        await auth.authenticate(f"Bearer {sign(signing_key, **claims)}")


async def test_a_token_signed_by_another_key_or_tampered_is_401(signing_key, public_pem, redis) -> None:
    auth = Authenticator(ApiKeyStore(redis), settings_verifier(issuer=ISSUER, audience=AUDIENCE, public_key=public_pem))
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    with pytest.raises(Unauthenticated, match="invalid token"):
        await auth.authenticate(f"Bearer {sign(other)}")
    header, payload, signature = sign(signing_key).split(".")
    forged = jwt.utils.base64url_encode(json.dumps({"sub": "mallory", "tenant": "uni"}).encode()).decode()
    with pytest.raises(Unauthenticated):
        await auth.authenticate(f"Bearer {header}.{forged}.{signature}")
    unsigned = jwt.encode({"iss": ISSUER, "aud": AUDIENCE, "sub": "x", "tenant": "uni", "exp": time.time() + 60},
                          None, algorithm="none")
    with pytest.raises(Unauthenticated):
        await auth.authenticate(f"Bearer {unsigned}")


async def test_claim_mapping_and_default_scopes_are_configurable(signing_key, public_pem, redis) -> None:
    mapping = dataclasses.replace(
        ClaimMapping.of(GatewaySettings()), tenant_claim="org", user_claim="email", groups_claim="roles", default_tenant=None
    )
    verifier = JwtVerifier(
        issuer=ISSUER, audience=AUDIENCE, public_key=public_pem, algorithms=GatewaySettings().jwt_algorithms, claims=mapping
    )
    token = sign(signing_key, org="acme", email="a@acme.test", roles="editors", scope="openid")
    identity = await verifier.verify(token)
    assert identity == Identity(tenant="acme", user="a@acme.test", groups=["editors"], scopes=["chat"])


async def test_without_an_issuer_configured_only_api_keys_are_accepted(signing_key, redis) -> None:
    with pytest.raises(Unauthenticated, match="accepts no other bearer tokens"):
        await Authenticator(ApiKeyStore(redis)).authenticate(f"Bearer {sign(signing_key)}")


async def test_auth_off_is_one_configured_identity(redis) -> None:
    anonymous = Identity(tenant="default", user="anonymous", scopes=["chat", "ingest", "admin"])
    auth = Authenticator(ApiKeyStore(redis), anonymous=anonymous)
    assert not auth.enabled
    assert await auth.authenticate(None) == anonymous


# --------------------------------------------------------------------------- rate limits and audit


async def test_a_burst_over_the_limit_is_refused_with_retry_after(redis_url: str, redis: Redis) -> None:
    limits = RateLimits(redis_url, {"chat": "5/minute"}, key_prefix=f"rag:test-ratelimit:{time.time_ns()}")
    caller = Identity(tenant="uni", user=f"burst-{time.time_ns()}", scopes=["chat"])
    other = Identity(tenant="uni", user=f"calm-{time.time_ns()}", scopes=["chat"])
    for _ in range(5):
        await limits.hit("chat", caller)
    with pytest.raises(RateLimited) as refused:
        await limits.hit("chat", caller)
    assert 1 <= refused.value.retry_after_s <= 60
    await limits.hit("chat", other)  # counted per caller
    await limits.hit("ingest", caller)  # and per kind: ingest has no limit here


async def test_audit_entries_reach_the_redis_stream(redis: Redis) -> None:
    stream = f"rag:test-audit:{time.time_ns()}"
    audit = AuditLog(redis, stream=stream)
    admin = Identity(tenant="uni", user="root", scopes=["admin"])
    await audit.record(admin, "key.create", "key:abc", user="bob", scopes=["chat"])
    await audit.record("ragctl", "key.revoke", "key:abc")
    newest, oldest = await audit.recent(10)
    assert (newest["actor"], newest["action"], newest["target"]) == ("ragctl", "key.revoke", "key:abc")
    assert oldest["actor"] == "uni/root" and oldest["detail"] == {"user": "bob", "scopes": ["chat"]}
    await redis.delete(stream)
