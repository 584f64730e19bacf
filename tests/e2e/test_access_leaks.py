"""No identity reads what it may not (issue 13): the leak test, through the real stack.

Three tenants, four groups and six users in each (the same names in every tenant, so a group of one
tenant must not open another tenant's documents), 72 documents that each carry one unique planted
token in their title and text, with ACLs of every kind: none (the whole tenant), one group, two
groups, one user, a group and a user, and nobody. Document ids repeat across tenants. Half go in as
JSON, half as file uploads with the upload's ``acl`` form field.

Then ``RAG_LEAK_QUERIES`` (default 10,000) randomised queries from randomised identities:

- at the retriever, as the gateway calls it (service credential + the identity header): dense,
  bm25 and hybrid searches, and HyDE-shaped ones whose text is a whole document (often one the
  identity may not read: the strongest pull towards it a hypothetical passage can have);
- at the gateway, each with an API key of its identity: ``/v1/chat``, ``/v1/chat/stream``, the
  OpenAI-compatible endpoint and chats with ``hyde`` (the refiner's LLM writes the search text).

Midway, some documents' ACLs change (re-ingested with the same text): the rest of the run checks
against the new ACLs. A leak is a passage, citation or answer that holds the token of a document
the identity may not read at that moment; the test fails on any leak, and also when a readable
document asked for by its token is not found (a filter that hid everything would otherwise pass).
Then every operation that carries or changes document data (issue 29), ``RAG_LEAK_DOCUMENT_OPS``
(default 300) randomised ones plus fixed scenarios, by members of a document's ACL, outsiders of its
tenant with ``ingest``, chat-only outsiders, callers of other tenants and admin-scoped callers of the
same and of another tenant, through the gateway and at the retriever as the gateway calls it:

- the document list: exactly the documents the caller may read (an admin-scoped caller: all of its
  tenant), nothing of another; the retriever's readable check (asked by the gateway before it shows
  a stored answer or source): exactly those the caller's own principals read;
- ingest of a guessed copy of a document's text: ``duplicates`` names a holder only if the caller
  may read it (and does name it then);
- overwrite by id with other text, with the same text and a wider ACL, with the exact same text and
  ACL, and delete: refused (403; another tenant's id: its own namespace, 404 to delete) when the
  caller may not read the document, with an error naming only what the caller sent, the whole
  request unwritten; then checked unchanged (the admin listing's entry, a member still finds the
  text, the caller still does not); allowed and done when it may (then undone);
- ``content_hash``: a keyed digest, not sha256 of the text, equal for one content within a tenant,
  different across tenants;
- a conversation's cited source and stored turn once the cited document's ACL no longer names the
  caller, or it was deleted: 404 and withheld (the other turns intact, the source back once readable).

A leak is any planted token, document id, reader or hash of a document the caller may not see in a
response; an unauthorised write is a refused write that answered 2xx or changed anything. The run
fails on either, and on a permitted operation refused (a filter hiding everything would otherwise
pass). ``DOCUMENT_ROUTES`` lists the routes exercised (tests/test_document_routes_access.py holds
the services' declarations to it); the run fails if one was not called.

``RAG_LEAK_REPORT=path.json`` writes the tallies.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import random
import re
import string
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from redis.asyncio import Redis

from rag_common.identity import Identity, identity_headers
from rag_common.internal_auth import SERVICE_TOKEN_HEADER
from rag_gateway.api_keys import ApiKeyStore
from rag_gateway.audit_log import AuditLog

from .conftest import AuthenticatedStack

pytestmark = pytest.mark.e2e

TENANTS = ("north", "south", "east")
GROUPS = ("g0", "g1", "g2", "g3")
USERS = tuple(f"u{i}" for i in range(6))
DOCUMENTS_PER_TENANT = 24
TOPICS = ("boiler inspection", "payroll correction", "exam scheduling", "laboratory safety", "travel refund", "server patching")
UNITS = ("physics", "finance", "admissions", "facilities")
QUERIES = int(os.environ.get("RAG_LEAK_QUERIES", "10000"))
SEED = int(os.environ.get("RAG_LEAK_SEED", "20261124"))
#: Of the queries, how many go through the gateway (the rest ask the retriever directly).
GATEWAY_SHARE = {"chat": 0.03, "stream": 0.005, "openai": 0.01, "hyde": 0.0015}
TOKEN = re.compile(r"\bzq[a-z0-9]{8}\b")
#: Randomised document operations after the queries (each also verified, see ``DocumentChecks``).
DOCUMENT_OPS = int(os.environ.get("RAG_LEAK_DOCUMENT_OPS", "300"))
#: Every document id this test writes, wherever it appears in a response.
DOC_ID = re.compile(r"\b(?:record-\d\d(?:\.md)?|solo-[a-z]+-\d+|twin-[ab]|guess-\d+|new-\d+)\b")
#: A hex digest of 64 characters (sha256 / HMAC-SHA256).
HEX_DIGEST = re.compile(r"\b[0-9a-f]{64}\b")
#: The text of the twin documents: the same content in every tenant, twice in each.
TWIN_TEXT = "Shared circular: the fire drill of the annex building is held on the first Friday of each month."

#: The routes that return or change document data, with the access check each declares in its OpenAPI
#: operation (``x-rag-document-access``; tests/test_document_routes_access.py holds the services to
#: this list): ``caller-acl``, the caller's own principals; ``document-access``, the caller's readable
#: documents, all of its tenant with the admin scope. The run fails if one of them was not called.
DOCUMENT_ROUTES: dict[tuple[str, str], str] = {
    ("gateway", "POST /v1/chat"): "caller-acl",
    ("gateway", "POST /v1/chat/stream"): "caller-acl",
    ("gateway", "POST /v1/chat/completions"): "caller-acl",
    ("gateway", "GET /v1/conversations/{conversation_id}"): "caller-acl",
    ("gateway", "GET /v1/conversations/{conversation_id}/sources/{chunk_id}"): "caller-acl",
    ("gateway", "GET /v1/documents"): "document-access",
    ("gateway", "POST /v1/documents"): "document-access",
    ("gateway", "DELETE /v1/documents/{doc_id}"): "document-access",
    ("retriever", "POST /v1/search"): "caller-acl",
    ("retriever", "GET /v1/documents"): "document-access",
    ("retriever", "POST /v1/documents"): "document-access",
    ("retriever", "POST /v1/documents/upload"): "document-access",
    ("retriever", "POST /v1/documents/readable"): "caller-acl",
    ("retriever", "DELETE /v1/documents/{doc_id}"): "document-access",
}


@dataclass(frozen=True)
class Planted:
    tenant: str
    doc_id: str
    token: str
    topic: str
    unit: str
    acl: dict[str, list[str]] | None
    #: Went in as a Markdown file upload (its stored id is the file name).
    uploaded: bool = False
    #: One of the twin documents (``TWIN_TEXT``, no token), for the content hash checks.
    twin: bool = False

    @property
    def title(self) -> str:
        return "Shared circular" if self.twin else f"Record {self.token}"

    @property
    def text(self) -> str:
        if self.twin:
            return TWIN_TEXT
        return (
            f"Record {self.token} describes the {self.topic} procedure of the {self.unit} unit. "
            f"Every {self.topic} request of the {self.unit} unit is filed under {self.token} and reviewed weekly."
        )

    @property
    def stored_id(self) -> str:
        """The id the index holds it under: an upload is named by its file."""
        return f"{self.doc_id}.md" if self.uploaded else self.doc_id

    @property
    def upload_body(self) -> str:
        return f"# {self.title}\n\n{self.text}"

    def manageable_by(self, identity: Identity) -> bool:
        """Whether ``identity`` may list, replace, re-label or delete it: it may read it, or it holds the
        admin scope in the document's tenant."""
        return self.readable_by(identity) or (identity.tenant == self.tenant and identity.has_scope("admin"))

    def readable_by(self, identity: Identity) -> bool:
        if identity.tenant != self.tenant:
            return False
        if self.acl is None:
            return True
        return identity.user in self.acl["users"] or bool(set(identity.groups) & set(self.acl["groups"]))


