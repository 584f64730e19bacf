"""``ragctl ingest`` against a real gateway + retriever, and the upload client's batching rules."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import pytest
from fpdf import FPDF
from typer.testing import CliRunner

from ragctl.cli import app, upload_files
from ragctl.ingest_client import IngestOptions, Ingestion, Upload, make_batches, url_upload_name
from ragctl.stack import free_port

runner = CliRunner()


def small_pdf(text: str) -> bytes:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=11)
    pdf.add_page()
    pdf.multi_cell(0, 6, text)
    return bytes(pdf.output())


def invoke(*args: str):
    return runner.invoke(app, ["ingest", *args], env={"COLUMNS": "200"})


def documents(gateway_url: str) -> dict[str, dict]:
    listed = httpx.get(f"{gateway_url}/v1/documents", timeout=30).json()["documents"]
    return {document["doc_id"]: document for document in listed}


def test_ingest_directories_files_and_urls_reporting_each_failure(tmp_path, gateway_url, web_server):
    corpus = tmp_path / "corpus"
    (corpus / "notes").mkdir(parents=True)
    (corpus / ".git").mkdir()
    (corpus / "valves.md").write_text("# Valves\n\n## Gate valves\n\nGate valves isolate a pipe section fully.")
    (corpus / "notes" / "ops.txt").write_text("Restart the booster pump after a power cut and check the pressure.")
    (corpus / "notes" / "manual.pdf").write_bytes(small_pdf("Bleed the air from the pump casing before the first start."))
    (corpus / "notes" / "broken.json").write_text('{"text": ')
    (corpus / "notes" / "photo.png").write_bytes(b"\x89PNG\r\n")
    (corpus / ".git" / "config").write_text("[core]")
    single = tmp_path / "single.md"
    single.write_text("# Seals\n\nMechanical seals need a wet run.")

    page = "<html><head><title>Crème pumps</title></head><body><article><h1>Crème pumps</h1><p>" + \
        "Pumps for crème pâtissière must be hygienic and easy to strip for cleaning every day. " * 3 + \
        "</p></article></body></html>"
    site = web_server({
        "/pumps": (200, "text/html; charset=iso-8859-1", page.encode("latin-1")),
        "/faq.md": (200, "text/markdown", b"# FAQ\n\nHow often to grease? Every six months."),
        "/logo": (200, "image/png", b"\x89PNG\r\n"),
    })
    refused = f"http://127.0.0.1:{free_port()}/nothing-listens"
    urls = [f"{site}/pumps", f"{site}/faq.md", f"{site}/missing", f"{site}/logo", refused]

    result = invoke(str(corpus), str(single), str(tmp_path / "nope.md"), *urls,
                    "--gateway", gateway_url, "--batch-size", "2", "--concurrency", "2", "--json")
    assert result.exit_code == 1, result.output
    summary = json.loads(result.stdout)
    host = site.removeprefix("http://").replace(":", "_")
    written = {"valves.md", "ops.txt", "manual.pdf", "single.md", f"{host}_pumps.html", f"{host}_faq.md"}
    assert set(summary["doc_ids"]) == written
    assert (summary["documents"], summary["skipped"]) == (6, 0)
    assert summary["chunks"] >= 6
    reasons = {failure["name"]: failure["reason"] for failure in summary["failed"]}
    assert reasons == {
        "broken.json": "invalid JSON: Expecting value at line 1 column 10",
        str(tmp_path / "nope.md"): "no such file or directory",
        f"{site}/missing": "could not fetch: HTTP 404",
        f"{site}/logo": "unsupported content type 'image/png'",
        refused: reasons[refused],
    }
    assert reasons[refused].startswith("could not fetch: ConnectError")
    assert summary["ignored"] == [str(corpus / "notes" / "photo.png")]

    indexed = documents(gateway_url)
    assert written <= set(indexed)
    assert indexed[f"{host}_pumps.html"]["title"] == "Crème pumps"  # latin-1 page re-encoded as UTF-8
    assert indexed["manual.pdf"]["chunks"] == 1


def test_summary_table_and_exit_code_zero_then_unchanged_on_the_second_run(tmp_path, gateway_url):
    corpus = tmp_path / "clean"
    corpus.mkdir()
    for i in range(3):
        (corpus / f"clean-{i}.md").write_text(f"# Clean {i}\n\nDocument number {i} about filter cartridges.")

    first = invoke(str(corpus), "--gateway", gateway_url)
    assert first.exit_code == 0, first.output
    assert "documents written" in first.output
    lines = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in first.output.splitlines() if line.count("│") == 3}
    assert lines == {"documents written": "3", "chunks written": "3", "skipped (unchanged)": "0", "failed": "0"}

    second = invoke(str(corpus), "--gateway", gateway_url)
    assert second.exit_code == 0, second.output
    lines = {line.split("│")[1].strip(): line.split("│")[2].strip() for line in second.output.splitlines() if line.count("│") == 3}
    assert lines["skipped (unchanged)"] == "3" and lines["documents written"] == "0"


def test_acl_options_make_the_upload_readable_by_those_named_only(tmp_path, gateway_url):
    (tmp_path / "salaries.md").write_text("# Salaries\n\nThe salary bands of the lab technicians.")
    (tmp_path / "rota.txt").write_text("The night rota of the lab technicians.")
    result = invoke(str(tmp_path), "--gateway", gateway_url, "--acl-group", "hr", "--acl-group", "finance",
                    "--acl-user", "dean", "--json")
    assert result.exit_code == 0, result.output
    readers = ["group:finance", "group:hr", "user:dean"]
    assert json.loads(result.output)["readers"] == {"rota.txt": readers, "salaries.md": readers}
    # Without the options: the whole tenant again (the same text: only the readers change).
    again = json.loads(invoke(str(tmp_path / "rota.txt"), "--gateway", gateway_url, "--json").output)
    assert (again["documents"], again["readers"]) == (1, {"rota.txt": ["*"]})


def test_failures_are_listed_with_their_reason(tmp_path, gateway_url):
    (tmp_path / "empty.txt").write_text("")
    result = invoke(str(tmp_path / "empty.txt"), "--gateway", gateway_url)
    assert result.exit_code == 1
    assert "empty.txt" in result.output and "file is empty" in result.output


def test_upload_files_returns_the_summed_ingest_response(tmp_path, gateway_url):
    paths = []
    for i in range(3):
        path = tmp_path / f"upload-{i}.txt"
        path.write_text(f"Upload helper document {i} about pressure gauges.")
        paths.append(path)
    summary = upload_files(gateway_url, paths)
    assert (summary["documents"], summary["chunks"], summary["failed"]) == (3, 3, [])
    assert summary["doc_ids"] == ["upload-0.txt", "upload-1.txt", "upload-2.txt"]


def test_a_gateway_that_is_down_fails_every_file_with_the_reason(tmp_path):
    (tmp_path / "a.txt").write_text("text")
    result = invoke(str(tmp_path), "--gateway", f"http://127.0.0.1:{free_port()}", "--json")
    assert result.exit_code == 1
    [failure] = json.loads(result.stdout)["failed"]
    assert failure["name"] == "a.txt" and failure["reason"].startswith("upload failed: ConnectError")


# --------------------------------------------------------------------------- client rules (no server)


def upload(name: str, size: int) -> Upload:
    return Upload(name=name, origin=name, size=size, data=b"x" * size)


def test_batches_close_at_the_file_count_or_the_byte_budget():
    uploads = [upload("a", 10), upload("b", 10), upload("c", 10), upload("big", 500), upload("d", 10), upload("e", 60)]
    batches = make_batches(uploads, batch_size=3, batch_bytes=100)
    assert [[u.name for u in batch] for batch in batches] == [["a", "b", "c"], ["big"], ["d", "e"]]


@pytest.mark.parametrize(
    ("url", "suffix", "name"),
    [
        ("https://example.com/docs/pumps.html", ".html", "example.com_docs_pumps.html"),
        ("https://example.com/", ".html", "example.com.html"),
        ("http://127.0.0.1:8080/guide?lang=en", ".html", "127.0.0.1_8080_guide_"),
        ("https://example.com/files/manual", ".pdf", "example.com_files_manual.pdf"),
    ],
)
def test_url_names_are_host_and_path_flattened(url, suffix, name):
    assert url_upload_name(url, suffix).startswith(name)
    assert url_upload_name(url, suffix).endswith(suffix)


def fake_gateway(handler) -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.MockTransport(handler))


def file_names(request: httpx.Request) -> list[str]:
    body = request.read().decode("latin-1")
    return [part.split('"')[0] for part in body.split('filename="')[1:]]


def test_at_most_concurrency_batches_are_in_flight(tmp_path):
    for i in range(12):
        (tmp_path / f"doc-{i:02d}.txt").write_text(f"document {i}")
    active, peak, seen = 0, 0, []

    async def handler(request: httpx.Request) -> httpx.Response:
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(0.05)
        active -= 1
        names = file_names(request)
        seen.append(names)
        return httpx.Response(200, json={"documents": len(names), "chunks": len(names), "doc_ids": names})

    progress: list[int] = []

    async def run():
        async with fake_gateway(handler) as client:
            ingestion = Ingestion("http://gw", IngestOptions(batch_size=2, concurrency=3), client=client,
                                  on_total=progress.append, on_progress=progress.append)
            return await ingestion.run([tmp_path])

    summary = asyncio.run(run())
    assert peak == 3
    assert len(seen) == 6 and all(len(batch) == 2 for batch in seen)
    assert (summary.documents, summary.failed) == (12, [])
    assert progress[0] == 12 and sum(progress[1:]) == 12


def test_a_batch_too_large_for_the_gateway_is_split_and_transient_errors_are_retried(tmp_path):
    for i in range(4):
        (tmp_path / f"doc-{i}.txt").write_text(f"document {i}")
    calls: list[list[str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        names = file_names(request)
        calls.append(names)
        if len(names) > 1:
            return httpx.Response(413, json={"error": "request too large"})
        if names == ["doc-2.txt"] and calls.count(["doc-2.txt"]) == 1:
            return httpx.Response(503, json={"error": "retriever failed", "stage": "retriever"})
        if names == ["doc-3.txt"]:
            return httpx.Response(422, json={"error": "invalid"})
        return httpx.Response(200, json={"documents": 1, "chunks": 1, "doc_ids": names})

    async def run():
        async with fake_gateway(handler) as client:
            return await Ingestion("http://gw", IngestOptions(batch_size=4), client=client).run([tmp_path])

    summary = asyncio.run(run())
    assert summary.doc_ids == ["doc-0.txt", "doc-1.txt", "doc-2.txt"]
    assert [(f.name, f.reason) for f in summary.failed] == [("doc-3.txt", "HTTP 422: invalid")]
    assert calls.count(["doc-2.txt"]) == 2  # 503, then retried


def test_files_with_the_same_name_are_not_sent_twice(tmp_path):
    for directory in ("a", "b"):
        (tmp_path / directory).mkdir()
        (tmp_path / directory / "README.md").write_text(f"# {directory}")

    def handler(request: httpx.Request) -> httpx.Response:
        names = file_names(request)
        return httpx.Response(200, json={"documents": len(names), "chunks": len(names), "doc_ids": names})

    async def run():
        async with fake_gateway(handler) as client:
            return await Ingestion("http://gw", client=client).run([tmp_path])

    summary = asyncio.run(run())
    assert summary.doc_ids == ["README.md"]
    [failure] = summary.failed
    assert failure.name == str(tmp_path / "b" / "README.md")
    assert "same file name as" in failure.reason and str(tmp_path / "a" / "README.md") in failure.reason


def test_files_over_the_size_limit_are_not_sent(tmp_path):
    (tmp_path / "big.txt").write_bytes(b"x" * 2000)

    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("nothing should be sent")

    async def run():
        async with fake_gateway(handler) as client:
            return await Ingestion("http://gw", IngestOptions(max_file_bytes=1000), client=client).run([tmp_path])

    summary = asyncio.run(run())
    assert [(f.name, f.reason) for f in summary.failed] == [("big.txt", "larger than the 0.000953674 MiB file limit")]


def test_the_client_knows_every_suffix_the_retriever_parses():
    from rag_retriever.parsers import REGISTRY
    from rag_common.upload_formats import SUPPORTED_SUFFIXES

    assert SUPPORTED_SUFFIXES == set(REGISTRY.extensions)


def test_paths_are_expanded_recursively_in_order(tmp_path):
    from ragctl.ingest_client import collect_paths

    (tmp_path / "b").mkdir()
    (tmp_path / "a.md").write_text("x")
    (tmp_path / "b" / "c.txt").write_text("x")
    (tmp_path / "b" / ".hidden.md").write_text("x")
    uploads, failures, ignored = collect_paths([tmp_path])
    assert [Path(u.origin).relative_to(tmp_path).as_posix() for u in uploads] == ["a.md", "b/c.txt"]
    assert failures == [] and ignored == []
