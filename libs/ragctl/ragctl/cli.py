"""``ragctl``: run the local stack and talk to it."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import httpx
import typer
from rich.console import Console

from ragctl.stack import DEFAULT_PORTS, StackError, start_stack

app = typer.Typer(no_args_is_help=True, add_completion=False, help=__doc__)
console = Console()

REPO_ROOT = Path(__file__).resolve().parents[3]


def upload_files(gateway_url: str, paths: list[Path], timeout_s: float = 600.0) -> dict:
    files = [("files", (path.name, path.read_bytes(), "application/octet-stream")) for path in paths]
    response = httpx.post(f"{gateway_url}/v1/documents", files=files, timeout=timeout_s)
    if response.status_code >= 400:
        raise typer.BadParameter(f"ingestion failed: HTTP {response.status_code}: {response.text[:500]}")
    return response.json()


def _expand(paths: list[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise typer.BadParameter(f"{path} does not exist")
    return found


@app.command()
def ingest(
    paths: list[Path] = typer.Argument(..., help="Files or directories to ingest"),
    gateway: str = typer.Option("http://127.0.0.1:8000", help="Gateway base URL"),
) -> None:
    """Upload files through the gateway and print the ingestion summary."""
    result = upload_files(gateway, _expand(paths))
    console.print_json(data=result)


@app.command()
def up(
    data_dir: Path = typer.Option(REPO_ROOT / "var", help="Index, Redis data and logs"),
    demo_corpus: Path = typer.Option(REPO_ROOT / "docs", help="Ingested at start; empty string to skip"),
) -> None:
    """Start Redis, the local LLM and the five services; ingest the demo corpus; run until Ctrl-C."""
    ports = dict(DEFAULT_PORTS)
    console.print(f"[bold]starting the stack[/] (logs in {data_dir / 'logs'})")
    started = time.perf_counter()
    try:
        stack, _ = start_stack(ports, data_dir)
    except StackError as exc:
        console.print(f"[red]could not start the stack:[/] {exc}")
        raise typer.Exit(1) from exc
    gateway = f"http://127.0.0.1:{ports['gateway']}"
    try:
        console.print(f"all services ready in {time.perf_counter() - started:.1f}s")
        if str(demo_corpus) and demo_corpus.is_dir():
            files = sorted(demo_corpus.glob("*.md"))
            summary = upload_files(gateway, files)
            console.print(
                f"ingested demo corpus {demo_corpus}: {summary['documents']} documents, "
                f"{summary['chunks']} chunks, {summary['skipped']} unchanged, {len(summary['failed'])} failed"
            )
        for name, port in ports.items():
            console.print(f"  {name:<10} {port}")
        console.print("\n[bold]try:[/]")
        console.print(
            f"curl -s {gateway}/v1/chat -H 'content-type: application/json' "
            "-d '{\"message\": \"What does the reranker service do?\"}'",
            soft_wrap=True,
        )
        console.print("\nCtrl-C stops everything.")
        stop = threading.Event()
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            while not stop.is_set():
                dead = [p.name for p in stack.processes if not p.alive()]
                if dead:
                    console.print(f"[red]process exited: {', '.join(dead)}[/] (see {data_dir / 'logs'})")
                    break
                stop.wait(1.0)
        except KeyboardInterrupt:
            pass
    finally:
        console.print("stopping...")
        stack.stop()


if __name__ == "__main__":
    app()
