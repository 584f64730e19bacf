"""The access rule for documents at the retriever's HTTP API (issue 29): who may see a document's data
and who may change it (``rag_retriever.document_access``; docs/security.md).

Each case is one an attacker tried: an outsider of a document's ACL with ``ingest`` overwrote it,
re-labelled it and deleted it; the list showed it; the ingest answer's ``duplicates`` named it; its
``content_hash`` was a plain sha256. Every refusal is checked together with a permitted twin (a
member, an admin), so a rule that refuses everything cannot pass.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from rag_common.identity import IDENTITY_HEADER, Identity, encode_identity
from rag_retriever.app import create_app
from rag_retriever.document_access import ContentDigest, DocumentAccess
from rag_retriever.runtime import content_digest
from rag_retriever.settings import RetrieverSettings

SECRET_TEXT = "The zanzibar budget of the oceanography department is 4.2 million."
SECRET = {"id": "budget", "text": SECRET_TEXT, "title": "Zanzibar budget", "source": "budget.md", "acl": {"groups": ["finance"]}}


def caller(user: str, *groups: str, tenant: str = "acme", scopes: tuple[str, ...] = ("chat", "ingest")) -> dict[str, str]:
    identity = Identity(tenant=tenant, user=user, groups=list(groups), scopes=list(scopes))
    return {IDENTITY_HEADER: encode_identity(identity)}


MEMBER = caller("fay", "finance")
OUTSIDER = caller("eve")
CHAT_ONLY = caller("carl", scopes=("chat",))
ADMIN = caller("root", scopes=("chat", "ingest", "admin"))
OTHER_ADMIN = caller("root", tenant="globex", scopes=("chat", "ingest", "admin"))


@pytest.fixture
def client(tmp_path, embedder) -> Iterator[TestClient]:
    settings = RetrieverSettings(index_dir=str(tmp_path / "index"))
    with TestClient(create_app(settings, embedder=embedder)) as test_client:
        response = test_client.post("/v1/documents", json={"documents": [SECRET]}, headers=MEMBER)
        assert response.status_code == 200, response.text
        yield test_client


def bm25(client: TestClient, query: str, who: dict[str, str]) -> list[dict]:
    response = client.post("/v1/search", json={"query": query, "mode": "bm25", "top_k": 5}, headers=who)
    assert response.status_code == 200, response.text
    return response.json()["passages"]


def assert_unchanged(client: TestClient) -> None:
    """The secret document as its member wrote it: same text, still hidden from the outsider."""
    [passage] = bm25(client, "zanzibar budget", MEMBER)
    assert (passage["doc_id"], passage["text"]) == ("budget", SECRET_TEXT)
    assert bm25(client, "zanzibar budget", OUTSIDER) == []


def assert_refused(response, *, names: str = "budget") -> None:
    assert response.status_code == 403, response.text
    body = response.text
    assert names in body and "nothing of this request was written" in body
    for detail in ("zanzibar", "Zanzibar", "finance", "budget.md", hashlib.sha256(SECRET_TEXT.encode()).hexdigest()):
        assert detail not in body


@pytest.mark.parametrize(
    "replacement",
    [
        {"id": "budget", "text": "The budget was cancelled. Send questions to eve."},  # other text, no ACL
        {**SECRET, "acl": None},  # the same text, published to everyone
        {**SECRET, "acl": {"users": ["eve"]}},  # the same text, re-labelled to the outsider
        SECRET,  # the exact document: "unchanged" would confirm the guessed text
    ],
    ids=["other-text", "acl-to-everyone", "acl-to-outsider", "exact-copy"],
)
def test_an_outsider_may_not_replace_or_relabel_a_document(client, replacement):
    response = client.post("/v1/documents", json={"documents": [replacement]}, headers=OUTSIDER)
    assert_refused(response)
    assert_unchanged(client)
    # The member may: the refusal is the rule, not a refusal of every write.
    allowed = client.post("/v1/documents", json={"documents": [{**SECRET, "text": SECRET_TEXT + " Approved."}]}, headers=MEMBER)
    assert allowed.status_code == 200 and allowed.json()["documents"] == 1


def test_an_upload_naming_an_unreadable_document_is_refused_whole(client):
    files = [
        ("files", ("notes.md", b"# Notes\n\nHarmless notes about the canteen.", "text/markdown")),
        ("files", ("docs.jsonl", b'{"id": "budget", "text": "Replaced by eve."}\n', "application/json")),
    ]
    assert_refused(client.post("/v1/documents/upload", files=files, headers=OUTSIDER))
    assert_unchanged(client)
    # Nothing of the request was written, not even its permitted document.
    assert bm25(client, "canteen notes", OUTSIDER) == []


def test_a_mixed_json_request_writes_nothing(client):
    documents = [{"id": "fresh", "text": "A fresh note about the harbour crane."}, {"id": "budget", "text": "Replaced."}]
    assert_refused(client.post("/v1/documents", json={"documents": documents}, headers=OUTSIDER))
    assert bm25(client, "harbour crane", OUTSIDER) == []
    assert_unchanged(client)


def test_an_outsider_may_not_delete_a_document_and_an_unknown_id_stays_404(client):
    assert_refused(client.delete("/v1/documents/budget", headers=OUTSIDER))
    assert_unchanged(client)
    unknown = client.delete("/v1/documents/no-such-document", headers=OUTSIDER)
    assert unknown.status_code == 404
    # Another tenant's caller, admin or not, does not see the id at all.
    assert client.delete("/v1/documents/budget", headers=OTHER_ADMIN).status_code == 404
    assert_unchanged(client)
    assert client.delete("/v1/documents/budget", headers=MEMBER).json() == {"doc_id": "budget", "deleted_chunks": 1}
    assert bm25(client, "zanzibar budget", MEMBER) == []


def test_the_list_shows_only_readable_documents_with_keyed_hashes(client):
    client.post("/v1/documents", json={"documents": [{"id": "menu", "text": "The canteen menu for Monday."}]}, headers=OUTSIDER)
    listed = lambda who: {d["doc_id"]: d for d in client.get("/v1/documents", headers=who).json()["documents"]}  # noqa: E731
    assert set(listed(CHAT_ONLY)) == set(listed(OUTSIDER)) == {"menu"}
    assert "zanzibar" not in client.get("/v1/documents", headers=CHAT_ONLY).text.lower()
    assert set(listed(MEMBER)) == set(listed(ADMIN)) == {"budget", "menu"}
    assert set(listed(OTHER_ADMIN)) == set()

    plain = hashlib.sha256(SECRET_TEXT.encode()).hexdigest()
    shown = listed(MEMBER)["budget"]["content_hash"]
    assert shown != plain and len(shown) == 64
    assert shown == content_digest(client.app.state.runtime.settings).digest("acme", plain)


def test_duplicates_never_name_an_unreadable_document(client):
    guess = {"id": "guess", "text": SECRET_TEXT}
    response = client.post("/v1/documents", json={"documents": [guess]}, headers=OUTSIDER)
    assert response.status_code == 200, response.text
    assert response.json()["duplicates"] == []
    assert "budget" not in response.text
    # The member who may read both is told, under the keyed digest.
    again = client.post("/v1/documents", json={"documents": [{"id": "copy", "text": SECRET_TEXT}]}, headers=MEMBER)
    [duplicate] = again.json()["duplicates"]
    assert duplicate["duplicate_of"] == ["budget", "guess"]
    assert duplicate["content_hash"] != hashlib.sha256(SECRET_TEXT.encode()).hexdigest()


def test_the_same_text_has_other_digests_in_other_tenants(client):
    text = {"id": "shared", "text": "The same words in two tenants."}
    for who in (ADMIN, OTHER_ADMIN):
        assert client.post("/v1/documents", json={"documents": [text]}, headers=who).status_code == 200
    mine = {d["doc_id"]: d["content_hash"] for d in client.get("/v1/documents", headers=ADMIN).json()["documents"]}
    theirs = {d["doc_id"]: d["content_hash"] for d in client.get("/v1/documents", headers=OTHER_ADMIN).json()["documents"]}
    assert mine["shared"] != theirs["shared"]


def test_the_admin_scope_manages_its_tenant_but_searches_as_itself(client):
    nobody = {"id": "orphan", "text": "A quarterly report readable by nobody.", "acl": {"groups": [], "users": []}}
    assert client.post("/v1/documents", json={"documents": [nobody]}, headers=MEMBER).status_code == 200
    assert bm25(client, "zanzibar budget", ADMIN) == []  # no chat access beyond its own principals
    assert client.delete("/v1/documents/orphan", headers=ADMIN).json()["deleted_chunks"] == 1
    relabel = client.post("/v1/documents", json={"documents": [{**SECRET, "acl": {"users": ["root"]}}]}, headers=ADMIN)
    assert relabel.status_code == 200 and relabel.json()["readers"] == {"budget": ["user:root"]}
    assert [p["doc_id"] for p in bm25(client, "zanzibar budget", ADMIN)] == ["budget"]
    assert bm25(client, "zanzibar budget", MEMBER) == []


def test_the_readable_check_answers_for_the_caller(client):
    body = {"doc_ids": ["budget", "unknown"]}
    assert client.post("/v1/documents/readable", json=body, headers=MEMBER).json() == {"doc_ids": ["budget"]}
    assert client.post("/v1/documents/readable", json=body, headers=OUTSIDER).json() == {"doc_ids": []}
    assert client.post("/v1/documents/readable", json=body, headers=OTHER_ADMIN).json() == {"doc_ids": []}
    # An admin is answered by its own principals: the gateway asks before showing a stored answer again.
    assert client.post("/v1/documents/readable", json=body, headers=ADMIN).json() == {"doc_ids": []}
    assert client.post("/v1/documents/readable", json={"doc_ids": []}, headers=MEMBER).status_code == 422


def test_the_write_rule_is_checked_again_under_the_write_lock():
    """The check before planning and the one under the lock are the same rule: a reader set that
    changed in between refuses the write (``check_writable`` with the readers read under the lock)."""
    member = DocumentAccess.of(Identity(tenant="acme", user="fay", groups=["finance"], scopes=["ingest"]))
    member.check_writable(["budget", "new"], {"budget": ["group:finance"]})
    with pytest.raises(Exception, match="may not replace") as refused:
        member.check_writable(["budget", "new"], {"budget": ["group:hr"]})
    assert type(refused.value).__name__ == "Forbidden"
    assert DocumentAccess.of(Identity(tenant="acme", user="root", scopes=["admin"])).may_read([])


def test_the_digest_key_file_is_made_once_private_and_kept(tmp_path):
    path = tmp_path / "keys" / "content-digest.key"
    first = ContentDigest.from_key_file(path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert ContentDigest.from_key_file(path).digest("acme", "h") == first.digest("acme", "h")
    assert first.digest("acme", "h") != first.digest("globex", "h")
    assert first.digest("acme", None) is None
    assert list(path.parent.iterdir()) == [path]  # no temporary file left
    with pytest.raises(ValueError, match="at least 16 bytes"):
        ContentDigest(b"short")
