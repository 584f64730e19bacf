"""What the web chat needs of the gateway: the caller's conversation list, the cited chunk as it was
cited (for the highlight), the sign-in configuration, and the page itself under a strict CSP.
Real Redis; the downstream services are the HTTP fakes of tests/gateway (the browser tests in
tests/e2e/test_web_ui.py run the real ones)."""

from __future__ import annotations

import time
from urllib.parse import quote

from fastapi.testclient import TestClient
from redis.asyncio import Redis

from rag_common.messages import message
from rag_gateway.app import create_app
from rag_gateway.chat_models import SourceChunk, Turn
from rag_gateway.conversation_store import INDEX_PREFIX, SOURCES_PREFIX, ConversationStore, owned_conversation

from .fake_services import UNREADABLE_DOCUMENTS
from .support import gateway_settings


def _turn(message: str) -> Turn:
    return Turn(message=message, refined_query=message, answer="a", created_at=time.time())


def _source(chunk_id: str) -> SourceChunk:
    return SourceChunk(chunk_id=chunk_id, doc_id="d", title="T", section_path=["A", "B"], page=3, text="One. Two.")


async def test_the_list_is_the_owners_own_most_recent_first_and_forgets_deleted_ones(redis_client: Redis) -> None:
    store = ConversationStore(redis_client, max_turns=10, ttl_s=100)
    alice, bob = "uni/alice", "uni/bob"
    first, second, other = store.new_id(), store.new_id(), store.new_id()
    await store.append(owned_conversation(alice, first), _turn("How are conversations stored?"))
    await store.append(owned_conversation(alice, second), _turn("x" * 200))
    await store.append(owned_conversation(bob, other), _turn("Bob's question"))
    await store.append(owned_conversation(alice, first), _turn("And scaled?"))

    listed = await store.list_owned(alice)
    assert [c.conversation_id for c in listed] == [first, second]  # the latest turn first
    assert listed[0].title == "How are conversations stored?" and listed[0].turns == 2
    assert len(listed[1].title) == 80 and listed[1].title.endswith("…")
    assert [c.conversation_id for c in await store.list_owned(bob)] == [other]

    assert await store.delete(owned_conversation(alice, first))
    assert [c.conversation_id for c in await store.list_owned(alice)] == [second]
    # A conversation that expired (its list gone) is not listed.
    await redis_client.delete("rag:conversation:" + owned_conversation(alice, second))
    assert await store.list_owned(alice) == []


async def test_sources_are_stored_with_the_turn_and_share_its_ttl_and_deletion(redis_client: Redis) -> None:
    store = ConversationStore(redis_client, max_turns=10, ttl_s=100)
    name = owned_conversation("uni/alice", store.new_id())
    await store.append(name, _turn("q"), [_source("doc/a.md:0:abc"), _source("doc/a.md:1:def")])
    assert (await store.source(name, "doc/a.md:1:def")) == _source("doc/a.md:1:def")
    assert await store.source(name, "other") is None
    assert await store.source(owned_conversation("uni/bob", name.rpartition(":")[2]), "doc/a.md:0:abc") is None
    assert 90 < await redis_client.ttl(SOURCES_PREFIX + name) <= 100
    assert 90 < await redis_client.ttl(INDEX_PREFIX + "uni/alice") <= 100
    await store.delete(name)
    assert not await redis_client.exists(SOURCES_PREFIX + name)


def test_a_chat_turn_is_listed_and_its_cited_chunks_are_served_with_their_offsets(client: TestClient) -> None:
    body = client.post("/v1/chat", json={"message": "What is Acme?"}).json()
    cid = body["conversation_id"]
    listed = client.get("/v1/conversations").json()["conversations"]
    assert listed[0]["conversation_id"] == cid and listed[0]["title"] == "What is Acme?" and listed[0]["turns"] == 1
    assert body["citations"], body
    for citation in body["citations"]:
        response = client.get(f"/v1/conversations/{cid}/sources/{quote(citation['chunk_id'], safe='')}")
        assert response.status_code == 200, response.text
        source = response.json()
        assert source["chunk_id"] == citation["chunk_id"] and source["title"] == citation["title"]
        if citation["start"] is not None:
            assert source["text"][citation["start"] : citation["end"]] == citation["quote"]
    assert client.get(f"/v1/conversations/{cid}/sources/not-cited").status_code == 404
    assert client.get("/v1/conversations/unknown/sources/x").status_code == 404
    assert body["abstain_reason"] == ""


