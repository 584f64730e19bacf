"""The client side of ``ragctl ingest``: collect files and URLs, upload them in batches.

- Paths: a file is sent as is (the server says why it rejects it); a directory is walked recursively
  (hidden entries and symlinked directories skipped), and only files with a suffix the retriever
  parses are sent, the others are counted as *ignored*.
- URLs (``http://``, ``https://``) are fetched with httpx (redirects followed, size capped). The
  response's content type picks the suffix (``text/html`` → ``.html``, ...), falling back to the
  URL's own suffix for generic types; non-UTF-8 text is re-encoded to UTF-8 from the declared
  charset. The uploaded name, which becomes the document id, is the host and path flattened
  (``example.com_docs_pumps.html``), so pages of different sites do not collide.
- A document's id is its file name, so two inputs with the same name would overwrite each other:
  the second is reported as failed instead of sent.
- Batches close at ``batch_size`` files or ``batch_bytes`` bytes (a larger file goes alone). At most
  ``concurrency`` batches are in flight; the next batch's files are read only when one finishes,
  so memory holds at most ``concurrency`` batches. A batch the gateway finds too large (413) is split
  in two and retried; transport errors and 502/503/504 are retried twice (ingestion is idempotent:
  unchanged documents are skipped), then every file of the batch is reported failed.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import httpx

from rag_common.http import error_text
from rag_common.upload_formats import GENERIC_MIME_TYPES, SUPPORTED_SUFFIXES, format_for_mime

RETRY_STATUSES = frozenset({502, 503, 504})
MIB = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Upload:
    """One file to send: ``name`` is the uploaded file name (the document id), ``origin`` its path or URL."""

    name: str
    origin: str
    size: int
    path: Path | None = None
    data: bytes | None = None
    content_type: str = "application/octet-stream"

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.path is not None
        return self.path.read_bytes()


@dataclass(frozen=True, slots=True)
class Failure:
    name: str
    reason: str


@dataclass(slots=True)
class IngestSummary:
    documents: int = 0
    chunks: int = 0
    skipped: int = 0
    failed: list[Failure] = field(default_factory=list)
    doc_ids: list[str] = field(default_factory=list)
    #: Who may read each written document, as the retriever reports it.
    readers: dict[str, list[str]] = field(default_factory=dict)
    #: Files found in directories but not sent (unsupported suffix).
    ignored: list[str] = field(default_factory=list)

    def add_response(self, body: dict[str, Any]) -> None:
        self.documents += int(body.get("documents", 0))
        self.chunks += int(body.get("chunks", 0))
        self.skipped += int(body.get("skipped", 0))
        self.failed.extend(Failure(str(f.get("name", "?")), str(f.get("reason", "?"))) for f in body.get("failed", []))
        self.doc_ids.extend(str(doc_id) for doc_id in body.get("doc_ids", []))
        self.readers.update(body.get("readers", {}))

    def as_dict(self) -> dict[str, Any]:
        """The gateway's ``IngestResponse`` shape, summed over batches (plus ``ignored``)."""
        return {
            "documents": self.documents,
            "chunks": self.chunks,
            "skipped": self.skipped,
            "failed": [{"name": failure.name, "reason": failure.reason} for failure in self.failed],
            "doc_ids": list(self.doc_ids),
            "readers": dict(self.readers),
            "ignored": list(self.ignored),
        }


@dataclass(frozen=True, slots=True)
class IngestOptions:
    batch_size: int = 16
    batch_bytes: int = 8 * MIB
    concurrency: int = 2
    timeout_s: float = 600.0
    #: Larger files are reported failed without being sent (the retriever's default upload limit).
    max_file_bytes: int = 20 * MIB
    retries: int = 2
    #: Sent as ``Authorization: Bearer`` to the gateway only (never to the pages being downloaded).
    api_key: str | None = None
    #: Who may read what is uploaded (``{"groups": [...], "users": [...]}``); None: everyone in the tenant.
    acl: dict[str, list[str]] | None = None

    def form_fields(self) -> dict[str, str]:
        """The non-file fields of each upload request."""
        return {} if self.acl is None else {"acl": json.dumps(self.acl)}