def acl_of_kind(kind: int, rng: random.Random) -> dict[str, list[str]] | None:
    """The six kinds of ACL, in turn: tenant-wide, one group, two groups, one user, group + user, nobody."""
    return [
        None,
        {"groups": rng.sample(GROUPS, 1), "users": []},
        {"groups": rng.sample(GROUPS, 2), "users": []},
        {"groups": [], "users": rng.sample(USERS, 1)},
        {"groups": rng.sample(GROUPS, 1), "users": rng.sample(USERS, 1)},
        {"groups": [], "users": []},
    ][kind % 6]


def plant_corpus(rng: random.Random) -> list[Planted]:
    tokens: set[str] = set()
    corpus = []
    for tenant in TENANTS:
        for i in range(DOCUMENTS_PER_TENANT):
            token = ""
            while not token or token in tokens:
                token = "zq" + "".join(rng.choices(string.ascii_lowercase + string.digits, k=8))
            tokens.add(token)
            corpus.append(Planted(
                tenant, f"record-{i:02d}", token, rng.choice(TOPICS), rng.choice(UNITS), acl_of_kind(i, rng), uploaded=i % 2 == 1,
            ))
    return corpus


def random_identity(rng: random.Random, target: Planted | None = None) -> Identity:
    """Anyone; or, half the time when there is a ``target``, someone of its tenant its ACL names (if any)."""
    groups = sorted(group for group in GROUPS if rng.random() < 0.35)
    if target is None or rng.random() < 0.5:
        return Identity(tenant=rng.choice(TENANTS), user=rng.choice(USERS), groups=groups, scopes=["chat"])
    acl = target.acl or {"groups": [], "users": []}
    user = rng.choice(acl["users"]) if acl["users"] and rng.random() < 0.5 else rng.choice(USERS)
    if acl["groups"]:
        groups = sorted({*groups, rng.choice(acl["groups"])})
    return Identity(tenant=target.tenant, user=user, groups=groups, scopes=["chat"])


class Ledger:
    """The corpus as it stands, and the tallies of what was checked."""

    def __init__(self, corpus: list[Planted]) -> None:
        self.by_token = {document.token: document for document in corpus}
        self.checked: Counter[str] = Counter()
        self.queries: Counter[str] = Counter()
        self.found_asked: Counter[str] = Counter()
        self.missed_asked: list[tuple[str, str, str]] = []
        self.leaks: list[dict] = []
        #: Calls per (service, "METHOD /route"), for ``DOCUMENT_ROUTES``.
        self.routes: Counter[tuple[str, str]] = Counter()

    def update(self, document: Planted) -> None:
        self.by_token[document.token] = document

    def check_text(self, channel: str, identity: Identity, text: str, *, allowed: frozenset[str] = frozenset()) -> set[str]:
        """Every planted token in ``text`` must be readable by ``identity`` (or in ``allowed``: the
        question's own token, which a generated answer may repeat). Returns the tokens seen."""
        seen = set(TOKEN.findall(text))
        for token in seen - allowed:
            self.checked[channel] += 1
            document = self.by_token.get(token)
            if document is None or not document.readable_by(identity):
                self.leaks.append({"channel": channel, "identity": identity.model_dump(), "token": token,
                                   "document": None if document is None else (document.tenant, document.doc_id, document.acl)})
        return seen

    def expect_found(self, channel: str, identity: Identity, asked: Planted | None, seen: set[str]) -> None:
        """A query naming a readable document's token must bring that document back."""
        if asked is None or not asked.readable_by(identity):
            return
        if asked.token in seen:
            self.found_asked[channel] += 1
        else:
            self.missed_asked.append((channel, identity.model_dump_json(), asked.token))

    def report(self) -> dict:
        return {
            "queries": dict(self.queries), "queries_total": sum(self.queries.values()),
            "tokens_checked": dict(self.checked), "leaks": len(self.leaks), "leak_examples": self.leaks[:5],
            "readable_asked_found": dict(self.found_asked), "readable_asked_missed": len(self.missed_asked),
        }


async def ingest(client: httpx.AsyncClient, gateway: str, key: str, documents: list[Planted], *, upload: bool) -> dict:
    headers = {"Authorization": f"Bearer {key}"}
    if upload:  # one request per document: the upload's acl applies to all its files
        [document] = documents
        files = [("files", (f"{document.doc_id}.md", f"# {document.title}\n\n{document.text}".encode(), "text/markdown"))]
        data = {} if document.acl is None else {"acl": json.dumps(document.acl)}
        response = await client.post(f"{gateway}/v1/documents", files=files, data=data, headers=headers)
    else:
        body = {"documents": [
            {"id": d.doc_id, "title": d.title, "text": d.text, **({"acl": d.acl} if d.acl is not None else {})}
            for d in documents
        ]}
        response = await client.post(f"{gateway}/v1/documents", json=body, headers=headers)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["failed"] == [], result
    return result


class Keys:
    """One API key per identity, created on first use, as an operator would with ``ragctl keys``."""

    def __init__(self, store: ApiKeyStore) -> None:
        self._store = store
        self._tokens: dict[str, str] = {}

    async def of(self, identity: Identity) -> str:
        name = identity.model_dump_json()
        if name not in self._tokens:
            created = await self._store.create(
                tenant=identity.tenant, user=identity.user, groups=identity.groups, scopes=identity.scopes
            )
            self._tokens[name] = created.token
        return self._tokens[name]


def question(rng: random.Random, corpus: list[Planted]) -> tuple[str, Planted | None, str]:
    """A query text, the document it names (if any) and its shape."""
    target = rng.choice(corpus)
    shape = rng.choice(("token", "question", "hyde_text", "topic"))
    if shape == "token":
        return target.token, target, shape
    if shape == "question":
        return f"What does record {target.token} say about the {target.topic} procedure?", target, shape
    if shape == "hyde_text":  # a hypothetical passage that is exactly some document's text
        return target.text, target, shape
    return f"{target.topic} procedure of the {target.unit} unit", None, shape


async def search_at_retriever(
    client: httpx.AsyncClient, stack: AuthenticatedStack, ledger: Ledger, rng: random.Random, corpus: list[Planted]
) -> None:
    text, asked, shape = question(rng, corpus)
    identity = random_identity(rng, asked)
    mode = rng.choice(("dense", "bm25", "hybrid"))
    channel = "retriever/hyde_text" if shape == "hyde_text" else f"retriever/{mode}"
    headers = {SERVICE_TOKEN_HEADER: stack.service_token, **identity_headers(identity)}
    body = {"query": text, "mode": mode, "top_k": rng.randint(1, 50)}
    response = await client.post(f"{stack.urls['retriever']}/v1/search", json=body, headers=headers)
    assert response.status_code == 200, response.text
    ledger.queries[channel] += 1
    ledger.routes["retriever", "POST /v1/search"] += 1
    seen: set[str] = set()
    for passage in response.json()["passages"]:
        seen |= ledger.check_text(channel, identity, f"{passage['title']} {passage['text']}")
    if mode != "dense" and shape in ("token", "question"):  # an exact term: BM25 must find it
        ledger.expect_found(channel, identity, asked, seen)