def test_a_source_or_answer_of_a_document_no_longer_readable_is_withheld(client: TestClient) -> None:
    """Issue 29: what a stored conversation shows follows the documents' access now. After the cited
    document's ACL stops naming the caller (or it is deleted), its source is a 404 and the turn's
    answer is withheld with its citations; the other turns stay whole."""
    first = client.post("/v1/chat", json={"message": "What is Acme?"}).json()
    cid = first["conversation_id"]
    client.post("/v1/chat", json={"conversation_id": cid, "message": "hello"})  # chitchat: cites nothing
    [cited, *_] = first["citations"]
    source_path = f"/v1/conversations/{cid}/sources/{quote(cited['chunk_id'], safe='')}"
    doc_id = client.get(source_path).json()["doc_id"]
    assert client.get(f"/v1/conversations/{cid}").json()["turns"][0]["answer"] == first["answer"]

    UNREADABLE_DOCUMENTS.add(doc_id)
    try:
        assert client.get(source_path).status_code == 404
        turns = client.get(f"/v1/conversations/{cid}").json()["turns"]
        assert turns[0]["answer"] == message("withheld_answer", "en")
        assert turns[0]["citations"] == [] and turns[0]["message"] == "What is Acme?"
        assert first["answer"] not in client.get(f"/v1/conversations/{cid}").text
        assert turns[1]["answer"] and turns[1]["intent"] == "chitchat"
    finally:
        UNREADABLE_DOCUMENTS.discard(doc_id)
    assert client.get(source_path).status_code == 200


def test_the_history_of_a_follow_up_withholds_an_answer_no_longer_readable(client: TestClient, fake_services) -> None:
    """The models get the earlier turns as the caller may see them now: a generative answer must not
    repeat a quote of a document the caller can no longer read."""
    _, calls = fake_services
    first = client.post("/v1/chat", json={"message": "What is Acme?"}).json()
    cid = first["conversation_id"]
    [doc_id] = {
        client.get(f"/v1/conversations/{cid}/sources/{quote(c['chunk_id'], safe='')}").json()["doc_id"]
        for c in first["citations"][:1]
    }
    UNREADABLE_DOCUMENTS.add(doc_id)
    try:
        calls.clear()
        follow_up = client.post("/v1/chat", json={"conversation_id": cid, "message": "When was it founded?"})
        assert follow_up.status_code == 200, follow_up.text
    finally:
        UNREADABLE_DOCUMENTS.discard(doc_id)
    [refine] = [body for name, body in calls if name == "refine"]
    withheld = message("withheld_answer", "en")
    assert refine["history"] == [{"question": "What is Acme?", "answer": withheld}]
    [generate] = [body for name, body in calls if name == "generate"]
    assert first["answer"] not in str(generate["history"])


def test_the_page_and_its_script_are_served_under_a_strict_csp(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    csp = page.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "default-src 'none'" in csp and "connect-src 'self'" in csp
    assert "unsafe-inline" not in csp and "frame-ancestors 'none'" in csp
    assert page.headers["x-content-type-options"] == "nosniff"
    assert '<script type="module" src="/static/js/app.js">' in page.text
    assert "http://" not in page.text and "https://" not in page.text  # nothing from another origin
    for path, kind in [("/static/js/app.js", "text/javascript"), ("/static/js/api.js", "text/javascript"), ("/static/style.css", "text/css")]:
        response = client.get(path)
        assert response.status_code == 200 and response.headers["content-type"].startswith(kind), path
        assert "https://" not in response.text, path
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/static/index.html.bak").status_code == 404
    assert client.get("/v1/auth/config").json() == {"auth": "off", "api_keys": False, "oidc": None}


def test_the_oidc_provider_is_offered_only_when_fully_configured_and_its_token_endpoint_is_allowed(
    redis_url: str, fake_services
) -> None:
    url, _ = fake_services
    oidc = dict(
        auth="on", jwt_issuer="https://idp.example", jwt_audience="rag", jwt_public_key="unused",
        oidc_client_id="rag-web", oidc_authorization_url="https://idp.example/authorize",
        oidc_token_url="https://idp.example:8443/token", oidc_provider_name="Example SSO",
    )
    with TestClient(create_app(gateway_settings(redis_url, url, **oidc))) as client:
        config = client.get("/v1/auth/config").json()
        assert config["oidc"]["client_id"] == "rag-web" and config["oidc"]["provider_name"] == "Example SSO"
        assert "connect-src 'self' https://idp.example:8443;" in client.get("/").headers["content-security-policy"]
    without_client = {**oidc, "oidc_client_id": None}
    with TestClient(create_app(gateway_settings(redis_url, url, **without_client))) as client:
        assert client.get("/v1/auth/config").json() == {"auth": "on", "api_keys": True, "oidc": None}