def auth_headers(api_key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {api_key}"} if api_key else {}


def is_url(target: str) -> bool:
    return target.startswith(("http://", "https://"))


def collect_paths(targets: Sequence[str | Path]) -> tuple[list[Upload], list[Failure], list[str]]:
    """Files to send, paths that do not exist (as failures), and directory files ignored for their suffix."""
    uploads: list[Upload] = []
    failures: list[Failure] = []
    ignored: list[str] = []
    for target in targets:
        path = Path(target)
        if path.is_dir():
            for file in _walk(path):
                if file.suffix.lower() in SUPPORTED_SUFFIXES:
                    uploads.append(_local(file))
                else:
                    ignored.append(str(file))
        elif path.is_file():
            uploads.append(_local(path))
        else:
            failures.append(Failure(str(target), "no such file or directory"))
    return uploads, failures, ignored


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for directory, subdirectories, files in os.walk(root):  # does not follow symlinked directories
        subdirectories[:] = sorted(d for d in subdirectories if not d.startswith("."))
        found.extend(Path(directory) / name for name in sorted(files) if not name.startswith("."))
    return found


def _local(path: Path) -> Upload:
    return Upload(name=path.name, origin=str(path), size=path.stat().st_size, path=path)


def url_upload_name(url: str, suffix: str) -> str:
    """``https://example.com/docs/pumps?v=2`` → ``example.com_docs_pumps_<hash of query>.html``."""
    parts = urlsplit(url)
    stem = f"{parts.netloc}{parts.path}".rstrip("/")
    if parts.query:
        stem += "_" + hashlib.sha1(parts.query.encode()).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", stem).strip("._") or "download"
    if PurePosixPath(name).suffix.lower() != suffix:
        name += suffix
    return name


def _suffix_for(url: str, content_type: str) -> str | None:
    named = format_for_mime(content_type)
    if named is not None:
        return named.suffixes[0]
    mime = content_type.split(";", 1)[0].strip().lower()
    url_suffix = PurePosixPath(urlsplit(url).path).suffix.lower()
    if mime in GENERIC_MIME_TYPES and url_suffix in SUPPORTED_SUFFIXES:
        return url_suffix
    return None


async def fetch_url(client: httpx.AsyncClient, url: str, options: IngestOptions) -> Upload | Failure:
    try:
        async with client.stream("GET", url, follow_redirects=True, timeout=min(options.timeout_s, 60.0)) as response:
            if response.status_code >= 400:
                return Failure(url, f"could not fetch: HTTP {response.status_code}")
            content_type = response.headers.get("content-type", "")
            suffix = _suffix_for(str(response.url), content_type)
            if suffix is None:
                return Failure(url, f"unsupported content type {content_type or '(none)'!r}")
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > options.max_file_bytes:
                    return Failure(url, f"larger than the {options.max_file_bytes / MIB:g} MiB file limit")
                chunks.append(chunk)
            data = b"".join(chunks)
            charset = (response.charset_encoding or "").lower()
            if suffix != ".pdf" and charset and charset.replace("_", "-") not in ("utf-8", "utf8", "ascii", "us-ascii"):
                try:  # the retriever reads text as UTF-8: transcode from the declared charset
                    data = data.decode(charset).encode("utf-8")
                except (LookupError, UnicodeDecodeError):
                    return Failure(url, f"cannot decode the page as its declared charset {charset!r}")
    except httpx.HTTPError as exc:
        return Failure(url, f"could not fetch: {type(exc).__name__}: {exc}".rstrip(": "))
    mime = content_type.split(";", 1)[0].strip() or "application/octet-stream"
    return Upload(url_upload_name(str(response.url), suffix), url, len(data), data=data, content_type=mime)


def make_batches(uploads: Sequence[Upload], batch_size: int, batch_bytes: int) -> list[list[Upload]]:
    """Consecutive batches of at most ``batch_size`` files and ``batch_bytes`` bytes (a larger file alone)."""
    batches: list[list[Upload]] = []
    current: list[Upload] = []
    used = 0
    for upload in uploads:
        if current and (len(current) >= batch_size or used + upload.size > batch_bytes):
            batches.append(current)
            current, used = [], 0
        current.append(upload)
        used += upload.size
    if current:
        batches.append(current)
    return batches


class Ingestion:
    """One run: ``await run(targets)``; ``on_total(n)`` then ``on_progress(k)`` as batches of ``k`` files end."""

    def __init__(
        self,
        gateway_url: str,
        options: IngestOptions | None = None,
        *,
        client: httpx.AsyncClient | None = None,
        on_total: Callable[[int], None] | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        self.gateway_url = gateway_url.rstrip("/")
        self.options = options or IngestOptions()
        self._client = client
        self._on_total = on_total or (lambda total: None)
        self._on_progress = on_progress or (lambda done: None)

    async def run(self, targets: Sequence[str | Path]) -> IngestSummary:
        client = self._client or httpx.AsyncClient(timeout=self.options.timeout_s)
        try:
            return await self._run(client, targets)
        finally:
            if self._client is None:
                await client.aclose()

    async def _run(self, client: httpx.AsyncClient, targets: Sequence[str | Path]) -> IngestSummary:
        summary = IngestSummary()
        urls = [str(target) for target in targets if is_url(str(target))]
        uploads, failures, summary.ignored = collect_paths([t for t in targets if not is_url(str(t))])
        summary.failed.extend(failures)
        gate = asyncio.Semaphore(self.options.concurrency)

        async def fetch(url: str) -> Upload | Failure:
            async with gate:
                return await fetch_url(client, url, self.options)

        for fetched in await asyncio.gather(*(fetch(url) for url in urls)):
            (uploads if isinstance(fetched, Upload) else summary.failed).append(fetched)

        uploads = self._screen(uploads, summary)
        self._on_total(len(uploads))
        in_flight = asyncio.Semaphore(self.options.concurrency)
        tasks: list[asyncio.Task[None]] = []

        async def send(batch: list[Upload]) -> None:
            try:
                await self._send(client, batch, summary)
            except Exception as exc:  # noqa: BLE001 - one bad batch must not end the run
                summary.failed.extend(Failure(u.name, f"upload failed: {type(exc).__name__}: {exc}") for u in batch)
            finally:
                in_flight.release()
                self._on_progress(len(batch))

        for batch in make_batches(uploads, self.options.batch_size, self.options.batch_bytes):
            await in_flight.acquire()  # back-pressure: the next batch waits for a free slot
            tasks.append(asyncio.create_task(send(batch)))
        await asyncio.gather(*tasks)
        return summary

    def _screen(self, uploads: list[Upload], summary: IngestSummary) -> list[Upload]:
        kept: list[Upload] = []
        first: dict[str, str] = {}
        for upload in uploads:
            if upload.name in first:
                summary.failed.append(Failure(
                    upload.origin,
                    f"same file name as {first[upload.name]}: the document id is the file name, "
                    "so one would replace the other; rename one",
                ))
            elif upload.size > self.options.max_file_bytes:
                summary.failed.append(
                    Failure(upload.name, f"larger than the {self.options.max_file_bytes / MIB:g} MiB file limit")
                )
            else:
                first[upload.name] = upload.origin
                kept.append(upload)
        return kept

    async def _send(self, client: httpx.AsyncClient, batch: list[Upload], summary: IngestSummary) -> None:
        try:
            files = [("files", (upload.name, upload.read(), upload.content_type)) for upload in batch]
        except OSError as exc:
            if len(batch) > 1:  # find the unreadable file(s), send the others
                for upload in batch:
                    await self._send(client, [upload], summary)
                return
            summary.failed.append(Failure(batch[0].name, f"cannot read the file: {exc.strerror or exc}"))
            return
        reason = ""
        for attempt in range(self.options.retries + 1):
            if attempt:
                await asyncio.sleep(0.5 * 2 ** (attempt - 1))
            try:
                response = await client.post(
                    f"{self.gateway_url}/v1/documents",
                    files=files,
                    data=self.options.form_fields(),
                    timeout=self.options.timeout_s,
                    headers=auth_headers(self.options.api_key),
                )
            except httpx.HTTPError as exc:
                reason = f"upload failed: {type(exc).__name__}: {exc}".rstrip(": ")
                continue
            if response.status_code == 200:
                summary.add_response(response.json())
                return
            if response.status_code == 413 and len(batch) > 1:
                del files  # release the bytes before the halves read them again
                middle = len(batch) // 2
                await self._send(client, batch[:middle], summary)
                await self._send(client, batch[middle:], summary)
                return
            reason = f"HTTP {response.status_code}: {error_text(response)}"
            if response.status_code not in RETRY_STATUSES:
                break
        summary.failed.extend(Failure(upload.name, reason) for upload in batch)




def ingest(
    targets: Sequence[str | Path],
    gateway_url: str,
    options: IngestOptions | None = None,
    *,
    on_total: Callable[[int], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> IngestSummary:
    """Synchronous entry point (``ragctl ingest``, ``ragctl up``, the benchmarks)."""
    return asyncio.run(Ingestion(gateway_url, options, on_total=on_total, on_progress=on_progress).run(targets))