async def ask_gateway(
    client: httpx.AsyncClient, stack: AuthenticatedStack, ledger: Ledger, keys: Keys,
    rng: random.Random, corpus: list[Planted], channel: str,
) -> None:
    target = rng.choice(corpus)
    identity = random_identity(rng, target)
    message = f"What does record {target.token} say about the {target.topic} procedure?"
    headers = {"Authorization": f"Bearer {await keys.of(identity)}"}
    gateway = stack.urls["gateway"]
    if channel == "openai":
        body = {"model": "rag", "messages": [{"role": "user", "content": message}]}
        response = await client.post(f"{gateway}/v1/chat/completions", json=body, headers=headers)
        assert response.status_code == 200, response.text
        result = response.json()
        answer = result["choices"][0]["message"]["content"]
        citations = result["citations"]
    elif channel == "stream":
        response = await client.post(f"{gateway}/v1/chat/stream", json={"message": message}, headers=headers)
        assert response.status_code == 200, response.text
        events = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:")]
        final = [event for event in events if isinstance(event, dict) and "citations" in event]
        assert final, response.text[-500:]
        answer, citations = response.text, final[-1]["citations"]
    else:
        body = {"message": message, "hyde": channel == "hyde"}
        response = await client.post(f"{gateway}/v1/chat", json=body, headers=headers)
        assert response.status_code == 200, response.text
        result = response.json()
        answer, citations = result["answer"], result["citations"]
    ledger.queries[f"gateway/{channel}"] += 1
    route = {"openai": "POST /v1/chat/completions", "stream": "POST /v1/chat/stream"}.get(channel, "POST /v1/chat")
    ledger.routes["gateway", route] += 1
    seen: set[str] = set()
    for citation in citations:
        seen |= ledger.check_text(f"gateway/{channel}", identity, f"{citation['title']} {citation['quote']}")
    ledger.check_text(f"gateway/{channel}/answer", identity, answer, allowed=frozenset({target.token}))


def manager_of(document: Planted, rng: random.Random) -> Identity:
    """Someone allowed to change ``document``'s ACL: a member of its current ACL with the ``ingest``
    scope, or, when the ACL names nobody, the tenant's admin-scoped key."""
    scopes: list = ["chat", "ingest"]
    acl = document.acl
    if acl is None:
        return Identity(tenant=document.tenant, user=rng.choice(USERS), scopes=scopes)
    if acl["users"] and (not acl["groups"] or rng.random() < 0.5):
        return Identity(tenant=document.tenant, user=rng.choice(acl["users"]), scopes=scopes)
    if acl["groups"]:
        return Identity(tenant=document.tenant, user=rng.choice(USERS), groups=[rng.choice(acl["groups"])], scopes=scopes)
    return admin_of(document.tenant)


def admin_of(tenant: str) -> Identity:
    """The tenant's admin-scoped key (user ``admin``, in no group: its own principals read only ``*``)."""
    return Identity(tenant=tenant, user="admin", scopes=["chat", "ingest", "admin"])


