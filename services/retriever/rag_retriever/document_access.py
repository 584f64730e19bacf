"""The access rule for documents, in one place: who may see a document's data and who may change it.

A caller may **read** a document when it is in the caller's tenant and its ``readers`` share a
principal with the caller (``AccessFilter``: ``*`` for a document without an ACL, ``user:<u>``,
``group:<g>``). Every route that returns anything about documents filters by that rule: searches
(inside the backend), the document list, the ingest response's ``duplicates`` and the
``readable`` check the gateway asks before it shows a stored source.

A caller may **write** (replace, change the ACL of, or delete) a document only if it may read it
(and holds ``ingest``, which the gateway checks). A write naming a document of its tenant that it
cannot read is refused with ``Forbidden`` (403) naming only the ids the caller sent: the id of a
document is not secret (two documents of a tenant cannot share one, so an ingest would reveal it
anyway), its text, title, source, ACL and content are. Nothing of such a request is written.

The ``admin`` scope manages every document of its own tenant (list, duplicates, overwrite, ACL
change, delete: what an administrator needs, e.g. to remove a document whose ACL names nobody); the
gateway writes each such call to the audit log. Its searches and chats stay under its own principals.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from rag_common.errors import Forbidden
from rag_common.identity import Identity
from rag_common.schemas import DocumentInfo
from rag_retriever.backends.base import AccessFilter, Catalog
from rag_retriever.records import DEFAULT_TENANT


@dataclass(frozen=True, slots=True)
class DocumentAccess:
    """The documents of ``tenant`` a caller may see and manage: those ``readable`` lets it read, or,
    with ``readable=None`` (the admin scope), all of them."""

    tenant: str
    readable: AccessFilter | None

    @classmethod
    def managing(cls, tenant: str) -> DocumentAccess:
        """Every document of ``tenant``: the admin scope, and tools and tests that act for no caller."""
        return cls(tenant, None)

    @classmethod
    def reading_as(cls, identity: Identity) -> DocumentAccess:
        """What ``identity``'s own principals may read, whatever its scopes: what answers may show it
        (searches, and the stored sources and answers the gateway shows again)."""
        return cls(identity.tenant, AccessFilter.of(identity))

    @classmethod
    def of(cls, identity: Identity) -> DocumentAccess:
        """``identity``'s document view: its read access, or its whole tenant with ``admin``."""
        if identity.has_scope("admin"):
            return cls.managing(identity.tenant)
        return cls.reading_as(identity)

    def may_read(self, readers: Collection[str]) -> bool:
        """Whether a document of this tenant with ``readers`` is in the caller's view."""
        return self.readable is None or self.readable.allows(self.tenant, readers)

    def check_writable(self, doc_ids: Iterable[str], readers: Mapping[str, Collection[str]]) -> None:
        """Refuse (``Forbidden``) when any of ``doc_ids`` is held by a document (``readers``: the
        existing documents' readers) the caller may not read; unknown ids are new documents."""
        refused = sorted(doc_id for doc_id in set(doc_ids) if doc_id in readers and not self.may_read(readers[doc_id]))
        if refused:
            shown = ", ".join(repr(doc_id) for doc_id in refused[:5])
            more = f" and {len(refused) - 5} more" if len(refused) > 5 else ""
            raise Forbidden(
                f"document id {shown}{more}: a document of your tenant that you may not read holds this id, "
                "so you may not replace, re-label or delete it; nothing of this request was written"
            )


class ContentDigest:
    """The ``content_hash`` a caller sees: HMAC-SHA256 of the stored SHA-256 of a document's
    normalised text, keyed per tenant (the tenant's key is an HMAC of the retriever's secret).

    A plain SHA-256 lets anyone holding a guessed text confirm offline that a document holds it; the
    keyed digest can only be compared with other digests the retriever shows (equal contents, equal
    digests within a tenant) and differs across tenants. The index keeps the plain hash (duplicate
    lookups compare it inside the retriever), so the key can change without re-indexing."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise ValueError("the content digest key must be at least 16 bytes")
        self._secret = secret

    def tenant_key(self, tenant: str) -> bytes:
        return hmac.new(self._secret, b"rag content digest\0" + tenant.encode("utf-8"), hashlib.sha256).digest()

    def digest(self, tenant: str, content_hash: str | None) -> str | None:
        """The digest shown for a document of ``tenant`` whose stored hash is ``content_hash``."""
        if content_hash is None:
            return None
        return hmac.new(self.tenant_key(tenant), content_hash.encode("ascii"), hashlib.sha256).hexdigest()

    @classmethod
    def from_key_file(cls, path: Path) -> ContentDigest:
        """The key in ``path``, created once (32 random bytes, hex, mode 0600) when absent, so that
        digests stay the same across restarts."""
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            temporary = path.with_name(f"{path.name}.{secrets.token_hex(8)}.tmp")
            temporary.write_text(secrets.token_hex(32), encoding="ascii")
            temporary.chmod(0o600)
            try:
                # A link never replaces: of two processes starting at once, the first key wins.
                os.link(temporary, path)
            except FileExistsError:
                pass
            finally:
                temporary.unlink()
        return cls(bytes.fromhex(path.read_text(encoding="ascii").strip()))


class DocumentCatalog:
    """What a caller may learn about the documents of its tenant: the list and a readability check,
    both within its ``DocumentAccess``, hashes shown as keyed digests."""

    def __init__(self, backend: Catalog, digest: ContentDigest) -> None:
        self._backend = backend
        self._digest = digest

    async def list(self, access: DocumentAccess) -> list[DocumentInfo]:
        documents = await self._backend.list_documents(tenant=access.tenant, access=access.readable)
        return [
            document.model_copy(update={"content_hash": self._digest.digest(access.tenant, document.content_hash)})
            for document in documents
        ]

    async def readable(self, doc_ids: Collection[str], access: DocumentAccess) -> list[str]:
        """Those of ``doc_ids`` that exist in the caller's tenant and that it may read, sorted."""
        readers = await self._backend.document_readers(doc_ids, tenant=access.tenant)
        return sorted(doc_id for doc_id, held_by in readers.items() if access.may_read(held_by))


#: The default of the ingestor's ``access``: tools and tests that act for no caller. The service
#: always passes the caller's ``DocumentAccess.of(identity)``.
TRUSTED_DEFAULT_TENANT = DocumentAccess.managing(DEFAULT_TENANT)
#: The default of the ingestor's ``digest`` (tools and tests): a key of this process only. The
#: service passes the configured key (``RETRIEVER_CONTENT_DIGEST_KEY`` or its key file).
EPHEMERAL_DIGEST = ContentDigest(secrets.token_bytes(32))
