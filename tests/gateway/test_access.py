"""Who may call the gateway (issue 13, part 1): every route but the probes, metrics and the API docs
needs a credential (401 without, 403 without the scope), over real HTTP with real Redis keys."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx
import jwt
import openai
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from redis.asyncio import Redis

from rag_gateway.api_keys import ApiKeyStore
from rag_gateway.app import create_app
from ragctl.in_process import serve_in_thread

from .support import gateway_settings

OPEN_PATHS = {
    "/healthz", "/readyz", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/metrics",
    "/v1/auth/config",  # how the web chat signs in: needed before there is a credential
}
#: A body each protected operation accepts, so that what is refused is the caller, not the request.
BODIES = {
    ("POST", "/v1/chat"): {"message": "What is the capital?"},
    ("POST", "/v1/chat/stream"): {"message": "What is the capital?"},
    ("POST", "/v1/chat/completions"): {"model": "m", "messages": [{"role": "user", "content": "What is the capital?"}]},
    ("POST", "/v1/documents"): {"documents": [{"text": "Some text."}]},
    ("POST", "/v1/conversations/{conversation_id}/turns/{turn_index}/feedback"): {"rating": "down", "comment": None},
}
SCOPE_OF = {"/v1/documents": {"POST": "ingest"}, "/v1/documents/{doc_id}": {"DELETE": "ingest"}}


@pytest.fixture(scope="module")
def signing_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


@pytest.fixture(scope="module")
def gateway(redis_url: str, fake_services, signing_key) -> Iterator[str]:
    url, _ = fake_services
    public_pem = signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    settings = gateway_settings(
        redis_url,
        url,
        auth="on",
        jwt_issuer="https://idp.example",
        jwt_audience="rag",
        jwt_public_key=public_pem,
        rate_limit_chat="1000/minute",
    )
    with serve_in_thread(create_app(settings)) as gateway_url:
        yield gateway_url


async def _key(redis_url: str, *scopes: str, user: str = "alice") -> str:
    redis = Redis.from_url(redis_url)
    try:
        return (await ApiKeyStore(redis).create(tenant="uni", user=user, scopes=list(scopes))).token
    finally:
        await redis.aclose()


def _operations(gateway: str) -> list[tuple[str, str]]:
    document = httpx.get(f"{gateway}/openapi.json").json()
    return [
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if path not in OPEN_PATHS
    ]


def _call(gateway: str, method: str, path: str, token: str | None = None) -> httpx.Response:
    concrete = (
        path.replace("{conversation_id}", "c0ffee")
        .replace("{doc_id}", "some-doc")
        .replace("{chunk_id}", "some-chunk")
        .replace("{turn_index}", "0")
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx.request(method, f"{gateway}{concrete}", json=BODIES.get((method, path)), headers=headers, timeout=30)


def test_every_protected_route_is_401_without_a_credential_and_the_probes_are_open(gateway: str) -> None:
    operations = _operations(gateway)
    # chat ×3, models, conversations ×5 (list, one, its cited sources, feedback, delete), documents ×3
    assert len(operations) == 12, operations
    for method, path in operations:
        response = _call(gateway, method, path)
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert "Authorization: Bearer" in response.json()["error"]
        for bad in ("rag_0123456789ab_" + "x" * 43, "not-a-key"):
            assert _call(gateway, method, path, bad).status_code == 401, (method, path, bad)
    for path in ("/healthz", "/readyz", "/openapi.json", "/docs", "/metrics", "/v1/auth/config", "/"):
        assert httpx.get(f"{gateway}{path}").status_code in (200, 503), path
    security = httpx.get(f"{gateway}/openapi.json").json()["components"]["securitySchemes"]
    assert security["HTTPBearer"]["scheme"] == "bearer"


async def test_each_route_needs_its_scope(gateway: str, redis_url: str) -> None:
    chat_only = await _key(redis_url, "chat")
    ingest_only = await _key(redis_url, "ingest")
    for method, path in _operations(gateway):
        needed = SCOPE_OF.get(path, {}).get(method, "chat")
        wrong = ingest_only if needed == "chat" else chat_only
        response = _call(gateway, method, path, wrong)
        assert response.status_code == 403, (method, path, response.text)
        assert f"'{needed}' scope" in response.json()["error"]
        right = chat_only if needed == "chat" else ingest_only
        assert _call(gateway, method, path, right).status_code not in (401, 403), (method, path)


async def test_a_key_answers_the_demo_question_and_a_revoked_one_stops_at_once(gateway: str, redis_url: str) -> None:
    token = await _key(redis_url, "chat")
    response = _call(gateway, "POST", "/v1/chat", token)
    assert response.status_code == 200 and response.json()["answer"]
    redis = Redis.from_url(redis_url)
    try:
        assert await ApiKeyStore(redis).revoke(token.split("_")[1])
    finally:
        await redis.aclose()
    assert _call(gateway, "POST", "/v1/chat", token).status_code == 401


def test_an_oidc_token_from_the_configured_issuer_is_accepted(gateway: str, signing_key) -> None:
    import time

    claims = {"iss": "https://idp.example", "aud": "rag", "sub": "bob", "tenant": "uni", "scope": "openid chat", "exp": int(time.time()) + 60}
    token = jwt.encode(claims, signing_key, algorithm="RS256")
    assert _call(gateway, "POST", "/v1/chat", token).status_code == 200
    expired = jwt.encode({**claims, "exp": int(time.time()) - 120}, signing_key, algorithm="RS256")
    response = _call(gateway, "POST", "/v1/chat", expired)
    assert response.status_code == 401 and "expired" in response.json()["error"]
    other_audience = jwt.encode({**claims, "aud": "someone-else"}, signing_key, algorithm="RS256")
    assert _call(gateway, "POST", "/v1/chat", other_audience).status_code == 401


async def test_the_openai_sdk_sends_the_key_as_its_api_key(gateway: str, redis_url: str) -> None:
    token = await _key(redis_url, "chat")
    client = openai.AsyncOpenAI(base_url=f"{gateway}/v1", api_key=token, max_retries=0, timeout=30)
    completion = await client.chat.completions.create(
        model="rag", messages=[{"role": "user", "content": "What is the capital?"}]
    )
    assert completion.choices[0].message.content
    refused = openai.AsyncOpenAI(base_url=f"{gateway}/v1", api_key="wrong", max_retries=0, timeout=30)
    with pytest.raises(openai.AuthenticationError):
        await refused.chat.completions.create(model="rag", messages=[{"role": "user", "content": "hi"}])


async def test_a_caller_over_its_rate_limit_is_429_with_retry_after(redis_url: str, fake_services) -> None:
    url, _ = fake_services
    settings = gateway_settings(redis_url, url, auth="on", rate_limit_chat="2/minute")
    token = await _key(redis_url, "chat", user="eager")
    other = await _key(redis_url, "chat", user="patient")
    with serve_in_thread(create_app(settings)) as gateway_url:
        statuses = [_call(gateway_url, "POST", "/v1/chat", token).status_code for _ in range(3)]
        assert statuses == [200, 200, 429]
        limited = _call(gateway_url, "POST", "/v1/chat", token)
        assert limited.status_code == 429 and int(limited.headers["retry-after"]) >= 1
        assert _call(gateway_url, "POST", "/v1/chat", other).status_code == 200  # per caller


def test_auth_off_is_explicit_and_logged(redis_url: str, fake_services, caplog: pytest.LogCaptureFixture) -> None:
    url, _ = fake_services
    with caplog.at_level(logging.WARNING, logger="rag_gateway.runtime"):
        with serve_in_thread(create_app(gateway_settings(redis_url, url, auth="off"))) as gateway_url:
            assert _call(gateway_url, "POST", "/v1/chat").status_code == 200
    assert any("GATEWAY_AUTH=off" in record.getMessage() for record in caplog.records)


async def test_a_conversation_is_found_only_by_its_owner(gateway: str, redis_url: str) -> None:
    alice = await _key(redis_url, "chat", user="alice")
    mallory = await _key(redis_url, "chat", user="mallory")
    started = _call(gateway, "POST", "/v1/chat", alice)
    cid = started.json()["conversation_id"]
    unknown = _call(gateway, "GET", "/v1/conversations/{conversation_id}".replace("{conversation_id}", "0" * 32), mallory)
    for method, path in [("GET", f"/v1/conversations/{cid}"), ("DELETE", f"/v1/conversations/{cid}")]:
        response = httpx.request(method, f"{gateway}{path}", headers={"Authorization": f"Bearer {mallory}"})
        # Exactly the answer for an id that does not exist: nothing tells that it does.
        assert response.status_code == 404 and response.json()["error"].replace(cid, "ID") == unknown.json()[
            "error"
        ].replace("0" * 32, "ID")
    follow_up = httpx.post(
        f"{gateway}/v1/chat", json={"conversation_id": cid, "message": "And then?"}, headers={"Authorization": f"Bearer {mallory}"}
    )
    assert follow_up.status_code == 404
    mine = httpx.get(f"{gateway}/v1/conversations/{cid}", headers={"Authorization": f"Bearer {alice}"})
    assert mine.status_code == 200 and len(mine.json()["turns"]) == 1  # mallory's attempts left no trace


async def test_the_retriever_is_asked_on_the_callers_behalf(gateway: str, redis_url: str) -> None:
    # The retriever searches only what the identity it is sent may read (tenant + ACL, inside the
    # search): the gateway must send the caller's, on chat and on the OpenAI endpoint alike.
    from .fake_services import SEARCH_IDENTITIES

    token = await _key(redis_url, "chat", user="ada")
    SEARCH_IDENTITIES.clear()
    assert _call(gateway, "POST", "/v1/chat", token).status_code == 200
    assert _call(gateway, "POST", "/v1/chat/completions", token).status_code == 200
    assert [(i.tenant, i.user) for i in SEARCH_IDENTITIES if i is not None] == [("uni", "ada"), ("uni", "ada")]
    assert None not in SEARCH_IDENTITIES


async def test_only_the_owner_of_a_conversation_can_give_feedback_on_its_turns(gateway: str, redis_url: str) -> None:
    alice, bob = await _key(redis_url, "chat", user="alice"), await _key(redis_url, "chat", user="bob")
    asked = _call(gateway, "POST", "/v1/chat", alice)
    assert asked.status_code == 200, asked.text
    path = f"{gateway}/v1/conversations/{asked.json()['conversation_id']}/turns/0/feedback"
    body = {"rating": "down", "comment": "wrong year"}
    # Bob names Alice's conversation: for him it does not exist (the same 404 as an unknown id).
    refused = httpx.post(path, json=body, headers={"Authorization": f"Bearer {bob}"}, timeout=30)
    assert refused.status_code == 404, refused.text
    given = httpx.post(path, json=body, headers={"Authorization": f"Bearer {alice}"}, timeout=30)
    assert given.status_code == 200, given.text
    assert given.json()["feedback"]["rating"] == "down"