async def change_acls(
    client: httpx.AsyncClient, gateway: str, keys: Keys, ledger: Ledger, rng: random.Random
) -> list[tuple[Planted, Identity]]:
    """Re-ingest a third of each tenant's JSON documents with another ACL (same text: nothing re-embedded),
    each by someone allowed to: a member of its current ACL, or the admin key (``manager_of``). The
    managers are drawn from their own generator, so the queries' sequence stays that of ``RAG_LEAK_SEED``."""
    changed = []
    managers = random.Random(SEED + 1)
    for tenant in TENANTS:
        mine = [d for d in ledger.by_token.values() if d.tenant == tenant and int(d.doc_id[-2:]) % 2 == 0]
        batch = [replace(d, acl=acl_of_kind(rng.randrange(6), rng)) for d in rng.sample(mine, len(mine) // 3)]
        batch = [d for d in batch if readers(d) != readers(ledger.by_token[d.token])]  # another ACL, not another order
        by_manager: dict[str, tuple[Identity, list[Planted]]] = {}
        for document in batch:
            manager = manager_of(ledger.by_token[document.token], managers)
            by_manager.setdefault(manager.model_dump_json(), (manager, []))[1].append(document)
        for manager, documents in by_manager.values():
            result = await ingest(client, gateway, await keys.of(manager), documents, upload=False)
            assert (result["documents"], result["chunks"]) == (len(documents), len(documents))
            ledger.routes["gateway", "POST /v1/documents"] += 1
            changed.extend((document, manager) for document in documents)
        for document in batch:
            ledger.update(document)
    return changed


def readers(document: Planted) -> list[str]:
    """The principals the retriever reports (and the audit log keeps) for ``document``."""
    if document.acl is None:
        return ["*"]
    return sorted([f"group:{g}" for g in document.acl["groups"]] + [f"user:{u}" for u in document.acl["users"]])


async def check_audited(redis: Redis, changed: list[tuple[Planted, Identity]]) -> None:
    """Each ACL change is in the audit log: who (the member or admin who made it), which document, its
    new readers."""
    entries = [e for e in await AuditLog(redis).recent(1000) if e["action"] == "documents.ingest"]
    for document, manager in changed:
        actor = f"{manager.tenant}/{manager.user}"
        assert any(
            e["actor"] == actor and e["detail"].get("readers", {}).get(document.doc_id) == readers(document) for e in entries
        ), (actor, document.doc_id, readers(document))


# --------------------------------------------------------------------------- document operations (issue 29)


def plain_hashes(document: Planted) -> set[str]:
    """What a plain (unkeyed) content hash of ``document`` could be: sha256 of its text as sent, normalised
    (stripped: the texts here are ASCII with LF line ends) and, for an upload, of the file's text."""
    texts = {document.text, document.text.strip()}
    if document.uploaded:
        texts |= {document.upload_body, document.upload_body.strip()}
    return {hashlib.sha256(text.encode("utf-8")).hexdigest() for text in texts}


def member_of(document: Planted) -> Identity | None:
    """Someone whose own principals read ``document`` (None when its ACL names nobody)."""
    acl = document.acl
    if acl is None:
        return Identity(tenant=document.tenant, user="u0", scopes=["chat", "ingest"])
    if acl["users"]:
        return Identity(tenant=document.tenant, user=acl["users"][0], scopes=["chat", "ingest"])
    if acl["groups"]:
        return Identity(tenant=document.tenant, user="member", groups=[acl["groups"][0]], scopes=["chat", "ingest"])
    return None


def outsider_of(document: Planted, rng: random.Random, scopes: list) -> Identity:
    """Someone of ``document``'s tenant whom its ACL (not the tenant-wide one) does not name."""
    acl = document.acl or {"groups": [], "users": []}
    user = rng.choice([u for u in USERS if u not in acl["users"]])
    groups = sorted(g for g in GROUPS if g not in acl["groups"] and rng.random() < 0.4)
    return Identity(tenant=document.tenant, user=user, groups=groups, scopes=scopes)


def other_tenant(tenant: str, rng: random.Random) -> str:
    return rng.choice([t for t in TENANTS if t != tenant])


#: The kinds of caller of the randomised document operations, and how often each is drawn.
CALLER_KINDS = {"member": 3, "outsider": 4, "chat_only": 1, "other_tenant": 2, "admin": 2, "admin_other_tenant": 1}
#: The operations, and how often each is drawn.
OPERATIONS = {"list": 2, "readable": 1, "guess_copy": 2, "overwrite_text": 2, "overwrite_acl": 2, "overwrite_same": 2, "delete": 2}
WRITES = ("overwrite_text", "overwrite_acl", "overwrite_same", "delete")


@dataclass
class Outcome:
    """Tallies of the document operations."""

    tried: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)
    permitted: Counter[str] = field(default_factory=Counter)
    verifications: int = 0
    leaks: list[dict] = field(default_factory=list)
    unauthorised_writes: list[dict] = field(default_factory=list)
    over_refusals: list[dict] = field(default_factory=list)
    duplicates_named: int = 0
    #: Guessed copies of a document of the caller's tenant it may not see, whose holder was (rightly) not named.
    duplicates_withheld: int = 0
    hashes_checked: int = 0
    withheld_notices: set[str] = field(default_factory=set)
    #: Admin-scoped calls through the gateway looked up in the audit log.
    admin_calls_audited: int = 0
    scenarios: Counter[str] = field(default_factory=Counter)

    def report(self) -> dict:
        return {
            "operations": dict(sorted(self.tried.items())), "operations_total": sum(self.tried.values()),
            "refused_as_expected": sum(self.refused.values()), "permitted_and_done": sum(self.permitted.values()),
            "refused_by_operation": dict(sorted(self.refused.items())),
            "permitted_by_operation": dict(sorted(self.permitted.items())),
            "verifications": self.verifications, "readable_duplicates_named": self.duplicates_named,
            "unreadable_duplicates_withheld": self.duplicates_withheld,
            "content_hashes_checked": self.hashes_checked, "scenarios": dict(self.scenarios),
            "admin_calls_audited": self.admin_calls_audited,
            "leaks": len(self.leaks), "leak_examples": self.leaks[:5],
            "unauthorised_writes": len(self.unauthorised_writes), "unauthorised_write_examples": self.unauthorised_writes[:5],
            "over_refusals": len(self.over_refusals), "over_refusal_examples": self.over_refusals[:5],
        }


class DocumentChecks:
    """Every operation that carries or changes document data, by randomised callers, each checked."""

    def __init__(
        self, client: httpx.AsyncClient, stack: AuthenticatedStack, ledger: Ledger, keys: Keys, rng: random.Random
    ) -> None:
        self.client, self.stack, self.ledger, self.keys, self.rng = client, stack, ledger, keys, rng
        self.docs: dict[tuple[str, str], Planted] = {}
        #: The admin listing's entry of each document as it should be now.
        self.baseline: dict[tuple[str, str], dict] = {}
        self.outcome = Outcome()
        self.serial = itertools.count()
        #: Admin-scoped calls through the gateway, to find in the audit log: (actor, action, target).
        self.admin_calls: list[tuple[str, str, str]] = []

    # ---------------------------------------------------------------- calls

    async def call(self, identity: Identity, channel: str, method: str, route: str, path: str,
                   audit: tuple[str, str] | None = None, **kwargs: Any) -> httpx.Response:
        """``method path`` as ``identity``: through the gateway with its API key, or at the retriever as
        the gateway calls it (service credential + identity header). ``audit``: (action, target) of the
        audit entry an admin-scoped call through the gateway must leave when it succeeds."""
        if channel == "gateway":
            headers = {"Authorization": f"Bearer {await self.keys.of(identity)}"}
        else:
            headers = {SERVICE_TOKEN_HEADER: self.stack.service_token, **identity_headers(identity)}
        self.ledger.routes[channel, f"{method} {route}"] += 1
        response = await self.client.request(method, f"{self.stack.urls[channel]}{path}", headers=headers, **kwargs)
        if audit is not None and response.status_code == 200 and channel == "gateway" and identity.has_scope("admin"):
            self.admin_calls.append((f"{identity.tenant}/{identity.user}", *audit))
        return response

    async def send(self, identity: Identity, channel: str, documents: list[dict] | None = None,
                   upload: Planted | None = None, upload_acl: Any = "same") -> httpx.Response:
        """An ingest: JSON ``documents`` or ``upload`` as its Markdown file (with ``upload_acl``, by default its own)."""
        if upload is None:
            audit = ("documents.ingest", documents[-1]["id"])
            return await self.call(identity, channel, "POST", "/v1/documents", "/v1/documents", audit, json={"documents": documents})
        acl = upload.acl if upload_acl == "same" else upload_acl
        files = [("files", (f"{upload.doc_id}.md", upload.upload_body.encode(), "text/markdown"))]
        data = {} if acl is None else {"acl": json.dumps(acl)}
        route = "/v1/documents" if channel == "gateway" else "/v1/documents/upload"
        return await self.call(identity, channel, "POST", route, route, ("documents.ingest", upload.stored_id), files=files, data=data)

    async def delete(self, identity: Identity, channel: str, doc_id: str) -> httpx.Response:
        return await self.call(identity, channel, "DELETE", "/v1/documents/{doc_id}", f"/v1/documents/{quote(doc_id, safe='')}",
                               ("document.delete", doc_id))

    async def listing(self, identity: Identity, channel: str = "retriever") -> dict[str, dict]:
        response = await self.call(identity, channel, "GET", "/v1/documents", "/v1/documents")
        assert response.status_code == 200, response.text
        return {entry["doc_id"]: entry for entry in response.json()["documents"]}

    async def finds(self, identity: Identity, query: str, doc_id: str | None = None) -> list[dict]:
        """The passages a bm25 search for ``query`` (a token) returns ``identity`` that hold it (of ``doc_id``)."""
        body = {"query": query, "mode": "bm25", "top_k": 10}
        response = await self.call(identity, "retriever", "POST", "/v1/search", "/v1/search", json=body)
        assert response.status_code == 200, response.text
        return [p for p in response.json()["passages"]
                if query in f"{p['title']} {p['text']}" and (doc_id is None or p["doc_id"] == doc_id)]

    # ---------------------------------------------------------------- what may be seen

    def view(self, identity: Identity) -> dict[str, Planted]:
        """The documents ``identity`` may list and manage, by stored id (its tenant's only)."""
        return {d.stored_id: d for (tenant, _), d in self.docs.items() if tenant == identity.tenant and d.manageable_by(identity)}

    def leak(self, what: str, identity: Identity, **detail: Any) -> None:
        self.outcome.leaks.append({"what": what, "identity": identity.model_dump(), **detail})

    def check_body(self, what: str, identity: Identity, body: str, *, sent_ids: set[str], sent_tokens: set[str],
                   refused: bool) -> None:
        """Whatever a response holds is the caller's own (what it sent) or something it may see: planted
        tokens, document ids; a refusal names nothing but what was sent, and no reader or digest."""
        visible = self.view(identity)
        tokens_ok = sent_tokens | ({d.token for d in visible.values()} if not refused else set())
        ids_ok = sent_ids | (set(visible) if not refused else set())
        for token in set(TOKEN.findall(body)) - tokens_ok:
            self.leak(what, identity, token=token, body=body[:300])
        for doc_id in set(DOC_ID.findall(body)) - ids_ok:
            self.leak(what, identity, doc_id=doc_id, body=body[:300])
        if refused:
            if "group:" in body or "user:" in body or HEX_DIGEST.search(body):
                self.leak(what, identity, readers_or_digest=body[:300])
            try:
                parsed = json.loads(body)
            except ValueError:
                parsed = None
            if not isinstance(parsed, dict) or "error" not in parsed:
                self.outcome.leaks.append({"what": f"{what}: refusal is not an error body", "body": body[:300]})

    # ---------------------------------------------------------------- set-up and checks of state

    async def setup(self) -> None:
        """The corpus as the queries left it, plus per tenant six documents whose ids exist only there
        (one per ACL kind) and two twins (``TWIN_TEXT``); then the baseline and the hash checks."""
        for document in self.ledger.by_token.values():
            self.docs[document.tenant, document.stored_id] = document
        for tenant in TENANTS:
            extra = []
            for i in range(6):
                token = "zq" + "".join(self.rng.choices(string.ascii_lowercase + string.digits, k=8))
                extra.append(Planted(tenant, f"solo-{tenant}-{i}", token, self.rng.choice(TOPICS), self.rng.choice(UNITS),
                                     acl_of_kind(i, self.rng)))
            twins = [Planted(tenant, f"twin-{x}", "", "", "", None, twin=True) for x in "ab"]
            ingester = Identity(tenant=tenant, user="ingester", scopes=["ingest"])
            result = await ingest(self.client, self.stack.urls["gateway"], await self.keys.of(ingester), extra + twins, upload=False)
            self.ledger.routes["gateway", "POST /v1/documents"] += 1
            assert result["documents"] == 8, result
            for document in extra:
                self.ledger.update(document)
            for document in extra + twins:
                self.docs[tenant, document.stored_id] = document
        for tenant in TENANTS:
            await self.refresh(tenant)
        await self.check_hashes()

    async def refresh(self, tenant: str) -> None:
        """The baseline of ``tenant``: its admin listing, which must be exactly its documents."""
        listed = await self.listing(admin_of(tenant))
        expected = {d.stored_id for (t, _), d in self.docs.items() if t == tenant}
        assert set(listed) == expected, (tenant, sorted(set(listed) ^ expected))
        for doc_id, entry in listed.items():
            self.baseline[tenant, doc_id] = entry

    async def check_hashes(self) -> None:
        """``content_hash``: 64 hex characters, not a plain sha256 of the text, equal for the twins of a
        tenant, different across tenants and between different contents."""
        by_tenant: dict[str, set[str]] = {}
        for (tenant, doc_id), entry in self.baseline.items():
            digest = entry["content_hash"]
            document = self.docs[tenant, doc_id]
            assert digest is not None and re.fullmatch(r"[0-9a-f]{64}", digest), entry
            if digest in plain_hashes(document):
                self.leak("content_hash is a plain sha256 of the text", admin_of(tenant), doc_id=doc_id)
            self.outcome.hashes_checked += 1
            if not document.twin:
                by_tenant.setdefault(tenant, set()).add(digest)
        twins = {tenant: {self.baseline[tenant, "twin-a"]["content_hash"], self.baseline[tenant, "twin-b"]["content_hash"]}
                 for tenant in TENANTS}
        for tenant, digests in twins.items():  # duplicates are still found by their digest
            if len(digests) != 1:
                self.outcome.over_refusals.append({"what": "one content, two digests in one tenant", "digests": sorted(digests)})
        if len(set().union(*twins.values())) != len(TENANTS):  # comparable across tenants: a cross-tenant oracle
            self.leak("one content, one digest across tenants", admin_of(TENANTS[0]), digests={t: sorted(d) for t, d in twins.items()})
        for tenant, digests in by_tenant.items():
            documents = [d for (t, _), d in self.docs.items() if t == tenant and not d.twin]
            if len(digests) != len(documents):
                self.outcome.over_refusals.append({"what": "different contents, equal digests", "tenant": tenant})

    async def verify_unchanged(self, target: Planted, attacker: Identity, *, what: str,
                               absent_ids: set[str] = frozenset(), absent_tokens: set[str] = frozenset()) -> None:
        """After a refused write: ``target`` is as it was (the admin listing's entry, a member still finds
        its text, the attacker still does not), and nothing else the request carried was written."""
        self.outcome.verifications += 1
        tenant = target.tenant
        problems = []
        listed = await self.listing(admin_of(tenant))
        if listed.get(target.stored_id) != self.baseline[tenant, target.stored_id]:
            problems.append({"listing": listed.get(target.stored_id), "was": self.baseline[tenant, target.stored_id]})
        if attacker.tenant != tenant:
            listed_there = await self.listing(admin_of(attacker.tenant))
            for doc_id in absent_ids & set(listed_there):
                problems.append({"written_in_callers_tenant": doc_id})
        problems += [{"written": doc_id} for doc_id in absent_ids & set(listed)]
        member = member_of(target)
        if member is not None and not target.twin:
            found = await self.finds(member, target.token, target.stored_id)
            if not found or any(token in p["text"] for p in found for token in absent_tokens):
                problems.append({"member_finds": found[:1]})
        if not target.twin and not target.readable_by(attacker) and await self.finds(attacker, target.token, target.stored_id):
            problems.append({"acl_widened_to": attacker.model_dump()})
        for token in absent_tokens:
            for searcher in (admin_of(tenant), admin_of(attacker.tenant), attacker):
                if await self.finds(searcher, token):
                    problems.append({"written_text": token, "found_by": searcher.user})
        if problems:
            self.outcome.unauthorised_writes.append({"what": what, "identity": attacker.model_dump(),
                                                     "target": (tenant, target.stored_id), "problems": problems})
            await self.repair(target, attacker, absent_ids)

    async def repair(self, target: Planted, attacker: Identity, written: set[str]) -> None:
        """After an unauthorised write (counted): the index back as this test believes it is, so that one
        failure does not cascade into the checks that follow."""
        for tenant in {target.tenant, attacker.tenant}:
            for doc_id in written:
                await self.delete(admin_of(tenant), "retriever", doc_id)
        await self.restore(target, admin_of(target.tenant), "retriever")

    # ---------------------------------------------------------------- the randomised operations

    def draw(self) -> tuple[str, str, Planted, Identity, str]:
        """(caller kind, operation, target document, caller, channel)."""
        rng = self.rng
        kind = rng.choices(list(CALLER_KINDS), weights=list(CALLER_KINDS.values()))[0]
        operation = rng.choices(list(OPERATIONS), weights=list(OPERATIONS.values()))[0]
        planted = [d for d in self.docs.values() if not d.twin]
        if kind in ("outsider", "chat_only"):
            target = rng.choice([d for d in planted if d.acl is not None])
            caller = outsider_of(target, rng, ["chat"] if kind == "chat_only" else ["chat", "ingest"])
        elif kind == "member":
            target = rng.choice([d for d in planted if member_of(d) is not None])
            caller = member_of(target)
            caller = replace_identity(caller, user=rng.choice(target.acl["users"]) if target.acl and target.acl["users"] else caller.user)
        elif kind == "admin":
            target = rng.choice(planted)
            caller = admin_of(target.tenant)
        else:  # another tenant: only ids that exist in the target's tenant alone mean "another tenant's document"
            target = rng.choice([d for d in planted if d.doc_id.startswith("solo-")])
            tenant = other_tenant(target.tenant, rng)
            caller = admin_of(tenant) if kind == "admin_other_tenant" else Identity(
                tenant=tenant, user=rng.choice(USERS), groups=sorted(rng.sample(GROUPS, 2)), scopes=["chat", "ingest"])
        # A chat-only caller's writes are the gateway's to refuse (scope); the retriever trusts the gateway for scopes.
        channel = "gateway" if kind == "chat_only" or rng.random() < 0.65 else "retriever"
        return kind, operation, target, caller, channel

    async def run(self, count: int) -> None:
        for _ in range(count):
            kind, operation, target, caller, channel = self.draw()
            self.outcome.tried[f"{kind}/{operation}"] += 1
            await getattr(self, f"op_{operation}")(kind, target, caller, channel)

    def expect(self, what: str, response: httpx.Response, allowed: bool, refusal: int = 403) -> bool:
        """Tally the outcome; True when it was the expected one."""
        if allowed:
            if response.status_code == 200:
                self.outcome.permitted[what] += 1
                return True
            self.outcome.over_refusals.append({"what": what, "status": response.status_code, "body": response.text[:300]})
            return False
        if response.status_code == refusal:
            self.outcome.refused[what] += 1
            return True
        self.outcome.unauthorised_writes.append({"what": what, "status": response.status_code, "body": response.text[:300]})
        return False

    async def op_list(self, kind: str, target: Planted, caller: Identity, channel: str) -> None:
        response = await self.call(caller, channel, "GET", "/v1/documents", "/v1/documents", ("documents.list", caller.tenant))
        assert response.status_code == 200, response.text
        listed = {entry["doc_id"]: entry for entry in response.json()["documents"]}
        visible = self.view(caller)
        self.check_body(f"list ({kind})", caller, response.text, sent_ids=set(), sent_tokens=set(), refused=False)
        if set(listed) - set(visible):
            self.leak(f"list ({kind})", caller, unreadable=sorted(set(listed) - set(visible)))
        if set(visible) - set(listed):
            self.outcome.over_refusals.append({"what": f"list ({kind})", "identity": caller.model_dump(),
                                               "hidden": sorted(set(visible) - set(listed))})
        else:
            self.outcome.permitted["list"] += 1
        for doc_id, entry in listed.items():
            baseline = self.baseline.get((caller.tenant, doc_id))
            if baseline is not None and entry != baseline:  # the same digest for everyone of the tenant
                self.outcome.over_refusals.append({"what": "list entry differs from the admin's", "entry": entry, "admin": baseline})

    async def op_readable(self, kind: str, target: Planted, caller: Identity, channel: str) -> None:
        """The retriever's readable check, which the gateway asks before it shows a stored answer or
        source: the caller's own principals decide (an admin-scoped caller's chats see no more)."""
        asked = sorted({target.stored_id, "nope-1", *self.rng.sample([d.stored_id for d in self.docs.values()], 5)})
        response = await self.call(caller, "retriever", "POST", "/v1/documents/readable", "/v1/documents/readable",
                                   json={"doc_ids": asked})
        if response.status_code != 200:
            self.outcome.over_refusals.append({"what": "readable", "status": response.status_code, "body": response.text[:200]})
            return
        answered = set(response.json()["doc_ids"])
        expected = {doc_id for doc_id in asked if (document := self.docs.get((caller.tenant, doc_id))) and document.readable_by(caller)}
        if answered - expected:
            self.leak(f"readable ({kind})", caller, unreadable=sorted(answered - expected))
        if expected - answered:
            self.outcome.over_refusals.append({"what": f"readable ({kind})", "hidden": sorted(expected - answered)})
        else:
            self.outcome.permitted["readable"] += 1

    async def op_guess_copy(self, kind: str, target: Planted, caller: Identity, channel: str) -> None:
        """A new document holding exactly ``target``'s content (an upload's: its file's text, heading and
        all): its holders appear in ``duplicates`` only if the caller may see them. The copy is deleted
        again (the caller's own document: allowed)."""
        if "ingest" not in caller.scopes:
            return await self.op_list(kind, target, caller, channel)
        copy_id = f"guess-{next(self.serial)}"
        content = target.upload_body if target.uploaded else target.text
        response = await self.send(caller, channel, [{"id": copy_id, "text": content}])
        if not self.expect("guess_copy", response, allowed=True):
            return
        result = response.json()
        self.check_body(f"guess_copy ({kind})", caller, response.text, sent_ids={copy_id}, sent_tokens={target.token}, refused=False)
        visible = self.view(caller)
        # The holders of this content: the target (tokens are unique), if the caller may see it.
        holders = {target.stored_id} & set(visible)
        named: set[str] = set()
        for entry in result["duplicates"]:
            named |= set(entry["duplicate_of"])
            if not entry["duplicate_of"]:
                self.leak(f"guess_copy ({kind}): empty duplicate_of", caller, entry=entry)
        if named - set(visible):
            self.leak(f"guess_copy ({kind})", caller, named=sorted(named - set(visible)), target=target.stored_id)
        if holders - named:
            self.outcome.over_refusals.append({"what": f"guess_copy ({kind}): readable holder not named",
                                               "missing": sorted(holders - named)})
        self.outcome.duplicates_named += len(holders & named)
        if target.stored_id not in visible and caller.tenant == target.tenant:
            self.outcome.duplicates_withheld += target.stored_id not in named
        deleted = await self.delete(caller, channel, copy_id)
        assert deleted.status_code == 200, deleted.text

    async def op_overwrite_text(self, kind: str, target: Planted, caller: Identity, channel: str) -> None:
        """``target``'s id with other text (readable by everyone when refused, so that a write would show),
        sometimes after a new document of the caller's own in the same request."""
        allowed, refusal = self.write_rule(target, caller, channel)
        token = "zq" + "".join(self.rng.choices(string.ascii_lowercase + string.digits, k=8))
        other = {"id": target.stored_id, "title": f"Record {token}", "text": f"Replaced: {token} now says something else entirely."}
        if allowed:
            other["acl"] = target.acl
        documents = [other]
        sent_tokens, companions = {token}, set()
        if not allowed and self.rng.random() < 0.5:
            companion = f"new-{next(self.serial)}"
            ctoken = "zq" + "".join(self.rng.choices(string.ascii_lowercase + string.digits, k=8))
            documents.insert(0, {"id": companion, "text": f"A note {ctoken} of the caller's own."})
            sent_tokens.add(ctoken)
            companions.add(companion)
        response = await self.send(caller, channel, documents)
        if not self.expect("overwrite_text", response, allowed, refusal):
            return await self.verify_unchanged(target, caller, what="overwrite_text", absent_ids=companions,
                                               absent_tokens=sent_tokens if not allowed else set())
        self.check_body(f"overwrite_text ({kind})", caller, response.text, sent_ids={d["id"] for d in documents},
                        sent_tokens=sent_tokens, refused=not allowed)
        if not allowed:
            return await self.verify_unchanged(target, caller, what="overwrite_text", absent_ids=companions,
                                               absent_tokens=sent_tokens)
        if caller.tenant != target.tenant:  # its own namespace: a new document there; the other tenant's untouched
            await self.remove_own(caller, target.stored_id)
            await self.verify_unchanged(target, caller, what="overwrite_text (other tenant)")
            return
        # Allowed: the member's new text is what members find; then the original goes back.
        member = member_of(target)
        if member is not None and not await self.finds(member, token, target.stored_id):
            self.outcome.over_refusals.append({"what": "overwrite_text: the permitted new text is not found"})
        await self.restore(target, caller, channel)

    async def op_overwrite_acl(self, kind: str, target: Planted, caller: Identity, channel: str) -> None:
        """``target``'s own text with a wider ACL (refused) or another ACL (permitted: it stays)."""
        allowed, refusal = self.write_rule(target, caller, channel)
        if allowed:
            acl = target.acl
            while readers(replace(target, acl=acl)) == readers(target):  # another ACL, not another order
                acl = acl_of_kind(self.rng.randrange(6), self.rng)
        else:
            acl = self.rng.choice([None, {"groups": list(caller.groups), "users": [caller.user]}])
        if target.uploaded:
            response = await self.send(caller, channel, upload=target, upload_acl=acl)
        else:
            response = await self.send(caller, channel, [{"id": target.stored_id, "title": target.title, "text": target.text,
                                                          **({"acl": acl} if acl is not None else {})}])
        if not self.expect("overwrite_acl", response, allowed, refusal):
            return await self.verify_unchanged(target, caller, what="overwrite_acl")
        self.check_body(f"overwrite_acl ({kind})", caller, response.text, sent_ids={target.stored_id},
                        sent_tokens={target.token}, refused=not allowed)
        if not allowed:
            return await self.verify_unchanged(target, caller, what="overwrite_acl")
        if caller.tenant != target.tenant:
            await self.remove_own(caller, target.stored_id)
            await self.verify_unchanged(target, caller, what="overwrite_acl (other tenant)")
            return
        changed = replace(target, acl=acl)
        if response.json()["readers"] != {target.stored_id: readers(changed)}:
            self.outcome.over_refusals.append({"what": "overwrite_acl: readers", "answer": response.json()["readers"]})
        self.docs[target.tenant, target.stored_id] = changed
        self.ledger.update(changed)
        await self.refresh(target.tenant)

    async def op_overwrite_same(self, kind: str, target: Planted, caller: Identity, channel: str) -> None:
        """``target`` exactly as it is: refused (not "unchanged", which would confirm its content), or,
        when permitted, skipped as unchanged."""
        allowed, refusal = self.write_rule(target, caller, channel)
        if target.uploaded:
            response = await self.send(caller, channel, upload=target)
        else:
            response = await self.send(caller, channel, [{"id": target.stored_id, "title": target.title, "text": target.text,
                                                          **({"acl": target.acl} if target.acl is not None else {})}])
        if not self.expect("overwrite_same", response, allowed, refusal):
            return await self.verify_unchanged(target, caller, what="overwrite_same")
        self.check_body(f"overwrite_same ({kind})", caller, response.text, sent_ids={target.stored_id},
                        sent_tokens={target.token}, refused=not allowed)
        if not allowed:
            return await self.verify_unchanged(target, caller, what="overwrite_same")
        if caller.tenant != target.tenant:
            await self.remove_own(caller, target.stored_id)
            await self.verify_unchanged(target, caller, what="overwrite_same (other tenant)")
            return
        if (response.json()["documents"], response.json()["skipped"]) != (0, 1):
            self.outcome.over_refusals.append({"what": "overwrite_same: not skipped as unchanged", "answer": response.text[:300]})

    async def op_delete(self, kind: str, target: Planted, caller: Identity, channel: str) -> None:
        """Delete ``target``: refused (403; another tenant's id: 404, unknown there) or done, checked gone,
        and put back."""
        allowed, refusal = self.write_rule(target, caller, channel)
        if caller.tenant != target.tenant:
            allowed, refusal = False, 404
        response = await self.delete(caller, channel, target.stored_id)
        if not self.expect("delete", response, allowed, refusal):
            return await self.verify_unchanged(target, caller, what="delete")
        self.check_body(f"delete ({kind})", caller, response.text, sent_ids={target.stored_id}, sent_tokens=set(),
                        refused=not allowed)
        if not allowed:
            return await self.verify_unchanged(target, caller, what="delete")
        listed = await self.listing(admin_of(target.tenant))
        member = member_of(target)
        if target.stored_id in listed or (member is not None and await self.finds(member, target.token)):
            self.outcome.over_refusals.append({"what": "delete: answered 200 but the document is still there"})
        await self.restore(target, admin_of(target.tenant), "retriever")

    async def remove_own(self, caller: Identity, doc_id: str) -> None:
        """Remove what a caller of another tenant wrote under a foreign id in its own tenant (by its admin:
        the ACL it was given may not name the caller)."""
        response = await self.delete(admin_of(caller.tenant), "retriever", doc_id)
        assert response.status_code == 200, response.text

    def write_rule(self, target: Planted, caller: Identity, channel: str) -> tuple[bool, int]:
        """Whether ``caller`` may write ``target``'s id, and the status of a refusal. Another tenant's id is
        the caller's own namespace: writing it creates the caller's own document (allowed)."""
        if channel == "gateway" and "ingest" not in caller.scopes:
            return False, 403
        if caller.tenant != target.tenant:
            return True, 403
        return target.manageable_by(caller), 403

    async def restore(self, target: Planted, identity: Identity, channel: str) -> None:
        """``target`` back as it was (same text, ACL, title), checked against its baseline."""
        if target.uploaded:
            response = await self.send(identity, channel, upload=target)
        else:
            response = await self.send(identity, channel, [{"id": target.stored_id, "title": target.title, "text": target.text,
                                                            **({"acl": target.acl} if target.acl is not None else {})}])
        assert response.status_code == 200, response.text
        listed = await self.listing(admin_of(target.tenant))
        assert listed.get(target.stored_id) == self.baseline[target.tenant, target.stored_id], (listed.get(target.stored_id), target)

    # ---------------------------------------------------------------- conversations

    async def conversation_scenarios(self) -> None:
        """Per tenant: a member's conversation cites a document, whose ACL then stops naming the member
        (changed by the admin key) or which the member deletes; and once an admin-scoped member. The
        cited source is then a 404 and the turn withheld, the conversation's other turn intact; once
        the document is back as it was, the source is shown again."""
        plans = [(tenant, change) for tenant in TENANTS for change in ("acl", "delete")] + [(TENANTS[0], "acl_admin_caller")]
        for tenant, change in plans:
            for _attempt in range(4):
                if await self.conversation_scenario(tenant, change):
                    self.outcome.scenarios[change] += 1
                    break
            else:
                self.outcome.scenarios[f"{change}: no citation of the asked document"] += 1

    async def chat(self, identity: Identity, document: Planted, conversation_id: str | None) -> dict:
        body = {"message": f"What does record {document.token} say about the {document.topic} procedure?",
                "conversation_id": conversation_id}
        response = await self.call(identity, "gateway", "POST", "/v1/chat", "/v1/chat", json=body)
        assert response.status_code == 200, response.text
        return response.json()

    async def source(self, identity: Identity, conversation_id: str, chunk_id: str) -> httpx.Response:
        route = "/v1/conversations/{conversation_id}/sources/{chunk_id}"
        return await self.call(identity, "gateway", "GET", route,
                               f"/v1/conversations/{conversation_id}/sources/{quote(chunk_id, safe='')}")

    async def turns(self, identity: Identity, conversation_id: str) -> list[dict]:
        response = await self.call(identity, "gateway", "GET", "/v1/conversations/{conversation_id}",
                                   f"/v1/conversations/{conversation_id}")
        assert response.status_code == 200, response.text
        return response.json()["turns"]

    async def conversation_scenario(self, tenant: str, change: str) -> bool:
        rng = self.rng
        candidates = [d for d in self.docs.values() if d.tenant == tenant and not d.twin and d.acl
                      and (d.acl["users"] or d.acl["groups"]) and not d.doc_id.startswith("solo-")]
        target = rng.choice(candidates)
        member = member_of(target)
        if change == "acl_admin_caller":
            member = Identity(tenant=tenant, user=member.user, groups=member.groups, scopes=["chat", "ingest", "admin"])
        other = rng.choice([d for d in self.docs.values() if d.tenant == tenant and not d.twin and d.acl is None
                            and not d.doc_id.startswith("solo-")])
        first = await self.chat(member, target, None)
        cited = [c for c in first["citations"] if c["chunk_id"].startswith(f"{target.stored_id}:")]
        if not cited:
            return False
        conversation_id = first["conversation_id"]
        second = await self.chat(member, other, conversation_id)
        # The control turn: it cites the other document and nothing of the target (else it is withheld too).
        kept = [c for c in second["citations"] if c["chunk_id"].startswith(f"{other.stored_id}:")]
        if any(c["chunk_id"].startswith(f"{target.stored_id}:") for c in second["citations"]):
            kept = []
        before = await self.source(member, conversation_id, cited[0]["chunk_id"])
        if before.status_code != 200 or target.token not in before.text:
            self.outcome.over_refusals.append({"what": "source of a readable cited document", "status": before.status_code})
            return True
        self.outcome.permitted["source"] += 1
        # The change, by someone allowed to make it.
        if change == "delete":
            response = await self.delete(member, "gateway", target.stored_id)
        else:
            narrowed = replace(target, acl={"groups": [], "users": ["someone-else"]})
            body = [{"id": target.stored_id, "title": target.title, "text": target.text, "acl": narrowed.acl}]
            response = await self.send(admin_of(tenant), "gateway", upload=narrowed) if target.uploaded else \
                await self.send(admin_of(tenant), "gateway", body)
        assert response.status_code == 200, response.text
        what = f"conversation after {change}"
        after = await self.source(member, conversation_id, cited[0]["chunk_id"])
        if after.status_code != 404:
            self.leak(f"{what}: source", member, status=after.status_code, body=after.text[:300])
        else:
            self.outcome.refused["source"] += 1
            self.check_body(f"{what}: source", member, after.text, sent_ids={target.stored_id}, sent_tokens=set(), refused=True)
        stored = await self.turns(member, conversation_id)
        turn = stored[0]
        shown = json.dumps({k: turn[k] for k in ("answer", "citations")})
        if turn["citations"] or target.token in shown or target.title in turn["answer"]:
            self.leak(f"{what}: stored turn", member, turn=shown[:300])
        else:
            self.outcome.refused["stored_turn"] += 1
            self.outcome.withheld_notices.add(turn["answer"])
        if kept:
            if stored[1]["citations"] != second["citations"] or stored[1]["answer"] != second["answer"]:
                self.outcome.over_refusals.append({"what": f"{what}: the other turn changed", "turn": stored[1]})
            elif (await self.source(member, conversation_id, kept[0]["chunk_id"])).status_code != 200:
                self.outcome.over_refusals.append({"what": f"{what}: the other turn's source hidden"})
            else:
                self.outcome.permitted["source"] += 1
        # Back as it was: the source is shown again (the check is made when shown, not once for all).
        await self.restore(target, admin_of(tenant), "gateway")
        again = await self.source(member, conversation_id, cited[0]["chunk_id"])
        if again.status_code != 200:
            self.outcome.over_refusals.append({"what": f"{what}: source still hidden once readable again", "status": again.status_code})
        else:
            self.outcome.permitted["source"] += 1
        return True

    async def check_admin_audit(self, redis: Redis) -> None:
        """Admin-scoped document management through the gateway (list, ingest, delete) is in the audit log:
        actor, action, the document (the tenant for a list), marked as done with the admin scope."""
        entries = await AuditLog(redis).recent(5000)
        for actor, action, target in self.admin_calls:
            self.outcome.admin_calls_audited += 1
            if not any(e["actor"] == actor and e["action"] == action and e["detail"].get("admin_scope") is True
                       and target in json.dumps([e["target"], e["detail"]]) for e in entries):
                self.outcome.unauthorised_writes.append({"what": "admin call not in the audit log", "call": (actor, action, target)})


def replace_identity(identity: Identity, **changes: Any) -> Identity:
    return identity.model_copy(update=changes)


def test_no_identity_reads_a_document_it_may_not(authenticated_stack: AuthenticatedStack, redis_url: str) -> None:
    report = asyncio.run(run_leak_test(authenticated_stack, redis_url))
    print(json.dumps(report, indent=1))
    if os.environ.get("RAG_LEAK_REPORT"):
        Path(os.environ["RAG_LEAK_REPORT"]).write_text(json.dumps(report, indent=1))
    assert report["leaks"] == 0, report["leak_examples"]
    assert report["readable_asked_missed"] == 0, report
    assert report["queries_total"] == QUERIES
    for channel in ("retriever/dense", "retriever/bm25", "retriever/hybrid", "retriever/hyde_text"):
        assert report["tokens_checked"].get(channel, 0) > 0, channel  # each channel returned documents
    documents = report["documents"]
    assert documents["leaks"] == 0, documents["leak_examples"]
    assert documents["unauthorised_writes"] == 0, documents["unauthorised_write_examples"]
    # Refusing is not enough: what the caller may do must be done (a filter hiding everything fails here).
    assert documents["over_refusals"] == 0, documents["over_refusal_examples"]
    for operation in WRITES:
        assert documents["refused_by_operation"].get(operation, 0) > 0, operation
        assert documents["permitted_by_operation"].get(operation, 0) > 0, operation
    for operation in ("list", "readable", "guess_copy", "source"):
        assert documents["permitted_by_operation"].get(operation, 0) > 0, operation
    assert documents["readable_duplicates_named"] > 0 and documents["unreadable_duplicates_withheld"] > 0
    assert documents["content_hashes_checked"] > 0
    assert documents["admin_calls_audited"] > 0
    assert documents["scenarios"].get("acl", 0) > 0 and documents["scenarios"].get("delete", 0) > 0, documents["scenarios"]
    assert len(documents["withheld_notices"]) == 1, documents["withheld_notices"]  # one fixed notice
    assert report["routes_not_called"] == [], report["routes_not_called"]


async def run_leak_test(stack: AuthenticatedStack, redis_url: str) -> dict:
    rng = random.Random(SEED)
    corpus = plant_corpus(rng)
    ledger = Ledger(corpus)
    redis = Redis.from_url(redis_url)
    keys = Keys(ApiKeyStore(redis))
    gateway = stack.urls["gateway"]
    try:
        async with httpx.AsyncClient(timeout=600) as client:
            for tenant in TENANTS:
                ingester = Identity(tenant=tenant, user="ingester", scopes=["ingest"])
                key = await keys.of(ingester)
                mine = [d for d in corpus if d.tenant == tenant]
                as_json = [d for d in mine if int(d.doc_id[-2:]) % 2 == 0]
                result = await ingest(client, gateway, key, as_json, upload=False)
                assert result["readers"] == {d.doc_id: readers(d) for d in as_json}
                for document in (d for d in mine if int(d.doc_id[-2:]) % 2 == 1):
                    uploaded = await ingest(client, gateway, key, [document], upload=True)
                    assert uploaded["readers"] == {f"{document.doc_id}.md": readers(document)}
                ledger.routes["gateway", "POST /v1/documents"] += 1

            started = time.monotonic()
            counts = {channel: round(QUERIES * share) for channel, share in GATEWAY_SHARE.items()}
            at_retriever = QUERIES - sum(counts.values())
            plan = ["retriever"] * at_retriever + [c for c, n in counts.items() for _ in range(n)]
            rng.shuffle(plan)
            half = len(plan) // 2
            for start in range(0, len(plan), 8):
                if start <= half < start + 8:
                    changed = await change_acls(client, gateway, keys, ledger, rng)
                    await check_audited(redis, changed)
                corpus_now = list(ledger.by_token.values())
                await asyncio.gather(*(
                    search_at_retriever(client, stack, ledger, rng, corpus_now) if channel == "retriever"
                    else ask_gateway(client, stack, ledger, keys, rng, corpus_now, channel)
                    for channel in plan[start : start + 8]
                ))

            seconds = {"queries": round(time.monotonic() - started)}
            # Then every operation on documents, from a generator of its own (the queries above stay as seeded).
            started = time.monotonic()
            checks = DocumentChecks(client, stack, ledger, keys, random.Random(SEED + 2))
            await checks.setup()
            await checks.run(DOCUMENT_OPS)
            await checks.conversation_scenarios()
            await checks.check_admin_audit(redis)
            seconds["documents"] = round(time.monotonic() - started)
    finally:
        await redis.aclose()
    documents = checks.outcome.report()
    documents["withheld_notices"] = sorted(checks.outcome.withheld_notices)
    return {
        **ledger.report(), "documents": documents, "seconds": seconds,
        "leaks_total": len(ledger.leaks) + documents["leaks"], "unauthorised_writes": documents["unauthorised_writes"],
        "routes_called": {f"{service} {route}": n for (service, route), n in sorted(ledger.routes.items())},
        "routes_not_called": [f"{service} {route}" for service, route in DOCUMENT_ROUTES if not ledger.routes[service, route]],
    }
