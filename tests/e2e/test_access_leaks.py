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
``RAG_LEAK_REPORT=path.json`` writes the tallies.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import string
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path

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


@dataclass(frozen=True)
class Planted:
    tenant: str
    doc_id: str
    token: str
    topic: str
    unit: str
    acl: dict[str, list[str]] | None

    @property
    def title(self) -> str:
        return f"Record {self.token}"

    @property
    def text(self) -> str:
        return (
            f"Record {self.token} describes the {self.topic} procedure of the {self.unit} unit. "
            f"Every {self.topic} request of the {self.unit} unit is filed under {self.token} and reviewed weekly."
        )

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
            corpus.append(Planted(tenant, f"record-{i:02d}", token, rng.choice(TOPICS), rng.choice(UNITS), acl_of_kind(i, rng)))
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
    seen: set[str] = set()
    for citation in citations:
        seen |= ledger.check_text(f"gateway/{channel}", identity, f"{citation['title']} {citation['quote']}")
    ledger.check_text(f"gateway/{channel}/answer", identity, answer, allowed=frozenset({target.token}))


async def change_acls(client: httpx.AsyncClient, gateway: str, keys: Keys, ledger: Ledger, rng: random.Random) -> list[Planted]:
    """Re-ingest a third of each tenant's JSON documents with another ACL (same text: nothing re-embedded)."""
    changed = []
    for tenant in TENANTS:
        ingester = Identity(tenant=tenant, user="ingester", scopes=["ingest"])
        mine = [d for d in ledger.by_token.values() if d.tenant == tenant and int(d.doc_id[-2:]) % 2 == 0]
        batch = [replace(d, acl=acl_of_kind(rng.randrange(6), rng)) for d in rng.sample(mine, len(mine) // 3)]
        batch = [d for d in batch if d.acl != ledger.by_token[d.token].acl]
        result = await ingest(client, gateway, await keys.of(ingester), batch, upload=False)
        assert (result["documents"], result["chunks"]) == (len(batch), len(batch))
        for document in batch:
            ledger.update(document)
        changed.extend(batch)
    return changed


def readers(document: Planted) -> list[str]:
    """The principals the retriever reports (and the audit log keeps) for ``document``."""
    if document.acl is None:
        return ["*"]
    return sorted([f"group:{g}" for g in document.acl["groups"]] + [f"user:{u}" for u in document.acl["users"]])


async def check_audited(redis: Redis, changed: list[Planted]) -> None:
    """Each tenant's ACL change is in the audit log: who, which documents, their new readers."""
    entries = [e for e in await AuditLog(redis).recent(50) if e["action"] == "documents.ingest"]
    for tenant in TENANTS:
        mine = [d for d in changed if d.tenant == tenant]
        [entry] = [e for e in entries if e["actor"] == f"{tenant}/ingester"][:1]
        assert entry["detail"]["readers"] == {d.doc_id: readers(d) for d in mine}


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
    finally:
        await redis.aclose()
    return ledger.report()
