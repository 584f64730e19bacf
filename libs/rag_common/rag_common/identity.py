"""Who is asking: the identity the gateway authenticated, carried on every internal call.

The gateway turns a credential (an API key or an OIDC/JWT bearer token) into an :class:`Identity`;
every call it makes to another service carries that identity in ``X-RAG-Identity`` next to the
service credential in ``X-RAG-Service-Token`` (``rag_common.internal_auth``), so a service never
trusts an identity that did not come through the gateway.

What an identity may read is decided by one rule, applied inside the search (never by filtering
results afterwards): a chunk is readable when its ``tenant`` is the identity's tenant and its
``readers`` share one principal with :meth:`Identity.principals` — ``*`` (a document without an ACL:
everyone in the tenant), ``user:<user>`` or ``group:<group>``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, ValidationError

from rag_common.errors import InvalidInput
from rag_common.schemas import DocumentAcl, PrincipalName, WireModel

__all__ = [
    "ALL_SCOPES", "EVERYONE", "IDENTITY_HEADER", "TENANT_PATTERN", "DocumentAcl", "Identity", "PrincipalName",
    "Scope", "TenantName", "decode_identity", "encode_identity", "group_principal", "readers_of", "user_principal",
]

#: ``chat``: ask, stream, OpenAI endpoint, own conversations. ``ingest``: add, list and delete the
#: tenant's documents. ``admin``: key management and the audit log.
Scope = Literal["chat", "ingest", "admin"]
ALL_SCOPES: tuple[Scope, ...] = ("chat", "ingest", "admin")

#: Tenants name index partitions and Redis keys: a short, plain character set.
TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
TenantName = Annotated[str, StringConstraints(pattern=TENANT_PATTERN)]

#: The principal every document without an ACL is readable by (within its tenant).
EVERYONE = "*"

IDENTITY_HEADER = "X-RAG-Identity"


class Identity(WireModel):
    tenant: TenantName
    user: PrincipalName
    groups: list[PrincipalName] = Field(default_factory=list, max_length=256)
    scopes: list[Scope] = Field(default_factory=list)

    def principals(self) -> list[str]:
        """What this identity reads as: everyone-in-the-tenant, itself, and each of its groups."""
        return [EVERYONE, user_principal(self.user), *(group_principal(group) for group in self.groups)]

    def has_scope(self, scope: Scope) -> bool:
        return scope in self.scopes

    @property
    def owner_key(self) -> str:
        """The identity's own namespace (conversations): tenant and user."""
        return f"{self.tenant}/{self.user}"


def user_principal(user: str) -> str:
    return f"user:{user}"


def group_principal(group: str) -> str:
    return f"group:{group}"


def readers_of(acl: DocumentAcl | None) -> list[str]:
    """The principals a document's chunks are indexed with: ``["*"]`` without an ACL. An ACL that
    names nobody makes the document readable by no one (not by everyone)."""
    if acl is None:
        return [EVERYONE]
    return sorted({*(group_principal(g) for g in acl.groups), *(user_principal(u) for u in acl.users)})


def encode_identity(identity: Identity) -> str:
    """The ``X-RAG-Identity`` header value: the identity's JSON, base64url (headers are latin-1)."""
    return base64.urlsafe_b64encode(identity.model_dump_json().encode("utf-8")).decode("ascii")


def identity_headers(identity: Identity) -> dict[str, str]:
    """The headers of an internal call made on ``identity``'s behalf."""
    return {IDENTITY_HEADER: encode_identity(identity)}


def decode_identity(value: str) -> Identity:
    try:
        return Identity.model_validate_json(base64.urlsafe_b64decode(value.encode("ascii")))
    except (ValidationError, binascii.Error, UnicodeError, ValueError) as exc:
        raise InvalidInput(f"malformed {IDENTITY_HEADER} header") from exc
