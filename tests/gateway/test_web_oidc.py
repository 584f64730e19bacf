"""The web chat's OIDC sign-in in a real browser (Debian's Chromium through Playwright): the page
sends the browser to the provider with a PKCE challenge, comes back with a code, exchanges it at the
token endpoint and uses the token against the gateway, which checks it as any bearer token.

The provider is a minimal authorization server of this test (authorize → redirect with a code;
token endpoint checking the PKCE verifier and issuing an RS256 JWT); the gateway is the real app
over real HTTP with real Redis; its downstream services are the fakes of tests/gateway."""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections.abc import AsyncIterator, Iterator
from urllib.parse import urlencode

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fastapi import FastAPI, Form
from fastapi.responses import JSONResponse, RedirectResponse

from rag_gateway.app import create_app
from ragctl.in_process import serve_in_thread

from .support import gateway_settings

pytest.importorskip("playwright.async_api")
from browser import launched_chromium  # noqa: E402

ISSUER = "https://idp.example"


def _provider(signing_key: rsa.RSAPrivateKey, issued: list[dict]) -> FastAPI:
    app = FastAPI()
    pending: dict[str, dict[str, str]] = {}

    @app.get("/authorize")
    async def authorize(
        response_type: str, client_id: str, redirect_uri: str, state: str, code_challenge: str,
        code_challenge_method: str, scope: str,
    ) -> RedirectResponse:
        assert response_type == "code" and code_challenge_method == "S256" and "openid" in scope.split()
        code = secrets.token_urlsafe(16)
        pending[code] = {"challenge": code_challenge, "client_id": client_id, "redirect_uri": redirect_uri}
        return RedirectResponse(f"{redirect_uri}?{urlencode({'code': code, 'state': state})}", status_code=302)

    @app.post("/token")
    async def token(
        grant_type: str = Form(), code: str = Form(), redirect_uri: str = Form(),
        client_id: str = Form(), code_verifier: str = Form(),
    ) -> JSONResponse:
        cors = {"Access-Control-Allow-Origin": "*"}
        request = pending.pop(code, None)
        digest = base64.urlsafe_b64encode(hashlib.sha256(code_verifier.encode()).digest()).rstrip(b"=").decode()
        if (
            grant_type != "authorization_code" or request is None or request["challenge"] != digest
            or request["client_id"] != client_id or request["redirect_uri"] != redirect_uri
        ):
            return JSONResponse({"error": "invalid_grant"}, status_code=400, headers=cors)
        claims = {"iss": ISSUER, "aud": "rag", "sub": "carol", "tenant": "uni", "scope": "openid chat",
                  "exp": int(time.time()) + 300}
        issued.append(claims)
        return JSONResponse({"access_token": jwt.encode(claims, signing_key, algorithm="RS256"), "token_type": "Bearer"}, headers=cors)

    return app


@pytest.fixture(scope="module")
def oidc_gateway(redis_url: str, fake_services) -> Iterator[tuple[str, list[dict]]]:
    signing_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = signing_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    issued: list[dict] = []
    url, _ = fake_services
    with serve_in_thread(_provider(signing_key, issued)) as provider:
        settings = gateway_settings(
            redis_url, url, auth="on", jwt_issuer=ISSUER, jwt_audience="rag", jwt_public_key=public_pem,
            oidc_client_id="rag-web", oidc_authorization_url=f"{provider}/authorize",
            oidc_token_url=f"{provider}/token", oidc_provider_name="Example SSO",
        )
        with serve_in_thread(create_app(settings)) as gateway:
            yield gateway, issued


@pytest.fixture
async def browser() -> AsyncIterator[object]:
    async with launched_chromium() as launched:
        yield launched


async def test_sign_in_with_the_oidc_provider_then_chat(oidc_gateway, browser) -> None:
    gateway, issued = oidc_gateway
    context = await browser.new_context(base_url=gateway, locale="en-US")  # the page's words are English
    page = await context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    await page.goto("/")
    await page.get_by_role("button", name="Sign in with Example SSO").click()
    # Back from the provider: the code is exchanged (across origins, allowed by the CSP) and used.
    await page.get_by_text("signed in with Example SSO").wait_for()
    assert len(issued) == 1 and issued[0]["sub"] == "carol"
    assert "code=" not in page.url  # the code is taken off the address bar
    await page.get_by_label("Your question").fill("What is Acme?")
    await page.get_by_label("Your question").press("Enter")
    await page.locator(".message.assistant .feedback").wait_for()
    await page.locator("#conversations li[data-conversation]", has_text="What is Acme?").wait_for()
    assert not [e for e in errors if "Content Security Policy" in e], errors
    # Signing out forgets the token: the page asks again.
    await page.get_by_role("button", name="Sign out").click()
    await page.get_by_label("API key").wait_for()
    await context.close()
